"""flash_fusion's tensor-core kernel reads the producer's score in (row, key) coordinates: `idx % L`
and `idx / L` (L the key count) become the key and the row when they are operands of their own, and
nothing else changes meaning."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from klineage.deopt._flash_index import _rewrite, _row_mod, coordinates
from klineage.deopt.flash_fusion import FlashFusion
from klineage.source.model import CudaSource

OP = FlashFusion()
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("int j = (int)(idx % S);", "int j = (int)(((decltype(idx % S))kl_aj));"),
        ("int i = (int)((idx / S) % S);", "int i = (int)((((decltype(idx / S))kl_ar)) % S);"),
        ("return idx % S;", "return ((decltype(idx % S))kl_aj);"),
        ("x[idx % S] + 1", "x[((decltype(idx % S))kl_aj)] + 1"),
    ],
)
def test_own_operands_become_the_coordinates(text: str, want: str) -> None:
    assert _rewrite(text, "idx", "S") == want


@pytest.mark.parametrize(
    "text",
    [
        "int j = 3 * idx % S;",  # (3 * idx) % S
        "int j = -idx % S;",  # unary minus first
        "int j = (int)idx % S;",  # the cast binds first
        "int j = idx % S[0];",  # S is not the operand
        "int j = idx / S(2);",
        "int j = p->idx % S;",  # another object's member
        "int j = idx % SS;",
        "int j = idx / ((long long)S * S);",  # not L itself
    ],
)
def test_anything_else_is_left_alone(text: str) -> None:
    assert _rewrite(text, "idx", "S") == text


def test_attention_fwd_scores_in_coordinates_and_an_assigned_index_is_not() -> None:
    src = CudaSource.from_file(ROOT / "expert_kernels" / "attention_fwd" / "naive.cu")
    (site,) = OP.find_forward(src)
    out = OP.apply(src, site).text
    assert (
        "kl_vrk(kl_r, kl_j, kl_rm[kl_e >> 1], kl_d)" in out
    )  # the staged product's score, no division per key
    assert "int j = (int)(((decltype(idx % S))kl_aj));" in out
    text = src.text.replace("int j = (int)(idx % S);", "int j = (int)(idx % S); idx += 0;")
    changed = CudaSource.from_text(text, "k.cu")
    tp = OP._read(changed, OP.find_forward(changed)[0])
    assert coordinates(tp).value is None  # the index is written: the statements are not read that way


_ROW = "int i = (int)((((decltype(idx / S))kl_ar)) % S);"


def test_a_row_modulo_a_parameter_is_computed_once_per_row() -> None:
    x, stmts, _ = _row_mod((_ROW,), "return 0.0f;", {"S", "D"})
    assert x == "S" and stmts == ("int i = (int)(((decltype((((decltype(idx / S))kl_ar)) % S))kl_am));",)
    out = OP.apply(*_site(ROOT / "expert_kernels" / "attention_fwd" / "naive.cu")).text
    assert "const long long kl_rm[2] = {kl_rk[0] ? kl_ra % S : 0, kl_rk[1] ? (kl_ra + 8) % S : 0};" in out
    assert "auto kl_vrk = [&](long long kl_ar, long long kl_aj, long long kl_am, float acc) -> float {" in out


@pytest.mark.parametrize(
    ("stmts", "params"),
    [
        ((_ROW,), {"D"}),  # S is not a parameter of the kernel (a local: the kernel cannot compute it)
        ((_ROW, "S += 1;"), {"S"}),  # S assigned
        (("int i = (int)(3 * (((decltype(idx / S))kl_ar)) % S);",), {"S"}),  # not its own operand
        (("int i = (int)((((decltype(idx / S))kl_ar)) % S[0]);",), {"S"}),
    ],
)
def test_a_row_modulo_anything_else_stays_per_score(stmts: tuple[str, ...], params: set[str]) -> None:
    assert _row_mod(stmts, "return 0.0f;", params) == (None, stmts, "return 0.0f;")


def _site(path: Path) -> tuple[CudaSource, object]:
    src = CudaSource.from_file(path)
    (site,) = OP.find_forward(src)
    return src, site


@pytest.mark.parametrize(
    ("text", "fixed", "want"),
    [
        (
            "long long bh = idx / ((long long)S * S);",
            {"S"},
            "long long bh = ((decltype(idx / ((long long)S * S)))(kl_ar / S));",
        ),
        ("long long b = idx / (H * S);", {"H", "S"}, "long long b = ((decltype(idx / (H * S)))(kl_ar / H));"),
        ("long long b = idx / (H * S);", {"S"}, "long long b = idx / (H * S);"),  # H may be written
        ("long long b = 2 * idx / (S * S);", {"S"}, "long long b = 2 * idx / (S * S);"),  # (2 * idx) / ...
        ("long long b = idx / (D * H);", {"D", "H"}, "long long b = idx / (D * H);"),  # no L in the product
    ],
)
def test_a_quotient_by_a_multiple_of_the_key_count_is_the_rows(text: str, fixed: set[str], want: str) -> None:
    assert _rewrite(text, "idx", "S", frozenset(fixed)) == want


def _c_div(a: int, b: int) -> int:
    """C's integer division (truncation toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@given(st.integers(0, 10**6), st.integers(1, 5000), st.integers(-300, 300).filter(bool), st.data())
def test_the_row_quotient_equals_the_index_quotient(
    ar: int, length: int, x: int, data: st.DataObject
) -> None:
    aj = data.draw(st.integers(0, length - 1))
    assert _c_div(ar * length + aj, length * x) == _c_div(ar, x)


def test_attention_keys_and_terms_address_rows_without_a_per_key_division() -> None:
    out = OP.apply(*_site(ROOT / "expert_kernels" / "attention_fwd" / "naive.cu")).text
    kark = out[out.index("auto kl_kark") : out.index("};", out.index("auto kl_kark"))]
    assert "(kl_ar / S)" in kark and "idx / ((long long)S * S);" not in kark


def _lambda(text: str, name: str) -> str:
    i = text.index(f"auto {name}")
    return text[i : text.index("};", i)]


def test_a_flat_bound_the_row_guard_implies_is_dropped_from_the_coordinate_lambdas() -> None:
    """attention_fwd's producer tests `idx >= BH * S * S` per score; its row kernel's guard is
    `row >= BH * S` and the key stays under S, so in coordinates the test is dead and goes."""
    out = OP.apply(*_site(ROOT / "expert_kernels" / "attention_fwd" / "naive.cu")).text
    for name in ("kl_vrk", "kl_kark", "kl_vark"):
        body = _lambda(out, name)
        assert "return -INFINITY;" not in body and "return nullptr;" not in body, name
    assert "if (idx >= total) return 0.0f;" in _lambda(out, "kl_qry")  # flat-index lambdas keep theirs


def test_a_bound_that_is_not_rows_times_keys_stays() -> None:
    """fp16_heads passes its row count as a parameter of its own (`rows`): rows * n is not the
    producer's bh * m * n as a polynomial, so its test stays."""
    from deopt_parallel_checks import DATA, apply_forward

    out = apply_forward(OP, CudaSource.from_file(DATA / "flash_fusion" / "fp16_heads" / "naive.cu")).text
    assert "if (t >= (size_t)bh * m * n) return -INFINITY;" in _lambda(out, "kl_vrk")


def test_without_the_bound_tests_odd_heads_and_keys_pass_the_emu_gate(tmp_path: Path) -> None:
    """Rows per head and keys not multiples of the 64-row and 64-key tiles (tiles span heads, the
    last key tile is partial), both masks and head sizes: the calls stay inside the guards."""
    from deopt_parallel_checks import assert_passes

    attn = ROOT / "expert_kernels" / "attention_fwd"
    text = (attn / "workload.py").read_text()
    start = text.index('"emu": [')
    end = text.index("],", start) + 2
    odd = (
        '"emu": [{"B": 1, "H": 3, "S": 37, "D": 64, "causal": 0}, {"B": 2, "H": 1, "S": 100, "D": 128, '
        '"causal": 1}, {"B": 1, "H": 2, "S": 65, "D": 64, "causal": 1}],'
    )
    (tmp_path / "odd").mkdir()
    text = text[:start] + odd + text[end:]
    assert 'divisible_by={"S": 128},' in text  # the expert's query tile; the fused kernel has none
    (tmp_path / "odd" / "workload.py").write_text(text.replace('divisible_by={"S": 128},', ""))
    out = OP.apply(*_site(attn / "naive.cu")).text
    assert "return -INFINITY;" not in _lambda(out, "kl_vrk")
    assert_passes(out, tmp_path / "odd", tmp_path, "attn_odd.cu")


@pytest.mark.parametrize(
    ("stmts", "kept"),
    [
        (("long long total = (long long)BH * S * S;", "if (idx >= total) return -INFINITY;"), 0),
        (("if (idx >= (long long)S * (BH * S)) return nullptr;",), 0),  # the same product, reordered
        (("long long n = BH * S;", "long long total = n * S;", "if ((idx >= total)) return 0.0f;"), 0),
        (("if (idx >= (long long)BH * S * S + 1) return nullptr;",), 1),  # not rows x keys
        (("if (idx > (long long)BH * S * S) return nullptr;",), 1),  # another comparison: kept as written
        (("long long total = (long long)BH * S * S;", "total += 1;", "if (idx >= total) return 0.0f;"), 1),
        (("if (idx >= (long long)BH * S * S / 2) return nullptr;",), 1),  # a division: not read
    ],
)
def test_only_a_bound_equal_to_rows_times_keys_is_dropped(stmts: tuple[str, ...], kept: int) -> None:
    from klineage.deopt import poly as P
    from klineage.deopt._flash_index import _implied_bounds

    out = _implied_bounds(stmts, "idx", P.mul(P.from_c("BH * S"), P.var("S")))
    assert sum(s.lstrip().startswith("if") for s in out) == kept
    assert [s for s in out if not s.lstrip().startswith("if")] == [
        s for s in stmts if not s.lstrip().startswith("if")
    ]


@given(
    st.recursive(
        st.one_of(st.sampled_from(["a", "b", "c"]), st.integers(-9, 9).map(str)),
        lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        max_leaves=8,
    ),
    st.integers(-50, 50),
    st.integers(-50, 50),
    st.integers(-50, 50),
)
def test_a_c_integer_expression_reads_as_the_polynomial_it_computes(
    expr: str, a: int, b: int, c: int
) -> None:
    from klineage.deopt import poly as P

    p = P.from_c(f"(long long){expr}")
    assert p is not None
    value = sum(coef * eval("*".join(k) or "1", {}, {"a": a, "b": b, "c": c}) for k, coef in p.items())  # noqa: S307
    assert value == eval(expr, {}, {"a": a, "b": b, "c": c})  # noqa: S307


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("threadIdx.x + 4 * blockDim.x", {("threadIdx.x",): 1, ("blockDim.x",): 4}),
        ("static_cast<unsigned int>(a) * 2", {("a",): 2}),
        ("(const long long)a - (unsigned)b", {("a",): 1, ("b",): -1}),
        ("010 + 0x10 + 3u", {(): 27}),  # octal, hexadecimal, a suffix
        ("from * in", {("from", "in"): 1}),  # C names that are Python keywords
        ("static_cast<float>(a)", None),
        ("p->n + 1", None),
        ("a / 2", None),
        ("a % 4", None),
        ("f(a)", None),
        ("a[1]", None),
        ("1.5 * a", None),
    ],
)
def test_c_text_reads_as_integer_arithmetic_or_not_at_all(text: str, expected: object) -> None:
    from klineage.deopt import poly as P

    assert P.from_c(text) == expected


def test_integer_types_whatever_their_spelling() -> None:
    from klineage.deopt import poly as P

    for t in (
        "int",
        "unsigned int",
        "unsigned",
        "const long long",
        "long long int",
        "size_t const",
        "uint32_t",
    ):
        assert P.is_int_type(t), t
    for t in ("float", "double", "constexpr int", "int*", "__half"):
        assert not P.is_int_type(t), t
