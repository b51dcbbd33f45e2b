"""gemm_tiling: a naive GEMM loop nest, in other authors' spellings, becomes a shared-memory tiled
kernel with a 1 x 1 register micro-tile that register_blocking then scales to a 2-D micro-tile;
both pass the emu gate on odd shapes. Kernels that are not GEMM-shaped are refused with the fact."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import DATA, assert_passes
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.gemm_loop import gemm_loops
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.register_blocking import RegisterBlocking
from klineage.deopt.registry import get_operator
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource

OP = GemmTiling()
RB = RegisterBlocking()
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = DATA / "gemm_tiling"


def _tiled(src: CudaSource) -> tuple[CudaSource, CudaSource]:
    (site,) = OP.find_forward(src)
    assert all(f.holds for f in OP.preconditions(src, site)), OP.preconditions(src, site)
    tiled = OP.apply(src, site)
    (rb_site,) = RB.find_forward(tiled)
    assert all(f.holds for f in RB.preconditions(tiled, rb_site))
    return tiled, RB.apply(tiled, rb_site)


@pytest.mark.parametrize(
    "path",
    [
        FIXTURES / "macro_swapped" / "naive.cu",
        FIXTURES / "transposed_a" / "naive.cu",
        FIXTURES / "lambda_accessor" / "naive.cu",
        FIXTURES / "linear_index" / "naive.cu",
        ROOT / "expert_kernels" / "sgemm" / "naive.cu",
        ROOT / "expert_kernels" / "gemm_bf16" / "naive.cu",
    ],
    ids=lambda p: p.parent.name,
)
def test_tiles_every_idiom(path: Path) -> None:
    src = CudaSource.from_file(path)
    assert OP.find(src) == []
    tiled, blocked = _tiled(src)
    assert len(OP.find(tiled)) == 1 and OP.find_forward(tiled) == []
    assert "__shared__" in tiled.text and "__syncthreads()" in tiled.text
    assert "TM = 4;" in blocked.text and "TN = 4;" in blocked.text
    assert len(OP.find(blocked)) == 1


@pytest.mark.parametrize("name", ["macro_swapped", "transposed_a", "lambda_accessor", "linear_index"])
def test_tiled_and_blocked_pass_the_emu_gate(name: str, tmp_path: Path) -> None:
    tiled, blocked = _tiled(CudaSource.from_file(FIXTURES / name / "naive.cu"))
    assert_passes(blocked.text, FIXTURES / name, tmp_path, f"{name}_blocked.cu")


def test_bf16_blocked_passes_the_emu_gate(tmp_path: Path) -> None:
    wl = ROOT / "expert_kernels" / "gemm_bf16"
    _, blocked = _tiled(CudaSource.from_file(wl / "naive.cu"))
    assert "__bfloat162float(A[" in blocked.text  # staged converted, as the naive loop reads it
    assert_passes(blocked.text, wl, tmp_path, "gemm_bf16_blocked.cu")


def test_transposed_operand_loads_along_its_contiguous_index() -> None:
    src = canonical_form(CudaSource.from_file(FIXTURES / "transposed_a" / "naive.cu")).source
    ((_, g),) = gemm_loops(src)
    assert not isinstance(g, str)
    assert (g.a.pointer, g.a.k_contiguous, g.b.k_contiguous) == ("At", False, False)
    tiled, _ = _tiled(CudaSource.from_file(FIXTURES / "transposed_a" / "naive.cu"))
    # At's row index is its contiguous one: consecutive threads walk rows of the tile
    assert "kl_r = kl_e % kTn_gemm_BM" not in tiled.text
    assert "const int kl_r = kl_e % kGemm_tn_BM, kl_c = kl_e / kGemm_tn_BM;" in tiled.text


def test_registered_in_tiling() -> None:
    assert get_operator("gemm_tiling").category == "tiling"


_NAIVE = """#include <cuda_runtime.h>
__global__ void g(const {t}* A, const {t}* B, float* C, int M, int N, int K) {{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    {guard}
    float acc = {init};
    for (int k = 0; k < K; ++k) acc += {x} * {y};
    C[row * N + col] = acc;{tail}
}}
extern "C" void launch(const {t}* A, const {t}* B, float* C, int M, int N, int K, cudaStream_t s) {{
    g<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, s>>>(A, B, C, M, N, K);
}}
"""
_OK = {
    "t": "float",
    "guard": "if (row >= M || col >= N) return;",
    "init": "0.0f",
    "x": "A[row * K + k]",
    "y": "B[k * N + col]",
    "tail": "",
}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"x": "A[row * K + k * k]"}, "not affine"),
        ({"y": "A[row * K + k]"}, "both factors read row"),
        ({"guard": ""}, "no bound guard"),
        ({"init": "C[row * N + col]"}, "not launch-uniform"),
        ({"t": "__half"}, "accumulator's type"),
        ({"tail": "\n    if (acc > 0.0f) return;"}, "epilogue jumps"),
        ({"x": "A[row * K + col]"}, "reads 2 thread-index locals"),
    ],
)
def test_refuses_what_is_not_a_gemm(change: dict[str, str], reason: str) -> None:
    src = CudaSource.from_text(_NAIVE.format(**{**_OK, **change}), "g.cu")
    ((_, why),) = gemm_loops(canonical_form(src).source)
    assert isinstance(why, str) and reason in why, why
    assert OP.find_forward(src) == []


def test_the_plain_form_qualifies() -> None:
    assert len(OP.find_forward(CudaSource.from_text(_NAIVE.format(**_OK), "g.cu"))) == 1


@settings(max_examples=25, deadline=None)
@given(
    swap_axes=st.booleans(),
    wrapped_guard=st.booleans(),
    update=st.sampled_from(["+=", "= acc +", "fmaf"]),
    a_index=st.sampled_from(
        ["A[row * K + k]", "A[k + K * row]", "A[(size_t)row * K + k]", "AT(row, k)", "__ldg(&A[row * K + k])"]
    ),
    b_index=st.sampled_from(["B[k * N + col]", "B[col + (size_t)k * N]", "BT(k, col)", "b_at(k, col)"]),
)
def test_spellings_of_the_same_loop_nest(
    swap_axes: bool, wrapped_guard: bool, update: str, a_index: str, b_index: str
) -> None:
    ax_r, ax_c = ("x", "y") if swap_axes else ("y", "x")
    stmt = {
        "+=": f"acc += {a_index} * {b_index};",
        "= acc +": f"acc = acc + {a_index} * {b_index};",
        "fmaf": f"acc = fmaf({a_index}, {b_index}, acc);",
    }[update]
    body = f"float acc = 0.0f;\n        for (int k = 0; k < K; k++) {{ {stmt} }}\n        C[row * N + col] = acc;"
    guarded = (
        f"if (row < M && col < N) {{\n        {body}\n    }}"
        if wrapped_guard
        else f"if (row >= M || col >= N) return;\n    {body}"
    )
    text = f"""#define AT(i, j) A[(i) * K + (j)]
#define BT(i, j) B[(i) * N + (j)]
__global__ void g(const float* A, const float* B, float* C, int M, int N, int K) {{
    const int row = threadIdx.{ax_r} + blockIdx.{ax_r} * blockDim.{ax_r};
    const int col = blockDim.{ax_c} * blockIdx.{ax_c} + threadIdx.{ax_c};
    auto b_at = [&](int kk, int j) {{ return B[kk * N + j]; }};
    {guarded}
}}
extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {{
    g<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, s>>>(A, B, C, M, N, K);
}}
"""
    src = CudaSource.from_text(text, "g.cu")
    tiled, blocked = _tiled(src)
    assert len(OP.find(blocked)) == 1
    CudaSource.from_text(blocked.text, "blocked.cu")  # parses


def test_thread_count_comes_from_the_launch_capped_for_the_register_file() -> None:
    """128 threads give a 16 x 8 layout; 1024 (a `dim3 const` local) are capped at 256, so the
    micro-tile can later grow to 8 x 8 within the register file."""
    base = _NAIVE.format(**_OK)
    few = base.replace("dim3(16, 16)", "dim3(32, 4)")
    tiled = OP.apply(CudaSource.from_text(few, "g.cu"), OP.find_forward(CudaSource.from_text(few, "g.cu"))[0])
    assert "constexpr int kG_BM = 8;" in tiled.text and "constexpr int kG_BN = 16;" in tiled.text
    many = base.replace("    g<<<", "    dim3 const block{32U, 32U, 1U};\n    g<<<").replace(
        "dim3(16, 16)", "block"
    )
    src = CudaSource.from_text(many, "g.cu")
    tiled = OP.apply(src, OP.find_forward(src)[0])
    assert "constexpr int kG_BM = 16;" in tiled.text and "constexpr int kG_BN = 16;" in tiled.text


def test_linear_index_is_re_derived_and_bounded_on_both_extents() -> None:
    """A 1-D grid's `idx / N`, `idx % N`: the tiled kernel has threads past N, so its epilogue
    bounds col as well as the author's `idx >= M * N` before re-deriving idx."""
    tiled, _ = _tiled(CudaSource.from_file(FIXTURES / "linear_index" / "naive.cu"))
    assert "const int idx = row * N + col;" in tiled.text
    assert "if (row >= M || col >= N || idx >= M * N) continue;" in tiled.text
