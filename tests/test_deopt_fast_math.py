"""fast_math: __expf/__logf/__fdividef/rsqrtf/... -> precise forms, and back for float operands."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.fast_math import FastMath
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import load, passes_gate, remove_all

OP = FastMath()


def test_sites_are_grouped_per_function() -> None:
    src, _ = load("fast_math", "silu_norm")
    sites = OP.find(src)
    assert [s.details["function"] for s in sites] == ["silu", "silu_norm"]
    assert sites[1].details["intrinsics"] == "__fmaf_rn,__frcp_rn,__logf,exp2f,rsqrtf"
    assert all(f.holds for f in OP.preconditions(src, sites[1]))


def test_remove_everywhere_gives_precise_math(tmp_path: Path) -> None:
    src, wl = load("fast_math", "silu_norm")
    out = remove_all(OP, src)
    for frag in (
        "v / (1.0f + expf(-v))",
        "fmaf(xr[j], xr[j], ss)",
        "1.0f / sqrtf(ss / N + 1e-5f)",
        "logf(1.0f + fabsf(v))",
        "expf(v) * (1.0f / 8.0f)",
    ):
        assert frag in out.text, frag
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.slow
def test_apply_after_remove_passes_gate(tmp_path: Path) -> None:
    src, wl = load("fast_math", "silu_norm")
    out = remove_all(OP, src)
    back = out
    while OP.find_forward(back):
        back = OP.apply(back, OP.find_forward(back)[0])
    assert "__expf(-v)" in back.text and "rsqrtf(ss / N + 1e-5f)" in back.text and OP.find(back)
    passes_gate(back.text, wl, tmp_path)


def test_fdividef_of_unknown_operands_keeps_float_division() -> None:
    src = CudaSource.from_text(
        "struct S { int n; };\n__device__ float f(S a, int m) { return __fdividef(a.n, m); }\n"
    )
    out = OP.remove(src, OP.find(src)[0])
    assert "static_cast<float>(a.n) / m" in out.text


def test_apply_refused_on_double_operands() -> None:
    src = CudaSource.from_text("__device__ double g(double d) { return expf(d) + logf(d); }\n")
    (site,) = OP.find_forward(src)
    with pytest.raises(Refused, match="float_operands"):
        OP.apply(src, site)


# ---- property: removal never changes the function computed ----------------------------------

_PY = {
    "expf": math.exp,
    "logf": math.log,
    "sqrtf": math.sqrt,
    "fmaf": lambda a, b, c: a * b + c,
    "sinf": math.sin,
    "cosf": math.cos,
    "fabsf": abs,
}


def _leaf() -> st.SearchStrategy[tuple]:
    return st.sampled_from([("v", "a"), ("v", "b"), ("c", "2.0f"), ("c", "0.5f")])


def _node(children: st.SearchStrategy[tuple]) -> st.SearchStrategy[tuple]:
    un = st.tuples(st.sampled_from(["__expf", "__sinf", "__cosf", "__logf", "rsqrtf", "__frcp_rn"]), children)
    bi = st.tuples(st.sampled_from(["+", "-", "*", "__fdividef"]), children, children)
    return un | bi | st.tuples(st.just("__fmaf_rn"), children, children, children)


EXPR = st.recursive(_leaf(), _node, max_leaves=6)


def _c(e: tuple) -> str:
    if e[0] in ("v", "c"):
        return e[1]
    if e[0] in "+-*":
        return f"({_c(e[1])} {e[0]} {_c(e[2])})"
    if e[0] == "__logf":  # keep the argument positive
        return f"__logf(1.0f + fabsf({_c(e[1])}))"
    if e[0] == "rsqrtf":
        return f"rsqrtf(1.0f + fabsf({_c(e[1])}))"
    if e[0] == "__frcp_rn":
        return f"__frcp_rn(1.0f + fabsf({_c(e[1])}))"
    if e[0] == "__fdividef":
        return f"__fdividef({_c(e[1])}, 1.0f + fabsf({_c(e[2])}))"
    return f"{e[0]}({', '.join(_c(a) for a in e[1:])})"


def _py_eval(c_expr: str, env: dict[str, float]) -> float:
    assert "__" not in c_expr and "rsqrtf" not in c_expr, c_expr
    py = re.sub(r"(\d\.\d*)f\b", r"\1", c_expr)
    return float(eval(py, {"__builtins__": {}}, {**_PY, **env}))  # noqa: S307 - test-generated text


def _reference(e: tuple, env: dict[str, float]) -> float:
    k = e[0]
    if k == "v":
        return env[e[1]]
    if k == "c":
        return float(e[1].rstrip("f"))
    a = [_reference(x, env) for x in e[1:]]
    return {
        "+": lambda: a[0] + a[1],
        "-": lambda: a[0] - a[1],
        "*": lambda: a[0] * a[1],
        "__fdividef": lambda: a[0] / (1.0 + abs(a[1])),
        "__expf": lambda: math.exp(a[0]),
        "__sinf": lambda: math.sin(a[0]),
        "__cosf": lambda: math.cos(a[0]),
        "__logf": lambda: math.log(1.0 + abs(a[0])),
        "rsqrtf": lambda: 1.0 / math.sqrt(1.0 + abs(a[0])),
        "__frcp_rn": lambda: 1.0 / (1.0 + abs(a[0])),
        "__fmaf_rn": lambda: a[0] * a[1] + a[2],
    }[k]()


@settings(max_examples=10, deadline=None)
@given(EXPR, st.integers(0, 2**32 - 1))
def test_removal_preserves_the_function(expr: tuple, seed: int) -> None:
    body = _c(expr)
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y) {\n"
        "  const float a = x[0], b = x[1];\n"
        f"  y[0] = {body};\n}}\n"
    )
    out = remove_all(OP, src)
    got_expr = re.search(r"y\[0\] = (.*);", out.text).group(1)
    rng = random.Random(seed)
    for _ in range(5):
        env = {"a": rng.uniform(-2, 2), "b": rng.uniform(-2, 2)}
        try:
            want = _reference(expr, env)
        except OverflowError:
            continue
        got = _py_eval(got_expr, env)
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (body, got_expr)


def test_exp2f_with_a_prescaled_constant_is_not_the_log2e_trick() -> None:
    src = CudaSource.from_text(
        "__device__ float f(float x, float scale_log2e) { return exp2f(x * scale_log2e) + exp2f(x * 1.4426950409f); }\n"
    )
    (site,) = OP.find(src)
    assert site.details["count"] == "1"
    assert "exp2f(x * scale_log2e) + expf(x)" in OP.remove(src, site).text


def test_inline_ptx_approximations_become_c_math(tmp_path: Path) -> None:
    src = CudaSource.from_text(
        "__device__ __forceinline__ float fast_exp2(float x) {\n  float y;\n"
        '  asm("ex2.approx.ftz.f32 %0, %1;\\n" : "=f"(y) : "f"(x));\n  return y;\n}\n'
        '__device__ float inv(float v) { float r; asm volatile("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(v + 1.0f));'
        " return r; }\n"
    )
    sites = OP.find(src)
    assert [s.details["intrinsics"] for s in sites] == ["ptx:ex2.approx", "ptx:rcp.approx"]
    out = remove_all(OP, src)
    assert "y = exp2f(x);" in out.text and "r = 1.0f / (v + 1.0f);" in out.text and "asm" not in out.text
