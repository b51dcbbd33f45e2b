"""one_pass_variance: E[x^2] - E[x]^2 from one loop <-> a second pass over the squared
deviations from the mean; both directions pass the gate and restore each other."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.base import Refused
from klineage.deopt.one_pass_variance import OnePassVariance
from klineage.source.model import CudaSource

DATA = Path(__file__).parent / "data" / "deopt" / "one_pass_variance" / "row_standardize"
OP = OnePassVariance()


def _expert() -> CudaSource:
    return CudaSource.from_file(DATA / "expert.cu")


def test_remove_writes_the_second_pass_and_passes_the_gate(tmp_path: Path) -> None:
    src = _expert()
    (site,) = OP.find(src)
    out = OP.remove(src, site)
    assert "total_sq += v * v;" not in out.text
    assert "const float kl_d = v - mu; spread += kl_d * kl_d;" in out.text and "spread /= N;" in out.text
    assert OP.find(out) == []
    assert_passes(out.text, DATA, tmp_path, "two_pass.cu")


def test_apply_restores_one_pass_and_passes_the_gate(tmp_path: Path) -> None:
    src = _expert()
    two = OP.remove(src, OP.find(src)[0])
    (fwd,) = OP.find_forward(two)
    assert all(f.holds for f in OP.preconditions(two, fwd))
    one = OP.apply(two, fwd)
    assert "kl_sq += v * v;" in one.text and "float spread = kl_sq / N - mu * mu;" in one.text
    assert len(OP.find(one)) == 1 and OP.find_forward(one) == []
    assert_passes(one.text, DATA, tmp_path, "one_pass.cu")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "for (int j = 0; j < N; ++j) {\n        const float v",
            "for (int j = 1; j < N; ++j) {\n        const float v",
        ),
        ("total_sq /= N;", "total_sq /= M;"),  # not divided by the count
        ("total_sq /= N;", "total_sq /= N;\n    y[0] = total_sq;"),  # the mean of squares is read elsewhere
        ("total_sq += v * v;", "total_sq += v * xr[0];"),  # not the element's square
    ],
    ids=["start", "count", "read", "square"],
)
def test_other_kernels_are_left_alone(old: str, new: str) -> None:
    text = _expert().text
    assert old in text
    src = CudaSource.from_text(text.replace(old, new, 1), "k.cu")
    assert OP.find(src) == []


def test_removal_refuses_a_changed_site() -> None:
    src = _expert()
    (site,) = OP.find(src)
    changed = CudaSource.from_text(src.text.replace("total_sq += v * v;", ""), "k.cu")
    with pytest.raises(Refused):
        OP.remove(changed, site)
