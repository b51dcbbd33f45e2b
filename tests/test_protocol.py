"""The shared correctness protocol against a fake in-process runner whose 'kernel' is Python:
each cheat must be caught with its own category, and an honest kernel must pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from klineage.errors import WorkloadError
from klineage.gates.protocol import POISONS, check_workload, compare, holds_pattern, same_bytes
from klineage.workload import Tolerance, Workload, load_workload
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
        (_nan_out, "mismatch", "NaN in output at index [0]"),
    ],
)
def test_cheats_are_rejected(kernel: Kernel, category: str, words: str) -> None:
    v = _verdict(kernel)
    assert v.category == category, v.message
    assert words in v.message


@pytest.mark.parametrize("kernel", [honest, _writes_input, _skips_last_row, _wrong, _writes_past_end])
def test_kept_input_sets_change_no_verdict(kernel: Kernel, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resident worker's input sets kept on the device (protocol.device_inputs) give the verdict
    and message of fresh generation, on the first candidate and on the next one (a hit)."""
    from klineage.gates import protocol

    want = _verdict(kernel)
    monkeypatch.setattr(protocol, "DEVICE_MEMO_BYTES", 1 << 30)
    monkeypatch.setattr(protocol, "_dev_memo", type(protocol._dev_memo)())
    for _ in range(2):
        got = _verdict(kernel)
        assert (got.category, got.message) == (want.category, want.message)
    assert protocol._dev_memo and protocol.memo_intact() is None


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


def _sign_of_zero_depends_on_schedule(x, y, m, n, s):
    honest(x, y, m, n, s)
    y[0] = -0.0 if s else 0.0  # equal as values, different bits


def test_runs_that_differ_only_in_bits_are_nondeterministic() -> None:
    """Runs are compared bit for bit (the fast equality test too): +0.0 against -0.0 is a
    difference, found before the reference comparison."""
    v = _verdict(_sign_of_zero_depends_on_schedule)
    assert v.category == "nondeterministic", v.message
    assert "0 vs -0" in v.message


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.uint8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
        torch.complex64,
    ],
)
@pytest.mark.parametrize("pattern", POISONS)
def test_holds_pattern_is_every_byte_equal(dtype: torch.dtype, pattern: int) -> None:
    """The whole-element test gives the mask the byte-by-byte definition gives: elements with
    every byte the pattern, not those with only some."""
    gen = torch.Generator().manual_seed(pattern)
    t = torch.zeros(257, dtype=dtype)
    raw = t.view(torch.uint8).view(257, t.element_size())
    raw.copy_(torch.randint(0, 256, raw.shape, generator=gen, dtype=torch.uint8))
    if dtype == torch.bool:
        raw.copy_(raw % 2)
    raw[::3] = pattern  # whole elements
    if t.element_size() > 1:
        raw[1::7, 0] = pattern  # one byte of the element only
        raw[2::7, 1:] = pattern  # every byte but the first
    want = (raw == pattern).all(dim=1)
    got = holds_pattern(t, pattern)
    assert got.shape == want.shape and torch.equal(got, want)
    assert bool(want.any()) and (t.element_size() == 1 or not bool(want.all()))
    two_d = t[:256].view(16, 16)
    assert torch.equal(holds_pattern(two_d, pattern), want[:256])


def test_same_bytes_compares_bits() -> None:
    a = torch.tensor([0.0, float("nan"), 1.0])
    assert same_bytes(a, a.clone())  # NaN equals itself bit for bit
    assert not same_bytes(a, torch.tensor([-0.0, float("nan"), 1.0]))
    assert not torch.equal(a, a.clone())  # (what value equality would say)


def _keeps_result_by_pointer() -> Kernel:
    """A cheat: the output of the first call for an input address is returned for that address."""
    kept: dict[int, torch.Tensor] = {}

    def kernel(x, y, m, n, s):
        if x.data_ptr() in kept and kept[x.data_ptr()].shape == y.shape:
            y.copy_(kept[x.data_ptr()])
            return
        honest(x, y, m, n, s)
        kept[x.data_ptr()] = y.clone()

    return kernel


def test_pointer_keyed_cache_is_caught_whatever_the_addresses() -> None:
    """The last launch of each shape reuses its buffers with new values: the kept result is stale."""
    v = _verdict(_keeps_result_by_pointer())
    assert v.category == "mismatch", v.message
    assert "refilled in place" in v.message and "keyed by input pointer" in v.message


def test_each_launch_of_a_pair_has_buffers_of_its_own() -> None:
    """The second launch gets the same values at new addresses (the first launch's buffers are
    still alive), then the last one runs again in place: three launches, two address sets."""
    seen: list[tuple[int, int]] = []

    def kernel(x, y, m, n, s):
        seen.append((x.data_ptr(), y.data_ptr()))
        honest(x, y, m, n, s)

    wl = load_workload(EXAMPLES / "row_sum")
    v = check_workload(wl, FakeRunner(kernel), shapes=[{"M": 5, "N": 7}], seeds=(0,))
    assert v.ok, v.message
    assert len(seen) == 3 and seen[0] != seen[1] and seen[2] == seen[1]


def _rowsum_workload(tmp_path: Path, tolerance: str) -> Workload:
    (tmp_path / "workload.py").write_text(
        "import torch\n"
        "from klineage import Scalar, Tensor, Tolerance, Workload\n"
        "def reference(x, M, N):\n"
        "    return x.double().sum(1).float()\n"
        "WORKLOAD = Workload(name='rs', args=[Tensor('x', ('M', 'N')), Tensor('y', ('M',), role='out'),\n"
        "    Scalar('M'), Scalar('N')], reference=reference, shapes={'test': [{'M': 129, 'N': 4097}]},\n"
        f"    tolerances={tolerance})\n"
    )
    return load_workload(tmp_path)


def _fp32_loop(x, y, m, n, s):
    """An honest kernel's rounding: one fp32 accumulator per row, in column order."""
    acc = torch.zeros(x.shape[0], dtype=torch.float32)
    for j in range(x.shape[1]):
        acc += x[:, j]
    y.copy_(acc)


def test_fp32_row_sum_fails_default_tolerance_only_by_accumulation(tmp_path: Path) -> None:
    wl = _rowsum_workload(tmp_path, "{}")
    v = check_workload(wl, FakeRunner(_fp32_loop), seeds=(0,))
    assert v.category == "mismatch", v.message
    assert "within the rounding of a sum of 4097 terms" in v.message
    assert "Tolerance.accumulation" in v.message


def test_accumulation_tolerance_accepts_honest_and_rejects_wrong(tmp_path: Path) -> None:
    wl = _rowsum_workload(tmp_path, "{'float32': Tolerance.accumulation('N')}")
    assert check_workload(wl, FakeRunner(_fp32_loop), seeds=(0, 1)).ok
    v = check_workload(
        wl, FakeRunner(lambda x, y, m, n, s: y.copy_(x.double().sum(1).float() * 1.001)), seeds=(0,)
    )
    assert v.category == "mismatch", v.message
    assert "accumulation over N" in v.message and "within the rounding" not in v.message


@pytest.mark.parametrize(
    ("tol", "words"),
    [
        ("{'float32': Tolerance(1e-5, 1e-6, 'accumulation')}", "needs length="),
        ("{'float32': Tolerance.accumulation('K')}", "names K, not a shape symbol"),
        ("{'float32': Tolerance(1e-5, 1e-6, 'l2')}", "unknown metric 'l2'"),
    ],
)
def test_bad_accumulation_tolerance_is_one_clear_problem(tmp_path: Path, tol: str, words: str) -> None:
    with pytest.raises(WorkloadError, match=words):
        _rowsum_workload(tmp_path, tol)


@pytest.mark.parametrize(
    ("x", "y"), [(-0.000137417, -0.000137417 * (1 + 2**-52)), (1.0, 2.0), (3.0, 3.0000001)]
)
def test_a_nondeterministic_verdict_prints_values_that_differ(x: float, y: float) -> None:
    """Two runs that differ in the last bit (an atomic sum's order) read equal at six digits; the
    verdict prints as many digits as it takes to show the difference, and no more."""
    from klineage.gates.protocol import _elem_pair

    a, b = torch.tensor([[x]], dtype=torch.float64), torch.tensor([[y]], dtype=torch.float64)
    sx, sy = _elem_pair(a, b, [0, 0])
    assert sx != sy, (sx, sy)
    if f"{x:.6g}" != f"{y:.6g}":
        assert (sx, sy) == (f"{x:.6g}", f"{y:.6g}")
