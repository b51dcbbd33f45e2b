"""coalesced_mapping: which thread index walks the contiguous coordinate of a 2-D grid."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, same_code
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.coalesced_mapping import CoalescedMapping
from klineage.deopt.registry import get_operator
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource

OP = CoalescedMapping()

#: a naive GEMM as tutorials write it: size_t brace-initialised coordinates, rows on threadIdx.x,
#: a square block and a grid held in launcher locals that read the block's components
GEMM = """
template <typename T>
__global__ void mm(size_t m, size_t n, size_t k, T const* A, T const* B, T* C) {
    size_t const row{blockIdx.x * blockDim.x + threadIdx.x};
    size_t const col{blockIdx.y * blockDim.y + threadIdx.y};
    if (row < m && col < n) {
        T acc{0};
        for (size_t i{0}; i < k; ++i) acc += A[row * k + i] * B[i * n + col];
        C[row * n + col] = acc;
    }
}
extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
    dim3 const block{32U, 32U, 1U};
    dim3 const grid{(static_cast<unsigned>(M) + block.x - 1U) / block.x, (static_cast<unsigned>(N) + block.y - 1U) / block.y, 1U};
    mm<float><<<grid, block, 0U, s>>>(M, N, K, A, B, C);
}
"""


def test_removal_puts_rows_on_threadidx_x_and_the_gate_accepts_it(tmp_path: Path) -> None:
    """Non-square block, inline dim3s: coordinates trade axes, grid and block trade components."""
    src, folder = fixture("coalesced_mapping", "scaled_add")
    (site,) = OP.find(src)
    assert OP.find_forward(src) == [] and all(p.holds for p in OP.removal_preconditions(src, site))
    simpler = OP.remove(src, site)
    assert "const int c = threadIdx.y + blockIdx.y * blockDim.y;" in simpler.text
    assert "const int r = threadIdx.x + (blockIdx.x * blockDim.x);" in simpler.text
    assert "<<<dim3((R + 7) / 8, (C + 15) / 16), dim3(8, 16), 0, stream>>>" in simpler.text
    assert OP.find(simpler) == []
    assert_passes(simpler.text, folder, tmp_path)
    (fwd,) = OP.find_forward(simpler)
    assert same_code(OP.apply(simpler, fwd).text, src.text)


def test_forward_on_a_tutorial_naive_gemm() -> None:
    """Rows on threadIdx.x (`C[row * n + col]` then strides by n across a warp): the forward step
    puts the column on x, and the grid's references to the block's components follow."""
    src = canonical_form(CudaSource.from_text(GEMM)).source
    assert OP.find(src) == []
    (fwd,) = OP.find_forward(src)
    assert all(p.holds for p in OP.preconditions(src, fwd))
    out = OP.apply(src, fwd).text
    assert "row = blockIdx.y * blockDim.y + threadIdx.y" in out.replace("{", " = ").replace("}", "")
    assert "(static_cast<unsigned>(N) + block.x - 1U) / block.x, (static_cast<unsigned>(M) + block.y" in out
    assert len(OP.find(CudaSource.from_text(out))) == 1


def test_refuses_a_kernel_that_reads_threadidx_elsewhere() -> None:
    """A shared tile indexed by threadIdx.x would change meaning under the swap."""
    src, _ = fixture("coalesced_mapping", "scaled_add")
    text = src.text.replace(
        "const long at",
        "__shared__ float t[8][16];\n        t[threadIdx.y][threadIdx.x] = 0.f;\n        const long at",
    )
    s = CudaSource.from_text(text)
    (site,) = OP.find(s)
    with pytest.raises(Refused, match="mapping_only"):
        OP.remove(s, site)


def test_refuses_a_block_read_outside_the_launch() -> None:
    text = GEMM.replace("mm<float><<<", "int threads = block.x * block.y; (void)threads;\n    mm<float><<<")
    src = CudaSource.from_text(text)
    (fwd,) = OP.find_forward(src)
    with pytest.raises(Refused, match="launch_2d"):
        OP.apply(src, fwd)


def test_no_site_when_the_stores_disagree_or_the_grid_is_1d() -> None:
    both = GEMM.replace("C[row * n + col] = acc;", "C[row * n + col] = acc; C[col * m + row] = acc;")
    assert OP.find(CudaSource.from_text(both)) == [] and OP.find_forward(CudaSource.from_text(both)) == []
    one_d = "__global__ void f(float* o, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = 0.f; }"
    assert OP.find(CudaSource.from_text(one_d)) == []
    assert get_operator("coalesced_mapping") is not None


@settings(max_examples=20, deadline=None)
@given(
    bx=st.sampled_from([8, 16, 32]),
    by=st.sampled_from([1, 2, 4, 8, 32]),
    order=st.sampled_from(
        ["threadIdx.{a} + blockIdx.{a} * blockDim.{a}", "blockDim.{a} * blockIdx.{a} + threadIdx.{a}"]
    ),
)
def test_swap_twice_is_the_identity_and_swaps_the_launch(bx: int, by: int, order: str) -> None:
    """Any spelling of the per-axis index, any block shape: remove then apply gives the kernel back."""
    src, _ = fixture("coalesced_mapping", "scaled_add")
    text = (
        src.text.replace("threadIdx.x + blockIdx.x * blockDim.x", order.format(a="x"))
        .replace("threadIdx.y + (blockIdx.y * blockDim.y)", order.format(a="y"))
        .replace(
            "(C + 15) / 16, (R + 7) / 8), dim3(16, 8)",
            f"(C + {bx - 1}) / {bx}, (R + {by - 1}) / {by}), dim3({bx}, {by})",
        )
    )
    s = CudaSource.from_text(text)
    (site,) = OP.find(s)
    simpler = OP.remove(s, site)
    assert f"dim3({by}, {bx})" in simpler.text
    (fwd,) = OP.find_forward(simpler)
    assert same_code(OP.apply(simpler, fwd).text, text)
