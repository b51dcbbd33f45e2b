"""Workload spec: validation names every problem, loading reports user errors in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from klineage import Scalar, Tensor, Workload, WorkloadError, load_workload
from klineage.workload import eval_dim
from tests.conftest import EXAMPLES


def _wl(**kw) -> Workload:
    base = dict(
        name="w",
        args=[Tensor("x", ("N",)), Tensor("y", ("N",), role="out"), Scalar("N")],
        reference=lambda x, N: x,
        shapes={"test": [{"N": 3}]},
    )
    base.update(kw)
    return Workload(**base)


def test_examples_load() -> None:
    wl = load_workload(EXAMPLES / "row_sum")
    assert wl.name == "row_sum"
    assert (
        wl.c_signature()
        == 'extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream)'
    )
    assert wl.bytes_moved({"M": 2, "N": 3}) == (6 + 2) * 4


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"reference": None}, "reference is missing"),
        ({"shapes": {}}, "no test shapes"),
        ({"shapes": {"test": [{"M": 3}]}}, "shape symbol N unbound in shapes['test'][0]"),
        (
            {"args": [Tensor("x", ("N",), "float8"), Tensor("y", ("N",), role="out"), Scalar("N")]},
            "unknown dtype 'float8'",
        ),
        (
            {"args": [Tensor("x", ("N",), role="sideways"), Tensor("y", ("N",), role="out"), Scalar("N")]},
            "unknown role",
        ),
        ({"args": [Tensor("x", ("N",)), Scalar("N")]}, "no output"),
        ({"args": [Tensor("x", ("N",)), Tensor("x", ("N",), role="out"), Scalar("N")]}, "declared twice"),
        ({"divisible_by": {"N": 2}}, "breaks the precondition N % 2 == 0"),
        ({"shapes": {"test": [{"N": 3}], "huge": [{"N": 3}]}}, "unknown shape set 'huge'"),
    ],
)
def test_problems_are_named(kw: dict, needle: str) -> None:
    problems = _wl(**kw).problems()
    assert any(needle in p for p in problems), problems


def test_valid_spec_has_no_problems() -> None:
    assert _wl().problems() == []


def _folder(tmp_path: Path, text: str | None) -> Path:
    if text is not None:
        (tmp_path / "workload.py").write_text(text)
    return tmp_path


def test_load_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no workload.py"):
        load_workload(_folder(tmp_path, None))
    with pytest.raises(WorkloadError, match=r"workload.py:2: workload.py raised ZeroDivisionError"):
        load_workload(_folder(tmp_path, "x = 1\ny = 1 / 0\n"))
    with pytest.raises(WorkloadError, match="defines no WORKLOAD"):
        load_workload(_folder(tmp_path, "x = 1\n"))
    with pytest.raises(WorkloadError, match="not klineage.Workload"):
        load_workload(_folder(tmp_path, "WORKLOAD = 3\n"))
    with pytest.raises(WorkloadError, match="not a directory"):
        load_workload(tmp_path / "missing")


def test_inputs_are_random_signed_and_fresh_per_seed() -> None:
    wl = load_workload(EXAMPLES / "row_sum")
    a = wl.make_inputs({"M": 64, "N": 64}, seed=0)["x"]
    b = wl.make_inputs({"M": 64, "N": 64}, seed=1)["x"]
    assert (a < 0).any() and (a > 0).any() and not torch.equal(a, b)
    assert torch.equal(a, wl.make_inputs({"M": 64, "N": 64}, seed=0)["x"])


@given(st.integers(1, 10_000), st.integers(1, 64))
def test_eval_dim_arithmetic(n: int, k: int) -> None:
    assert eval_dim("N // K + N % K", {"N": n, "K": k}) == n // k + n % k
    assert eval_dim(n, {}) == n


def test_eval_dim_refuses_code() -> None:
    with pytest.raises(ValueError):
        eval_dim("__import__('os')", {})
    with pytest.raises(KeyError):
        eval_dim("M * 2", {"N": 1})
