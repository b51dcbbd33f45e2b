"""packed_half2: __hfma2/__hmul2/pair conversions -> scalar half math on the two lanes."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.packed_half2 import PackedHalf2
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import load, one_site, passes_gate

OP = PackedHalf2()


def test_remove_rewrites_lane_by_lane(tmp_path: Path) -> None:
    src, wl = load("packed_half2", "gelu_bias_fp16")
    site = one_site(OP, src, function="fma_clamp")
    assert site.details["count"] == "6"
    out = OP.remove(src, site)
    assert "make_half2(__hfma(x.x, w.x, b.x), __hfma(x.y, w.y, b.y))" in out.text
    assert "make_float2(__half2float(t.x), __half2float(t.y))" in out.text
    assert "__hadd(__float2half_rn(f.x), __hmul(__float2half_rn(0.0f), t.x))" in out.text
    assert not OP.find(out)
    passes_gate(out.text, wl, tmp_path)


def test_bf16_pairs_and_type_aliases() -> None:
    src = CudaSource.from_text(
        "#include <cuda_bf16.h>\nusing pair_t = __nv_bfloat162;\n"
        "__device__ pair_t f(const pair_t* w, float a, float b) { return __hmul2(__floats2bfloat162_rn(a, b), w[0]); }\n"
    )
    out = OP.remove(src, OP.find(src)[0])
    assert (
        "make_bfloat162(__hmul(__float2bfloat16_rn(a), w[0].x), __hmul(__float2bfloat16_rn(b), w[0].y))"
        in out.text
    )


def test_refuses_an_operand_that_would_be_evaluated_twice() -> None:
    src = CudaSource.from_text(
        "#include <cuda_fp16.h>\n__device__ __half2 g(__half2 v);\n"
        "__device__ __half2 f(__half2 a) { return __hadd2(a, g(a)); }\n"
    )
    with pytest.raises(Refused, match="evaluated twice"):
        OP.remove(src, OP.find(src)[0])
