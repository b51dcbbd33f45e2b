"""register_blocking's removal under the author's static_asserts: the K tile grows until they hold
(or the step is refused with the failing check), and the untiling reads brace-initialized
operand registers."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture

from klineage.deopt.base import Refused
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.register_blocking import RegisterBlocking
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource
from klineage.source.syntax import eval_condition

OP = RegisterBlocking()


def _loader() -> CudaSource:
    src, _ = fixture("register_blocking", "loader_asserts")
    return canonical_form(src).source


def test_the_k_tile_grows_until_the_loader_asserts_hold(tmp_path: Path) -> None:
    """kTM 8 -> 1 shrinks kBM to 8 with 512 threads kept: an 8 x 8 A tile is no whole multiple of
    the threads, so kBK doubles to 64 (8 x 64 = 512); the gate accepts it, and gemm_tiling then
    reads the one-output kernel (its operands in `T const a{...}` registers) back to naive."""
    src = _loader()
    _, wl = fixture("register_blocking", "product_threads")  # the same GEMM contract
    (site,) = OP.find(src)
    facts = {p.name: p for p in OP.removal_preconditions(src, site)}
    assert facts["static_asserts_hold"].holds and "kBK grows 8 -> 64" in facts["static_asserts_hold"].reason
    out = OP.remove(src, site)
    for line in ("kBM = 8;", "kBN = 64;", "kBK = 64;", "kTM = 1;"):
        assert f"constexpr int {line}" in out.text
    assert_passes(out.text, wl, tmp_path, "loader_one_output.cu")
    (k_loop,) = GemmTiling().find(out)
    assert all(p.holds for p in GemmTiling().removal_preconditions(out, k_loop))
    naive = GemmTiling().remove(out, k_loop)
    assert "__shared__" not in naive.text
    assert_passes(naive.text, wl, tmp_path, "loader_naive.cu")


def test_refuses_when_no_k_tile_satisfies_the_asserts() -> None:
    """A check that caps the K tile leaves no size for the loader's checks: refused with the reason
    instead of a compile error at the gate."""
    src = _loader()
    text = src.text.replace(
        "constexpr int kThreads", 'static_assert(kBK <= 16, "K tile cap");\nconstexpr int kThreads'
    )
    assert text != src.text
    s = CudaSource.from_text(text)
    (site,) = OP.find(s)
    with pytest.raises(Refused, match="static_asserts_hold"):
        OP.remove(s, site)


def test_a_kernel_whose_asserts_hold_lists_no_new_fact() -> None:
    """The column-tile kernel has no static_assert: its removal's facts are the ones skills
    recorded before (skill ids hash them)."""
    src, _ = fixture("register_blocking", "column_tile")
    (site,) = OP.find(src)
    assert "static_asserts_hold" not in {p.name for p in OP.removal_preconditions(src, site)}


@pytest.mark.parametrize(
    ("text", "env", "want"),
    [
        ("A * B % T == 0U", {"A": 8, "B": 64, "T": 512}, True),
        ("A * B % T == 0U", {"A": 8, "B": 8, "T": 512}, False),
        ("A % 4 == 0 && !(B != 2)", {"A": 8, "B": 2}, True),
        ("A <= 16 || B", {"A": 32, "B": 0}, False),
        ("A % T == 0", {"A": 8}, None),
        ("sizeof(float) == 4", {}, None),
    ],
)
def test_eval_condition(text: str, env: dict[str, int], want: bool | None) -> None:
    assert eval_condition(text, env) is want
