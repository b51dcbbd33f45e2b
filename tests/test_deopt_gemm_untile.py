"""gemm_tiling's removal: a shared-memory tiled GEMM read back to the naive loop (gemm_untile),
whose forward step (gemm_tiling.apply) tiles it again — a mined skill with a roundtrip."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.base import Refused
from klineage.deopt.gemm_loop import gemm_loops
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.registry import get_operator
from klineage.source.model import CudaSource

OP = GemmTiling()
ROOT = Path(__file__).resolve().parents[1]
SGEMM = ROOT / "expert_kernels" / "sgemm"

# A textbook tiled kernel in another idiom than the experts': #define'd tile, scalar accumulator,
# the K coordinate written `t * TILE + tx`, a padded tile, and `beta * C` read in the epilogue.
CLASSIC = """#include <cuda_runtime.h>
#define TILE 16

__global__ void mm_shared(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                          float alpha, float beta, int M, int N, int K) {
    __shared__ float sA[TILE][TILE + 1];
    __shared__ float sB[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int r = blockIdx.y * TILE + ty;
    int c = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int ka = t * TILE + tx, kb = t * TILE + ty;
        sA[ty][tx] = (r < M && ka < K) ? A[r * K + t * TILE + tx] : 0.0f;
        sB[ty][tx] = (kb < K && c < N) ? B[(t * TILE + ty) * N + c] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) sum = fmaf(sA[ty][i], sB[i][tx], sum);
        __syncthreads();
    }
    if (r < M && c < N) C[r * N + c] = alpha * sum + beta * C[r * N + c];
}

extern "C" void launch(const float* A, const float* B, float* C, float alpha, float beta, int M, int N,
                       int K, cudaStream_t stream) {
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    mm_shared<<<grid, block, 0, stream>>>(A, B, C, alpha, beta, M, N, K);
}
"""


def _untiled(text: str) -> CudaSource:
    src = CudaSource.from_text(text, "tiled.cu")
    (site,) = OP.find(src)
    facts = OP.removal_preconditions(src, site)
    assert all(f.holds for f in facts), facts
    return OP.remove(src, site)


def test_classic_tiled_kernel_untiles_to_the_naive_loop() -> None:
    naive = _untiled(CLASSIC)
    ((k, g),) = gemm_loops(naive)
    assert k.name == "mm_shared" and not isinstance(g, str), g
    assert "__shared__" not in naive.text and "__syncthreads" not in naive.text
    assert "A[(size_t)row * K + k] * B[(size_t)k * N + col]" in naive.text
    assert "alpha * acc + beta * C[(size_t)row * N + col]" in naive.text
    assert OP.find(naive) == []


def test_untiled_and_tiled_again_pass_the_emu_gate(tmp_path: Path) -> None:
    naive = _untiled(CLASSIC)
    assert_passes(naive.text, SGEMM, tmp_path, "untiled.cu")
    (site,) = OP.find_forward(naive)
    again = OP.apply(naive, site)
    assert len(OP.find(again)) == 1  # the roundtrip recovers the tiled K loop
    assert_passes(again.text, SGEMM, tmp_path, "retiled.cu")


def _walk_back(src: CudaSource) -> list[CudaSource]:
    """deep_micro_tile (re-derived at 4 x 4), register_blocking, gemm_tiling: each removal's
    forward step recovers the optimization on the simpler state (the walker's roundtrip)."""
    states = [src]
    for name in ("deep_micro_tile", "register_blocking", "gemm_tiling"):
        op = get_operator(name)
        site = op.find(states[-1])[0]
        facts = op.removal_preconditions(states[-1], site)
        assert all(f.holds for f in facts), (name, facts)
        states.append(op.remove(states[-1], site))
        (fwd,) = op.find_forward(states[-1])
        assert op.find(op.apply(states[-1], fwd)), name
    return states[1:]


def test_expert_style_warp_tiled_kernel_walks_back_to_naive(tmp_path: Path) -> None:
    """The sgemm expert as the walker leaves it: warp tiles, a double buffer, a register micro-tile
    sized in a template struct, a template flag fixed at the launch, C stored through an alias."""
    text = (SGEMM / "expert.cu").read_text()
    text = text.replace("__launch_bounds__(Tiles<BM, BN, WM, WN>::kThreads, 2)", "")
    text = text.replace(
        "sgemm_tiled<BM, BN, WM, WN, true>", "sgemm_tiled<BM, BN, WM, WN, false>"
    )  # VEC fixed
    src = CudaSource.from_text(text, "sgemm.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match="one_output_per_thread"):
        OP.remove(src, site)  # the micro-tile goes first
    rederived, blocked_1x1, naive = _walk_back(src)
    assert "constexpr int kSgemm_tiled_TM = 4;" in rederived.text
    assert "constexpr int kSgemm_tiled_TM = 1;" in blocked_1x1.text
    assert "kSgemm_tiled_" not in naive.text  # the forward step's constants go with its tiles
    assert "fmaf(beta, C[(size_t)row * N + col], alpha * acc)" in naive.text
    assert "dim3(16, 16, 1)" in naive.text
    for i, state in enumerate((rederived, naive)):
        assert_passes(state.text, SGEMM, tmp_path, f"sgemm_{i}.cu")


def test_tensor_core_kernel_walks_back_to_naive(tmp_path: Path) -> None:
    """gemm_bf16's expert: mma.sync through inline PTX, a cp.async ring, the output staged in
    shared memory as packed bf16 pairs; untiled, the factors are converted as the MMA reads them."""
    wl = ROOT / "expert_kernels" / "gemm_bf16"
    text = (wl / "expert.cu").read_text().replace("__launch_bounds__(Cfg<BM, BN, STAGES>::kThreads, 1)", "")
    rederived, _, naive = _walk_back(CudaSource.from_text(text, "bf16.cu"))
    assert "__bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)k * N + col])" in naive.text
    assert "C[(size_t)row * N + col] = __float2bfloat16_rn(acc);" in naive.text
    assert "mma_bf16_16816(" not in rederived.text.split("gemm_bf16_mma(")[1].split("template")[0]
    for i, state in enumerate((rederived, naive)):
        assert_passes(state.text, wl, tmp_path, f"bf16_{i}.cu")


def test_a_one_output_kernel_has_no_deep_micro_tile() -> None:
    src = CudaSource.from_text(CLASSIC, "tiled.cu")
    op = get_operator("deep_micro_tile")
    (site,) = op.find(src)
    with pytest.raises(Refused, match="deeper_than_4x4"):
        op.remove(src, site)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"A[r * K + t * TILE + tx]": "A[(r * K + t * TILE + tx) % (M * K)]"}, "offset"),
        ({"C[r * N + c] = alpha * sum": "C[r * N + c] = alpha * (float)r"}, "accumulator"),
        ({"__global__ void mm_shared": "__global__ void __launch_bounds__(128) mm_shared"}, "launch_bounds"),
    ],
    ids=["gathered_operand", "value_not_of_the_sum", "launch_bounds"],
)
def test_refuses_what_it_cannot_read(change: dict[str, str], reason: str) -> None:
    text = CLASSIC
    for a, b in change.items():
        assert a in text
        text = text.replace(a, b)
    src = CudaSource.from_text(text, "tiled.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match=reason):
        OP.remove(src, site)
