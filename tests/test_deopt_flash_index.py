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
