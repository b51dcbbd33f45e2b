"""The shared correctness protocol against a fake in-process runner whose 'kernel' is Python:
each cheat must be caught with its own category, and an honest kernel must pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from klineage.gates.protocol import check_workload, compare
from klineage.workload import Tolerance, load_workload
from tests.conftest import EXAMPLES

Kernel = Callable[[torch.Tensor, torch.Tensor, int, int, int], None]


class FakeRunner:
    device = torch.device("cpu")
    schedules: Sequence[int] = (0, 1)

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.calls = 0

    def launch(self, args: Sequence[Any], schedule: int) -> None:
        self.calls += 1
        x, y, m, n = args
        self.kernel(x, y, m, n, schedule)


def honest(x: torch.Tensor, y: torch.Tensor, m: int, n: int, s: int) -> None:
    y.copy_(x.double().sum(1).float())


def _verdict(kernel: Kernel):
    wl = load_workload(EXAMPLES / "row_sum")
    return check_workload(wl, FakeRunner(kernel), shape_set="test")


def test_honest_kernel_passes() -> None:
    v = _verdict(honest)
    assert v.ok, v.message
    assert len(v.checks) == 4 * 2  # 4 test shapes x 2 seeds, one output


def _writes_input(x, y, m, n, s):
    honest(x, y, m, n, s)
    x.view(-1)[-1] = 0.0


def _skips_last_row(x, y, m, n, s):
    y[:-1].copy_(x[:-1].double().sum(1).float())


def _leaves_output(x, y, m, n, s):
    pass


def _schedule_dependent(x, y, m, n, s):
    honest(x, y, m, n, s)
    if s == 1:
        y[0] += 1e-3


def _wrong(x, y, m, n, s):
    y.copy_(x.sum(1) * 1.001)


def _hard_coded_size(x, y, m, n, s):
    # right only for the first test shape (1 x 1)
    y.copy_(x[:, :1].sum(1))


def _writes_past_end(x, y, m, n, s):
    honest(x, y, m, n, s)
    past = torch.empty(0, dtype=y.dtype).set_(y.untyped_storage(), y.storage_offset(), (y.numel() + 3,))
    past[y.numel() + 2] = 1.0


def _nan_out(x, y, m, n, s):
    honest(x, y, m, n, s)
    y[-1] = float("nan")


@pytest.mark.parametrize(
    ("kernel", "category", "words"),
    [
        (_writes_input, "input_mutated", "input 'x'"),
        (_skips_last_row, "unwritten_output", "never written"),
        (_leaves_output, "unwritten_output", "never written"),
        (_schedule_dependent, "nondeterministic", "differs between two runs"),
        (_wrong, "mismatch", "output 'y' wrong"),
        (_hard_coded_size, "mismatch", "output 'y' wrong"),
        (_writes_past_end, "out_of_bounds", "outside its bounds"),
        (_nan_out, "mismatch", "nan"),
    ],
)
def test_cheats_are_rejected(kernel: Kernel, category: str, words: str) -> None:
    v = _verdict(kernel)
    assert v.category == category, v.message
    assert words in v.message


def test_compare_elementwise_and_frobenius() -> None:
    w = torch.tensor([1.0, 2.0, 3.0])
    ok, *_ = compare(w.clone(), w, Tolerance(1e-5, 1e-6))
    assert ok
    ok, max_abs, _, idx = compare(torch.tensor([1.0, 2.1, 3.0]), w, Tolerance(1e-5, 1e-6))
    assert not ok and idx == [1] and max_abs == pytest.approx(0.1, rel=1e-5)
    ok, *_ = compare(torch.tensor([1.0, 2.001, 3.0]), w, Tolerance(0, 1e-3, "frobenius"))
    assert ok
    ok, *_ = compare(torch.tensor([1.0, float("nan"), 3.0]), w, Tolerance(1.0, 1.0, "frobenius"))
    assert not ok
    ok, *_ = compare(torch.tensor([float("inf")]), torch.tensor([float("inf")]), Tolerance(0, 0))
    assert ok
