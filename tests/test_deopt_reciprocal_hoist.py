"""reciprocal_hoist: `inv = 1/s; x * inv` -> `x / s`, and back for loop-invariant divisors."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.reciprocal_hoist import ReciprocalHoist
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import load, one_site, passes_gate

OP = ReciprocalHoist()


def test_find_and_remove(tmp_path: Path) -> None:
    src, wl = load("reciprocal_hoist", "row_scale")
    site = one_site(OP, src, name="inv")
    assert site.details["divisor"] == "norm" and all(f.holds for f in OP.removal_preconditions(src, site))
    out = OP.remove(src, site)
    assert "inv" not in out.text and "xr[j] / norm;" in out.text
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.slow
def test_apply_rehoists_and_passes_gate(tmp_path: Path) -> None:
    src, wl = load("reciprocal_hoist", "row_scale")
    out = OP.remove(src, one_site(OP, src, name="inv"))
    (fwd,) = OP.find_forward(out)
    assert fwd.details["divisor"] == "norm" and all(f.holds for f in OP.preconditions(out, fwd))
    back = OP.apply(out, fwd)
    assert "const float inv_norm = 1.0f / norm;" in back.text and "xr[j] * inv_norm" in back.text
    assert OP.find(back)
    passes_gate(back.text, wl, tmp_path)


def test_rsqrtf_form_and_grouping() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y, float var, float eps) {\n"
        "  const float r = rsqrtf(var + eps);\n"
        "  y[0] = x[0] * r + 1.0f; y[1] = r * (x[1] + 2.0f); y[2] = 3.0f + x[2] * x[3] * r; y[3] *= r;\n}\n"
    )
    out = OP.remove(src, OP.find(src)[0])
    assert "y[0] = x[0] / sqrtf(var + eps) + 1.0f;" in out.text
    assert "y[1] = (x[1] + 2.0f) / sqrtf(var + eps);" in out.text
    assert "y[2] = 3.0f + x[2] * x[3] / sqrtf(var + eps);" in out.text
    assert "y[3] /= sqrtf(var + eps);" in out.text and "rsqrtf" not in out.text


def test_refused_when_the_divisor_changes_after_the_reciprocal() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y, float s) {\n"
        "  const float inv = 1.0f / s;\n  s += 1.0f;\n  y[0] = x[0] * inv;\n}\n"
    )
    with pytest.raises(Refused, match="divisor_unchanged"):
        OP.remove(src, OP.find(src)[0])


def test_no_forward_site_for_a_loop_variant_divisor() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y, int n) {\n"
        "  for (int i = 0; i < n; ++i) { float d = x[i] + 1.0f; y[i] = x[i] / d; }\n}\n"
    )
    assert OP.find_forward(src) == []


# ---- property: removal never changes the function computed ----------------------------------

TERM = st.sampled_from(["a", "b", "(a + b)", "2.0f", "a * b"])


@settings(max_examples=10, deadline=None)
@given(
    st.lists(st.tuples(TERM, st.booleans()), min_size=1, max_size=4),
    st.sampled_from(["rsqrtf", "div"]),
    st.integers(0, 2**32 - 1),
)
def test_removal_preserves_the_function(uses: list[tuple[str, bool]], form: str, seed: int) -> None:
    rec = "rsqrtf(s * s + 1.0f)" if form == "rsqrtf" else "1.0f / (s * s + 1.0f)"
    terms = [f"{t} * inv" if inv_right else f"inv * {t}" for t, inv_right in uses]
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y, float s) {\n"
        "  const float a = x[0], b = x[1];\n"
        f"  const float inv = {rec};\n"
        f"  y[0] = {' - '.join(terms)};\n}}\n"
    )
    out = OP.remove(src, OP.find(src)[0])
    expr = re.search(r"y\[0\] = (.*);", out.text).group(1)
    assert "inv" not in out.text
    rng = random.Random(seed)
    for _ in range(5):
        env = {"a": rng.uniform(-3, 3), "b": rng.uniform(-3, 3), "s": rng.uniform(-3, 3)}
        d = env["s"] ** 2 + 1.0
        inv = 1.0 / math.sqrt(d) if form == "rsqrtf" else 1.0 / d
        py_terms = [re.sub(r"(\d\.\d*)f\b", r"\1", t) for t, _ in uses]
        want = 0.0
        for i, t in enumerate(py_terms):
            v = eval(t, {}, env) * inv  # noqa: S307 - test-generated text
            want = v if i == 0 else want - v
        py = re.sub(r"(\d\.\d*)f\b", r"\1", expr)
        got = eval(py, {"sqrtf": math.sqrt}, env)  # noqa: S307 - test-generated text
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (terms, expr)


def test_integer_divisor_stays_a_float_division() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const int* c, float* y, int n) {\n  const float inv = 1.0f / n;\n  y[0] = c[0] * inv;\n}\n"
    )
    out = OP.remove(src, OP.find(src)[0])
    assert "y[0] = c[0] / static_cast<float>(n);" in out.text
