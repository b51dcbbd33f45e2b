"""ldg: __ldg read-only loads -> plain loads, and back for const __restrict__ parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.ldg import Ldg
from klineage.source.model import CudaSource
from klineage.source.text import normalize
from tests.deopt_kernel_checks import load, one_site, passes_gate

OP = Ldg()


def test_find_reports_pointers_and_preconditions() -> None:
    src, _ = load("ldg", "axpby")
    site = one_site(OP, src)
    assert site.details["pointers"] == "x,y" and site.details["count"] == "2"
    facts = OP.preconditions(src, site)
    assert all(f.holds for f in facts) and {f.name for f in facts} >= {"read_only:x", "read_only:y"}


def test_remove_gives_plain_loads_and_apply_restores_them(tmp_path: Path) -> None:
    src, wl = load("ldg", "axpby")
    out = OP.remove(src, one_site(OP, src))
    assert "__ldg" not in out.text and "alpha * x[i] + beta * y[i]" in out.text
    assert not OP.find(out)
    (fwd,) = OP.find_forward(out)
    back = OP.apply(out, fwd)
    assert normalize(back.text) == normalize(src.text.replace("__ldg(y + i)", "__ldg(&y[i])"))
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.slow
def test_apply_result_passes_gate(tmp_path: Path) -> None:
    src, wl = load("ldg", "axpby")
    out = OP.remove(src, one_site(OP, src))
    back = OP.apply(out, OP.find_forward(out)[0])
    assert OP.find(back)
    passes_gate(back.text, wl, tmp_path)


def test_forms_of_the_argument() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* __restrict__ p, const int* __restrict__ idx, float* q) {\n"
        "  q[0] = __ldg(p) * 2.0f + __ldg(&p[__ldg(idx + 1)]) + __ldg(p + 3 * threadIdx.x) + *__ldg(&p) ;\n}\n"
    )
    out = OP.remove(src, OP.find(src)[0])
    assert "q[0] = (*p) * 2.0f + p[idx[1]] + p[3 * threadIdx.x] + *p ;" in out.text


def test_apply_refused_for_a_pointer_that_is_not_restrict() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* __restrict__ a, float* b, int n) { int i = threadIdx.x; b[i] = a[i]; }\n"
    )
    site = OP.find_forward(src)[0]
    bad = type(site)(site.operator, site.anchor, site.start, site.end, site.summary, (("pointers", "a,b"),))
    with pytest.raises(Refused, match="read_only:b"):
        OP.apply(src, bad)
    assert "__ldg(&a[i])" in OP.apply(src, site).text and "b[i] =" in OP.apply(src, site).text


def test_no_forward_site_without_const_restrict() -> None:
    src = CudaSource.from_text("__global__ void k(const float* a, float* b) { b[0] = a[0]; }\n")
    assert OP.find_forward(src) == []
