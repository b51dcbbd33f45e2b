"""launch_bounds' second forward step (issue 25): a kernel whose bounds give only the block size
and that keeps a register tile gets a minBlocks capping it at REGISTER_CAP registers; kernels
without a tile, blocks too large for two an SM, and tiles too big for the cap are left alone. The
block size is read through a `dim3` of constant expressions (the tiled sgemm's launch)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from klineage.deopt import launch_bounds as LB
from klineage.deopt.registry import get_operator
from klineage.materialize.providers.offline import apply_everywhere
from klineage.source.model import CudaSource

OP = get_operator("launch_bounds")
ROOT = Path(__file__).resolve().parents[1]

KERNEL = """#include <cuda_runtime.h>
constexpr int TM = 8, TN = 8;

__global__ void __launch_bounds__(256) tiles(const float* A, float* C, int n) {
    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = A[(threadIdx.x * TM + i) % n] * j;
    float s = 0.f;
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) s += acc[i][j];
    C[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" void launch(const float* A, float* C, int n, cudaStream_t stream) {
    tiles<<<n / 256, dim3(32, 256 / 32), 0, stream>>>(A, C, n);
}
"""


def _bounds(text: str) -> list[str]:
    return re.findall(r"__launch_bounds__\(([^)]*)\)", text)


def test_a_register_tiled_kernel_gets_a_cap_of_two_blocks_an_sm() -> None:
    src = CudaSource.from_text(KERNEL, "k.cu")
    (site,) = [s for s in OP.find_forward(src) if s.details.get("kind") == "min_blocks"]
    assert all(p.holds for p in OP.preconditions(src, site)), OP.preconditions(src, site)
    after = OP.apply(src, site)
    assert _bounds(after.text) == ["256, 2"]
    assert _bounds(OP.remove(after, OP.find(after)[0]).text) == []  # removal: the whole attribute


def test_the_tiled_sgemm_launch_is_read_through_its_dim3() -> None:
    src = CudaSource.from_file(ROOT / "expert_kernels" / "sgemm" / "naive.cu")
    for name in ("gemm_tiling", "register_blocking", "deep_micro_tile"):
        op = get_operator(name)
        src = op.apply(src, op.find_forward(src)[0])
    after, done, refused = apply_everywhere(OP, src)
    assert len(done) == 2 and not refused, (done, refused)
    assert _bounds(after.text) == ["256, 2"]


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("float acc[TM][TN];", "float acc[2][TN];", "a tile under MIN_TILE_WORDS: no site"),
        (
            "constexpr int TM = 8, TN = 8;",
            "constexpr int TM = 16, TN = 8;",
            "128 words do not fit under the cap",
        ),
        ("__launch_bounds__(256)", "__launch_bounds__(512)", "one block of 512 already caps at 128"),
        # a tile that fits alone, beside fragments that do not (the flash kernel spilled: 1.9x slower)
        (
            "float acc[TM][TN];",
            "float acc[TM][TN];\n    unsigned frag[8][4];\n    float row[2], part[TM];",
            "arrays past the cap together",
        ),
    ],
)
def test_no_cap_where_it_cannot_bind_or_the_tile_does_not_fit(old: str, new: str, why: str) -> None:
    text = KERNEL.replace(old, new)
    if "512" in new:
        text = text.replace("dim3(32, 256 / 32)", "dim3(32, 512 / 32)")
    src = CudaSource.from_text(text, "k.cu")
    sites = [s for s in OP.find_forward(src) if s.details.get("kind") == "min_blocks"]
    held = [s for s in sites if all(p.holds for p in OP.preconditions(src, s))]
    assert not held, why
    after, _done, _refused = apply_everywhere(OP, src)
    assert all("," not in b for b in _bounds(after.text)), why


def test_the_tile_is_counted_in_four_byte_words() -> None:
    src = CudaSource.from_text(KERNEL.replace("float acc[TM][TN];", "double acc[TM][TN];"), "k.cu")
    assert LB.register_tile_words(src, src.node_for(src.kernels[0])) == 128
