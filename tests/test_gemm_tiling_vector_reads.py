"""The tiled GEMM forward reads a thread's micro-tile from shared memory 16 bytes at a time
(issue 25): A's tile is stored k-major (rows padded by 4), and a thread owns its rows and columns
in groups of 4 adjacent ones once the micro-tile size allows, so at 8 x 8 each k step is four
16-byte shared loads for 64 FMAs instead of sixteen 4-byte ones. At 1 x 1 the mapping is the
plain one-output-per-thread one."""

from __future__ import annotations

from pathlib import Path

from deopt_parallel_checks import assert_passes, ptx_of

from klineage.deopt.registry import get_operator
from klineage.source.model import CudaSource

ROOT = Path(__file__).resolve().parents[1]
SGEMM = ROOT / "expert_kernels" / "sgemm"


def _forward(ops: str) -> CudaSource:
    src = CudaSource.from_file(SGEMM / "naive.cu")
    for name in ops.split(","):
        op = get_operator(name)
        src = op.apply(src, op.find_forward(src)[0])
    return src


def test_one_output_per_thread_keeps_the_plain_mapping() -> None:
    text = _forward("gemm_tiling").text
    assert "kl_As[kSgemm_naive_BK][kSgemm_naive_BM + 4]" in text  # k-major A
    assert "constexpr int kl_vm = kSgemm_naive_TM % 4 == 0 ? 4 : 1" in text


def test_the_8x8_micro_tile_reads_shared_memory_by_16_bytes(tmp_path: Path) -> None:
    out = _forward("gemm_tiling,register_blocking,deep_micro_tile")
    assert_passes(out.text, SGEMM, tmp_path, "sgemm_8x8.cu")
    ptx = ptx_of(out.text, tmp_path)
    assert ptx.count("ld.shared.v4.f32") == 4 and "ld.shared.f32" not in ptx
