"""tensor_core: WMMA fragments and mma_sync -> scalar FMA loops on the same tiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.tensor_core import TensorCore
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import compiles, load, one_site, passes_gate

OP = TensorCore()


def test_find_and_preconditions(tmp_path: Path) -> None:
    src, _ = load("tensor_core", "wmma_gemm")
    site = one_site(OP, src, kind="wmma")
    assert site.details["shapes"] == "16,16,16"
    facts = {f.name: f for f in OP.preconditions(src, site)}
    assert facts["tile_shape"].holds and "m16n16k16" in facts["tile_shape"].reason
    assert facts["ldm_multiple_of_16_bytes"].holds and facts["input_dtype"].reason.startswith("inputs __half")
    compiles(src.text, tmp_path / "expert")  # the expert itself: real WMMA, nvcc only (emu has no mma.h yet)


def test_remove_gives_scalar_tiles_that_pass_the_gate(tmp_path: Path) -> None:
    src, wl = load("tensor_core", "wmma_gemm")
    out = OP.remove(src, one_site(OP, src, kind="wmma"))
    assert "mma.h" not in out.text and "nvcuda" not in out.text
    assert "kl_wmma::mma_sync(acc, a, b, acc);" in out.text and "acc.x[e] * 0.5f" in out.text
    assert not OP.find(out)
    passes_gate(out.text, wl, tmp_path)


def test_refusals() -> None:
    crossing = CudaSource.from_text(
        "#include <mma.h>\nusing namespace nvcuda;\n"
        "__device__ void step(wmma::fragment<wmma::accumulator, 16, 16, 16, float>& c);\n"
        "__global__ void k(const half* a, float* c) {\n"
        "  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;\n"
        "  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;\n"
        "  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;\n"
        "  wmma::fill_fragment(fc, 0.0f); wmma::load_matrix_sync(fa, a, 16); wmma::load_matrix_sync(fb, a, 16);\n"
        "  wmma::mma_sync(fc, fa, fb, fc); step(fc);\n"
        "  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);\n}\n"
    )
    with pytest.raises(Refused, match="fragments_local"):
        OP.remove(crossing, one_site(OP, crossing, kind="wmma"))
    ptx = CudaSource.from_text(
        "__global__ void k(float* d, unsigned a0, unsigned b0) {\n  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;\n"
        '  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"\n'
        '               : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3) : "r"(a0), "r"(a0), "r"(b0));\n  d[0] = c0 + c1 + c2 + c3;\n}\n'
    )
    with pytest.raises(Refused, match="inline PTX"):
        OP.remove(ptx, one_site(OP, ptx, kind="ptx"))
