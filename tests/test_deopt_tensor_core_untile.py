"""tensor_core backward on a WMMA GEMM (issue 25): a shared-tiled kernel accumulating in WMMA
fragments, its epilogue through `store_matrix_sync` into a shared float tile, is read back to the
naive loop (one thread per output, float sum), which the forward step takes onto tensor cores
again: the roundtrip that mines a tensor-core skill. Two idioms: the corpus expert (cp.async
double buffer, 4 x 2 fragments a warp, a per-warp scratch carved out of the A stage, ReLU) and a
fixture (element-wise staging, one fragment a warp, a block-wide staging tile, alpha scaling)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import DATA, assert_passes

from klineage.deopt.base import Refused
from klineage.deopt.deep_micro_tile import DeepMicroTile
from klineage.deopt.gemm_loop import gemm_loops
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.launch_bounds import LaunchBounds
from klineage.deopt.tensor_core import TensorCore
from klineage.source.model import CudaSource

OP = TensorCore()
ROOT = Path(__file__).resolve().parents[1]
LINEAR = ROOT / "expert_kernels" / "linear_relu_bf16"
SCALED = DATA / "tensor_core" / "wmma_scaled"


def _expert_without_launch_bounds() -> CudaSource:
    src = CudaSource.from_file(LINEAR / "expert.cu")
    lb = LaunchBounds()
    return lb.remove(src, lb.find(src)[0])


def _naive_loop(src: CudaSource) -> str:
    """The single naive loop gemm_loop reads in `src` (its factors and stored value)."""
    ((_, g),) = gemm_loops(src)
    assert not isinstance(g, str), g
    return f"{g.a.text} * {g.b.text} -> {' '.join(g.epilogue)}"


def test_fixture_reads_back_to_the_naive_loop_and_forward_again(tmp_path: Path) -> None:
    src = CudaSource.from_file(SCALED / "expert.cu")
    (site,) = OP.find(src)
    facts = OP.removal_preconditions(src, site)
    assert all(f.holds for f in facts), facts
    assert {"fragment_accumulators", "tiled_gemm_read"} <= {f.name for f in facts}
    naive = OP.remove(src, site)
    assert "wmma" not in naive.text and "kl_wmma" not in naive.text and "<mma.h>" not in naive.text
    assert "C[(size_t)row * N + col] = __float2half(alpha * acc);" in naive.text  # the epilogue, per element
    assert "__half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col])" in naive.text
    assert_passes(naive.text, SCALED, tmp_path, "naive.cu")
    (fwd,) = OP.find_forward(naive)
    again = OP.apply(naive, fwd)
    assert [s.details["kind"] for s in OP.find(again)] == ["ptx"]  # tensor cores again, as mma.sync
    assert_passes(again.text, SCALED, tmp_path, "again.cu")


def test_corpus_expert_reads_back_to_its_naive_loop(tmp_path: Path) -> None:
    src = _expert_without_launch_bounds()
    (site,) = OP.find(src)
    naive = OP.remove(src, site)
    assert "cp.async" not in naive.text.split("__global__")[1]  # the kernel body is the plain loop
    want = _naive_loop(CudaSource.from_file(LINEAR / "naive.cu"))
    assert _naive_loop(naive).split(" -> ")[0] == want.split(" -> ")[0]
    assert "fmaxf(acc, 0.0f)" in _naive_loop(naive)
    assert_passes(naive.text, LINEAR, tmp_path, "naive.cu")


def test_forward_kernel_reads_back_too() -> None:
    """wmma_gemm's own output (mma.sync accumulators in registers, the epilogue per element) is
    read back: tensor_core leaves inline PTX alone, deep_micro_tile takes its 128 accumulators a
    thread, and the tiled kernel still reads as the naive loop."""
    naive = CudaSource.from_file(LINEAR / "naive.cu")
    (fwd,) = OP.find_forward(naive)
    mma = OP.apply(naive, fwd)
    (site,) = OP.find(mma)
    assert site.details["kind"] == "ptx" and not all(f.holds for f in OP.removal_preconditions(mma, site))
    op = DeepMicroTile()
    (deep,) = [s for s in op.find(mma) if s.details.get("rederive")]
    assert all(f.holds for f in op.removal_preconditions(mma, deep))
    tiling = GemmTiling()
    (tiled,) = tiling.find(mma)
    back = tiling.untile(mma, tiled, any_depth=True)
    assert _naive_loop(back).split(" -> ")[0] == _naive_loop(naive).split(" -> ")[0]


def test_launch_bounds_refuse_with_the_fact_not_the_scalar_emulation() -> None:
    src = CudaSource.from_file(LINEAR / "expert.cu")
    (site,) = OP.find(src)
    facts = {f.name: f.holds for f in OP.removal_preconditions(src, site)}
    assert facts["fragment_accumulators"] and not facts["no_launch_bounds"]
    with pytest.raises(Refused):
        OP.remove(src, site)


def test_deep_micro_tile_leaves_fragments_to_tensor_core() -> None:
    src = _expert_without_launch_bounds()
    op = DeepMicroTile()
    (site,) = [s for s in op.find(src) if s.details.get("rederive")]
    facts = {f.name: f for f in op.removal_preconditions(src, site)}
    assert not facts["scalar_accumulators"].holds
    assert "tensor_core" in facts["scalar_accumulators"].reason
