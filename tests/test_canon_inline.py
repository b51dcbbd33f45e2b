"""inline_staging_helper: a device helper through which a kernel copies a global tile into one of
its shared arrays is inlined, so the GEMM un-tiling sees the tiled loads; helpers of other kinds,
and calls the rule cannot bind, stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.gemm_tiling import GemmTiling
from klineage.source.canon import canonical_form
from klineage.source.canon.inline_helpers import InlineStagingHelper
from klineage.source.model import CudaSource

DATA = Path(__file__).parent / "data" / "canon" / "staged_gemm"
RULE = InlineStagingHelper()


def _expert() -> str:
    return (DATA / "expert.cu").read_text()


def _removable(src: CudaSource) -> list[str]:
    op = GemmTiling()
    out = []
    for s in op.find(src):
        try:
            op.remove(src, s)
            out.append(s.anchor.function)
        except Exception:
            continue
    return out


def test_the_helper_becomes_blocks_bound_to_each_call() -> None:
    out = RULE.rewrite(CudaSource.from_text(_expert(), "e.cu"))
    assert out is not None
    text = out.text
    assert "stage_tile" not in text  # both calls inlined, the definition gone
    # name arguments rename the parameters (template ones too, defaults through them); others bind
    assert "a_tile[r][c] = (r0 + r < M && k0 + c < K) ? A[(r0 + r) * K + k0 + c] : float(0);" in text
    assert "int r0 = (blockIdx.y * kTile);" in text and "int c0 = (blockIdx.x * kTile);" in text
    assert "e < kTile * kTile" in text and "TILE" not in text.replace("kTile", "")
    assert RULE.rewrite(out) is None


def test_inlining_opens_the_gemm_untiling() -> None:
    src = CudaSource.from_text(_expert(), "e.cu")
    assert _removable(src) == []
    assert _removable(canonical_form(src).source) == ["staged_gemm"]


def test_the_inlined_kernel_passes_the_gate(tmp_path: Path) -> None:
    out = RULE.rewrite(CudaSource.from_text(_expert(), "e.cu"))
    assert out is not None
    assert_passes(out.text, DATA, tmp_path)


_CALL = "stage_tile<float, kTile>(A, K, a_tile, blockIdx.y * kTile, k0, M, K);"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a helper that returns early cannot become a block
        (
            "const int t = threadIdx.y * TILE + threadIdx.x;",
            "const int t = threadIdx.y * TILE + threadIdx.x;\n    if (t < 0) return;",
        ),
        # deduced template arguments
        (_CALL, "stage_tile(A, K, a_tile, blockIdx.y * kTile, k0, M, K);"),
        # the helper is named elsewhere than in its calls
        ("constexpr int kTile = 16;", "constexpr int kTile = 16;\nauto* kl_ptr = &stage_tile<float, 16>;"),
        # an array parameter given an expression
        (_CALL, "stage_tile<float, kTile>(A, K, (a_tile), blockIdx.y * kTile, k0, M, K);"),
        # the body declares a name an argument reads (`t`)
        (_CALL, "{ const int t = blockIdx.y * kTile; stage_tile<float, kTile>(A, K, a_tile, t, k0, M, K); }"),
        # the call is part of an expression
        (_CALL, "(void)0, stage_tile<float, kTile>(A, K, a_tile, blockIdx.y * kTile, k0, M, K);"),
    ],
    ids=["return", "deduced", "pointer", "array-expression", "capture", "expression"],
)
def test_calls_the_rule_cannot_bind_are_left_alone(old: str, new: str) -> None:
    text = _expert()
    assert old in text
    assert RULE.rewrite(CudaSource.from_text(text.replace(old, new, 1), "e.cu")) is None


def test_helpers_that_do_not_stage_global_memory_stay() -> None:
    """A helper that only works on shared memory (a selection step, a tree round) is not a copy."""
    text = """
__device__ void bump(int* hist, int* pick, int n) { if (threadIdx.x < n) hist[threadIdx.x] += pick[0]; }
__global__ void k(const float* __restrict__ x, int* out, int n) {
    __shared__ int hist[32];
    __shared__ int pick[1];
    hist[threadIdx.x] = (int)x[threadIdx.x];
    pick[0] = 1;
    __syncthreads();
    bump(hist, pick, n);
    __syncthreads();
    out[threadIdx.x] = hist[threadIdx.x];
}
"""
    assert RULE.rewrite(CudaSource.from_text(text, "k.cu")) is None
