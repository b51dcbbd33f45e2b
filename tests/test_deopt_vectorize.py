"""vectorize: float4/uint4/... views -> scalar loops (elementwise idiom) or scalar copies, and back."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.vectorize import Vectorize
from klineage.source.model import CudaSource
from klineage.source.text import normalize
from tests.deopt_kernel_checks import load, one_site, passes_gate

OP = Vectorize()


def test_loop_with_tail_removal_leaves_the_scalar_loop(tmp_path: Path) -> None:
    src, wl = load("vectorize", "saxpy_vec4")
    site = one_site(OP, src, kind="loop_with_tail")
    out = OP.remove(src, site)
    assert (
        "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)" in out.text
    )
    assert "a4[i]" not in out.text and not [s for s in OP.find(out) if s.details["kind"] == "loop_with_tail"]
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.slow
def test_scalarize_rewrites_uint4_accesses(tmp_path: Path) -> None:
    src, wl = load("packed_half2", "gelu_bias_fp16")
    site = one_site(OP, src, kind="scalarize", function="affine_clamp_fp16")
    assert site.details["count"] == "4" and site.details["types"] == "uint4"
    out = OP.remove(src, site)
    assert "kl_scalar_load<uint4>(xr, v)" in out.text and "kl_scalar_store<uint4>(yr, v, out)" in out.text
    assert "reinterpret_cast<const __half2*>(&xv)" in out.text  # a register view, not memory vectorization
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.slow
def test_apply_on_the_scalar_loop_passes_gate_and_roundtrips(tmp_path: Path) -> None:
    src, wl = load("vectorize", "saxpy_vec4", "naive.cu")
    (fwd,) = OP.find_forward(src)
    assert all(f.holds for f in OP.preconditions(src, fwd))
    vec = OP.apply(src, fwd)
    site = one_site(OP, vec, kind="loop_with_tail")
    assert normalize(OP.remove(vec, site).text) == normalize(src.text)
    passes_gate(vec.text, wl, tmp_path)


def test_refuses_a_view_that_is_advanced() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* __restrict__ x, float* y, int n) {\n"
        "  const float4* x4 = reinterpret_cast<const float4*>(x);\n"
        "  x4 += blockIdx.x;\n  float4 v = x4[threadIdx.x];\n  y[threadIdx.x] = v.x + v.w;\n}\n"
    )
    site = one_site(OP, src, kind="scalarize")
    with pytest.raises(Refused, match="advanced"):
        OP.remove(src, site)


def test_apply_refused_when_a_launch_passes_an_offset_pointer() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* __restrict__ a, float* __restrict__ y, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = 2.0f * a[i];\n}\n"
        'extern "C" void launch(const float* a, float* y, int n, cudaStream_t s) { k<<<1, 256, 0, s>>>(a + 1, y, n - 1); }\n'
    )
    (fwd,) = OP.find_forward(src)
    with pytest.raises(Refused, match="aligned_base_pointers"):
        OP.apply(src, fwd)


def test_no_vector_loop_for_a_cross_element_loop() -> None:
    """`a` is read at two offsets, so only the store can be packed (packs.py), not the whole loop."""
    src = CudaSource.from_text(
        "__global__ void k(const float* __restrict__ a, float* __restrict__ y, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = a[i] + a[i + 1];\n}\n"
    )
    sites = OP.find_forward(src)
    assert [s.details["kind"] for s in sites] == ["row_loop_pack"]
    out = OP.apply(src, sites[0]).text
    assert "kl_y_lane[kl_k] = a[i] + a[i + 1];" in out and "kl_a" not in out
