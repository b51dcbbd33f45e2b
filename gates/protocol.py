"""The correctness protocol, shared by every backend (DESIGN.md, 'The gate').

For each shape of the set and each seed: fresh random signed inputs, the reference on copies;
then two launches, each with outputs and scratch poisoned by a different byte pattern (and, on
`emu`, under a different thread schedule). Afterwards: inputs must be bit-identical to before,
no output element may still hold its poison in both launches, the two launches must agree bit
for bit (unless the workload tolerates nondeterminism), and the outputs must match the reference
within the per-dtype tolerance. Each launch has buffers of its own (so the second gets the same
values at new addresses); then the last launch's inputs are refilled in place with new values
and it runs once more (same addresses, new values), so a result kept from an earlier call and
keyed by an input pointer is caught on every run, whatever the allocator does. This code runs
inside the gate's child process.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from klineage.gates.result import ShapeCheck
from klineage.workload import Scalar, Tensor, Tolerance, Workload, eval_dim

#: Byte patterns written over outputs and scratch before the first and second launch. 0xFF is a
#: NaN in every float format and -1 in integers; 0x5A gives a finite value, so a kernel that
#: leaves an element alone shows the pattern of each launch in turn.
POISONS = (0xFF, 0x5A)


#: host bytes of generated inputs a long-lived process keeps (see `host_inputs`); 0 in a child
#: process, which generates every set once anyway
INPUT_MEMO_BYTES = 0
_memo: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_memo_lock = threading.Lock()


def host_inputs(workload: Workload, bindings: Mapping[str, int], seed: int) -> dict[str, Any]:
    """`workload.make_inputs(bindings, seed)`: the same values every time (a seeded generator of
    its own), so a resident worker (gates/resident.py) keeps recent sets, keyed by the workload's
    fingerprint, shape and seed, and hands out copies; the candidates of one workload then
    share the generation (seconds at bench shapes)."""
    if INPUT_MEMO_BYTES <= 0:
        return workload.make_inputs(bindings, seed)
    key = _memo_key(workload, bindings, seed)
    with _memo_lock:
        hit = _memo.get(key)
        if hit is not None:
            _memo.move_to_end(key)
    if hit is None:
        hit = workload.make_inputs(bindings, seed)
        size = sum(v.nbytes for v in hit.values() if isinstance(v, torch.Tensor))
        with _memo_lock:
            _memo[key] = hit
            total = sum(
                sum(v.nbytes for v in e.values() if isinstance(v, torch.Tensor)) for e in _memo.values()
            )
            while len(_memo) > 1 and total > INPUT_MEMO_BYTES:
                _k, old = _memo.popitem(last=False)
                total -= sum(v.nbytes for v in old.values() if isinstance(v, torch.Tensor))
        if size > INPUT_MEMO_BYTES:
            with _memo_lock:
                _memo.pop(key, None)
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in hit.items()}


@dataclass
class _Kept:
    """One input set kept on the device, and a digest of its bytes taken when it was made."""

    values: dict[str, Any]
    digest: tuple[int, ...]
    nbytes: int


#: device bytes of generated input sets a long-lived process keeps on the device (see
#: `device_inputs`); 0 in a child process
DEVICE_MEMO_BYTES = 0
_dev_memo: OrderedDict[tuple[Any, ...], _Kept] = OrderedDict()


def _digest(values: Mapping[str, Any]) -> tuple[int, ...]:
    """Per tensor an exact integer sum of its 32-bit words (bytes when the size is odd): cheap on
    the device, and changed by any write a kernel or a launcher makes into the kept copy."""
    out: list[int] = []
    for v in values.values():
        if isinstance(v, torch.Tensor) and v.numel():
            b = v.reshape(-1).view(torch.uint8)
            words = b.view(torch.int32) if b.numel() % 4 == 0 else b
            out.append(int(words.sum(dtype=torch.int64)))
    return tuple(out)


def device_inputs(
    workload: Workload, bindings: Mapping[str, int], seed: int, device: torch.device
) -> dict[str, Any]:
    """`host_inputs` moved to `device`. A resident worker (DEVICE_MEMO_BYTES > 0) keeps recent sets
    on the device and hands out device copies: the values are those of `make_inputs` (the same
    seeds, the same numbers on every path), but a candidate after the first of its workload pays
    a device copy instead of host generation and a host-to-device transfer (seconds at bench
    shapes, with the GPU idle). `memo_intact` proves between candidates that no candidate wrote
    into the kept sets."""
    if DEVICE_MEMO_BYTES <= 0:
        return {
            k: (v.to(device) if isinstance(v, torch.Tensor) else v)
            for k, v in host_inputs(workload, bindings, seed).items()
        }
    key = (_memo_key(workload, bindings, seed), str(device))
    with _memo_lock:
        kept = _dev_memo.get(key)
        if kept is not None:
            _dev_memo.move_to_end(key)
    if kept is None:
        values = {
            k: (v.to(device) if isinstance(v, torch.Tensor) else v)
            for k, v in host_inputs(workload, bindings, seed).items()
        }
        size = sum(v.nbytes for v in values.values() if isinstance(v, torch.Tensor))
        kept = _Kept(values, _digest(values), size)
        if size <= DEVICE_MEMO_BYTES:
            with _memo_lock:
                _dev_memo[key] = kept
                total = sum(e.nbytes for e in _dev_memo.values())
                while len(_dev_memo) > 1 and total > DEVICE_MEMO_BYTES:
                    _k, old = _dev_memo.popitem(last=False)
                    total -= old.nbytes
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kept.values.items()}


def memo_intact() -> str | None:
    """None when every input set kept on the device still holds the bytes it was made with; else
    which one changed (a candidate wrote outside its own buffers: its process must not serve
    another candidate)."""
    with _memo_lock:
        entries = list(_dev_memo.items())
    for key, kept in entries:
        if _digest(kept.values) != kept.digest:
            return (
                f"a kept input set ({key[0][2]}, shape {dict(key[0][3])}, seed {key[0][4]}) was overwritten"
            )
    return None


def _memo_key(workload: Workload, bindings: Mapping[str, int], seed: int) -> tuple[Any, ...]:
    return (
        workload.fingerprint(),
        str(workload.source_dir),
        workload.name,
        tuple(sorted(bindings.items())),
        seed,
    )


class Runner(Protocol):
    """What a backend gives the protocol: a device, schedules, and a launcher call."""

    device: torch.device
    #: one schedule per launch of the pair (emu: forward and reverse lane order)
    schedules: Sequence[int]

    def launch(self, args: Sequence[Any], schedule: int) -> None:
        """Call the launcher with tensors and scalars in workload order; return once done."""


@dataclass
class Verdict:
    category: str  # "ok" or a rejection category
    message: str
    checks: list[ShapeCheck]

    @property
    def ok(self) -> bool:
        return self.category == "ok"


def ctypes_args(workload: Workload, values: Sequence[Any], stream: int | None) -> list[Any]:
    """Marshal launcher arguments: tensors as pointers, scalars by their C type, then the stream."""
    out: list[Any] = []
    for a, v in zip(workload.args, values, strict=True):
        if isinstance(a, Tensor):
            out.append(ctypes.c_void_p(v.data_ptr()))
        elif a.dtype == "int32":
            out.append(ctypes.c_int32(int(v)))
        elif a.dtype == "int64":
            out.append(ctypes.c_int64(int(v)))
        elif a.dtype == "float32":
            out.append(ctypes.c_float(float(v)))
        else:
            out.append(ctypes.c_double(float(v)))
    out.append(ctypes.c_void_p(stream))
    return out


#: Bytes of guard zone before and after every tensor the kernel sees (a multiple of 256, so the
#: tensor keeps the alignment a torch allocation has).
GUARD_BYTES = 4096


class Guarded:
    """A tensor with guard zones on both sides. The guards hold NaN (floats) or a fixed value
    (integers): a write past either end shows as changed guard bytes (`out_of_bounds`) on every
    backend, and a float read past the end brings a NaN into the result."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> None:
        esize = torch.empty((), dtype=dtype).element_size()
        self.pad = GUARD_BYTES // esize
        self.numel = 1
        for d in shape:
            self.numel *= d
        self.buffer = torch.empty(self.numel + 2 * self.pad, dtype=dtype, device=device)
        canary = float("nan") if dtype.is_floating_point else (True if dtype == torch.bool else 0x5B)
        self.buffer[: self.pad].fill_(canary)
        self.buffer[self.pad + self.numel :].fill_(canary)
        self.guard_copy = torch.cat([self.buffer[: self.pad], self.buffer[self.pad + self.numel :]]).clone()
        self.tensor = self.buffer[self.pad : self.pad + self.numel].view(shape)

    def breach(self) -> str | None:
        """Where the kernel wrote outside the tensor, in words, or None."""
        lo, hi = self.buffer[: self.pad], self.buffer[self.pad + self.numel :]
        if same_bytes(lo, self.guard_copy[: self.pad]) and same_bytes(hi, self.guard_copy[self.pad :]):
            return None  # the usual case, without building a per-element mask
        now = torch.cat([lo, hi])
        changed = ~(_bytes_per_element(now) == _bytes_per_element(self.guard_copy)).all(dim=1)
        if not bool(changed.any()):
            return None
        idx = torch.nonzero(changed).reshape(-1).cpu()
        before = idx[idx < self.pad]
        if len(before):
            return (
                f"{len(idx)} elements outside its bounds, first {self.pad - int(before[-1])} before its start"
            )
        return f"{len(idx)} elements outside its bounds, first at element {self.numel + int(idx[0]) - self.pad} (size {self.numel})"


def guarded(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
    pattern: int | None = None,
    data: torch.Tensor | None = None,
) -> Guarded:
    """A guarded tensor filled with `data`, or with the byte `pattern` (poison)."""
    g = Guarded(shape, dtype, device)
    if data is not None:
        g.tensor.copy_(data)
    elif pattern is not None and g.numel:
        g.tensor.reshape(-1).view(torch.uint8).fill_(pattern)  # reshape: a 0-dim tensor has no byte view
    return g


def _bytes_per_element(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8).reshape(t.numel(), t.element_size())


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors of one dtype and shape hold the same bytes, element by element (the
    fast test before a per-element mask is built; NaNs compare by their bits)."""
    return torch.equal(_bytes_per_element(a), _bytes_per_element(b))


#: integer dtypes by element size, to test a whole element against a repeated byte at once
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def holds_pattern(t: torch.Tensor, pattern: int) -> torch.Tensor:
    """Bool mask (flattened) of elements whose every byte equals `pattern`."""
    size = t.element_size()
    itype = _INT_OF_SIZE.get(size)
    if itype is not None:
        # an element's bytes all equal `pattern` iff the element, read as an integer of its
        # size, equals `pattern` repeated in every byte (the same in either byte order)
        word = int.from_bytes(bytes([pattern]) * size, "little", signed=itype is not torch.uint8)
        try:
            return t.contiguous().reshape(-1).view(itype) == word
        except RuntimeError:  # a dtype torch will not view as an integer: byte by byte
            pass
    return (_bytes_per_element(t) == pattern).all(dim=1)


def first_index(mask: torch.Tensor, shape: Sequence[int]) -> list[int]:
    flat = int(torch.nonzero(mask.reshape(-1))[0].item())
    idx = []
    for d in reversed(shape):
        idx.append(flat % d)
        flat //= d
    return list(reversed(idx))


def compare(
    got: torch.Tensor, want: torch.Tensor, tol: Tolerance, allowance: torch.Tensor | None = None
) -> tuple[bool, float, float, list[int] | None]:
    """(ok, max_abs, max_rel, first bad index). NaN in `got` never passes. `allowance` (same
    shape as `want`) widens the elementwise bound: the accumulation term of `accumulation_allowance`.

    In float64 where the tensors are (on the GPU: no copy of big outputs to the host); the
    element-wise rule uses only correctly rounded IEEE operations and exact maxima, so the
    numbers are those of the host. The Frobenius rule (a sum, whose order differs between
    devices) is computed on the host."""
    shape = list(got.shape)
    if tuple(want.shape) != tuple(got.shape):
        want = want.reshape(got.shape)
    where = "cpu" if tol.metric == "frobenius" else got.device
    g = got.detach().to(where, torch.float64)
    w = want.detach().to(where, torch.float64)
    if g.numel() == 0:
        return True, 0.0, 0.0, None
    diff = (g - w).abs()
    nan = torch.isnan(g) | torch.isnan(w)
    finite_diff = torch.where(nan, torch.zeros_like(diff), diff)
    max_abs = float(finite_diff.max())
    rel = finite_diff / w.abs().clamp_min(1e-30)
    max_rel = float(torch.where(w == 0, torch.zeros_like(rel), rel).max())
    if tol.metric == "frobenius":
        denom = float(torch.linalg.vector_norm(w))
        fro = float(torch.linalg.vector_norm(finite_diff)) / max(denom, 1e-30)
        bad = nan
        ok = fro <= tol.rtol and not bool(nan.any())
        if not ok and not bool(nan.any()):
            bad = diff == diff.max()
        return ok, max_abs, fro, (first_index(bad, shape) if not ok else None)
    inf_match = torch.isinf(g) & torch.isinf(w) & (torch.sign(g) == torch.sign(w))
    bound = tol.atol + tol.rtol * w.abs()
    if allowance is not None:
        bound = bound + allowance.detach().to(w.device, torch.float64).reshape(w.shape)
    bad = nan | (~inf_match & ~(diff <= bound))
    if bool(bad.any()):
        return False, max_abs, max_rel, first_index(bad, shape)
    return True, max_abs, max_rel, None


#: lambda of the probabilistic rounding bound lambda * sqrt(n) * u * sum|x| (Higham and Mary, 2019):
#: rounding errors of a sum in any order stay within it except with a probability that falls as
#: exp(-lambda^2 / 2); the worst-case n * u * sum|x| would let a kernel off by a percent pass.
ACCUMULATION_LAMBDA = 4.0


def accumulation_allowance(
    workload: Workload,
    t: Tensor,
    inputs: Mapping[str, Any],
    bindings: Mapping[str, int],
    length: int | None = None,
) -> torch.Tensor | None:
    """lambda * sqrt(length) * u * S for output `t` (see Tolerance): S is the reference on the
    inputs' absolute values, u the unit roundoff of `t`'s dtype. `length` defaults to the tolerance's own; None
    when `t` is not a float or the reference does not take absolute values."""
    if not t.torch_dtype.is_floating_point:
        return None
    if length is None:
        tol = workload.tolerance_for(t)
        if tol.metric != "accumulation" or tol.length is None:
            return None
        length = int(eval_dim(tol.length, bindings))
    magnitudes = {
        k: (v.abs() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v)
        for k, v in inputs.items()
    }
    try:
        s = workload.run_reference(magnitudes)[t.name]
    except Exception:  # a reference undefined on magnitudes: no accumulation term
        return None
    u = torch.finfo(t.torch_dtype).eps / 2
    return s.detach().to("cpu", torch.float64).abs() * (ACCUMULATION_LAMBDA * math.sqrt(length) * u)


def reduced_length(workload: Workload, t: Tensor, bindings: Mapping[str, int]) -> int | None:
    """How many input elements each element of `t` could sum, when `t` is smaller than an input
    (a reduction-shaped output); None otherwise."""
    out_n = math.prod(workload.tensor_shape(t, bindings))
    in_n = max(
        (math.prod(workload.tensor_shape(a, bindings)) for a in workload.tensors if a.role == "in"), default=0
    )
    return in_n // out_n if out_n and in_n > out_n else None


def check_workload(
    workload: Workload,
    runner: Runner,
    shape_set: str = "test",
    seeds: Sequence[int] = (0, 1),
    shapes: Sequence[Mapping[str, int]] | None = None,
) -> Verdict:
    """Run the whole protocol; stop at the first failing (shape, seed)."""
    checks: list[ShapeCheck] = []
    device = runner.device
    bindings_list = list(shapes) if shapes is not None else workload.shape_set(shape_set)
    note = f" ({workload.verdict_note})" if workload.verdict_note else ""
    for bindings in bindings_list:
        for seed in seeds:
            verdict = _check_one(workload, runner, dict(bindings), seed, device, checks)
            if verdict is not None:
                verdict.message += note
                return verdict
    return Verdict(
        "ok", f"{len(bindings_list)} shapes x {len(seeds)} seeds x {len(runner.schedules)} runs{note}", checks
    )


#: Added to the seed for the value set written in place before the last launch of a shape.
REFILL_SEED_OFFSET = 0x5EED


class LaunchRejected(Exception):
    """Raised by a Runner's `launch` when the launch itself broke a rule the runner can see (emu:
    a kernel launched on another stream than the launcher's argument: `side_stream`)."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


@dataclass
class _Launch:
    """The buffers of one launch: every tensor guarded, inputs and outputs by name."""

    values: list[Any]
    guards: dict[str, Guarded]
    inputs: dict[str, torch.Tensor]
    produced: dict[str, torch.Tensor]


def _allocate(
    workload: Workload,
    bindings: dict[str, int],
    inputs: Mapping[str, Any],
    pattern: int,
    device: torch.device,
) -> _Launch:
    """Fresh guarded buffers: read tensors hold `inputs`, the others the poison `pattern`."""
    launch = _Launch([], {}, {}, {})
    for a in workload.args:
        if isinstance(a, Scalar):
            launch.values.append(inputs[a.name])
            continue
        shape = workload.tensor_shape(a, bindings)
        if a.is_read:
            g = guarded(shape, a.torch_dtype, device, data=inputs[a.name])
        else:
            g = guarded(shape, a.torch_dtype, device, pattern=pattern)
        launch.guards[a.name] = g
        if a.role == "in":
            launch.inputs[a.name] = g.tensor
        elif a.role in ("out", "inout"):
            launch.produced[a.name] = g.tensor
        launch.values.append(g.tensor)
    return launch


def _refill(workload: Workload, launch: _Launch, inputs: Mapping[str, Any], pattern: int) -> None:
    """New values into the same buffers (same addresses): read tensors get `inputs`, the others
    the poison `pattern`; guard zones stay as they were."""
    for a in workload.tensors:
        t = launch.guards[a.name].tensor
        if a.is_read:
            t.copy_(inputs[a.name])
        elif t.numel():
            t.reshape(-1).view(torch.uint8).fill_(pattern)  # a 0-dim output has no byte view


def _run(
    workload: Workload,
    runner: Runner,
    launch: _Launch,
    schedule: int,
    inputs: Mapping[str, Any],
    bindings: dict[str, int],
    seed: int,
    what: str,
    checks: list[ShapeCheck],
) -> Verdict | None:
    """One launch, then the checks that need no second run: a launch rule the runner saw, writes
    outside a tensor, inputs changed."""
    try:
        runner.launch(launch.values, schedule)
    except LaunchRejected as e:
        checks.append(ShapeCheck(bindings, seed, "", False, note=e.category))
        return Verdict(e.category, f"{e.message} ({what})", checks)
    for name, g in launch.guards.items():
        breach = g.breach()
        if breach:
            checks.append(ShapeCheck(bindings, seed, name, False, note="out of bounds"))
            return Verdict("out_of_bounds", f"the kernel wrote to '{name}' at {breach} ({what})", checks)
    for name, t in launch.inputs.items():
        before = inputs[name]
        if same_bytes(t, before):
            continue
        changed = ~(_bytes_per_element(t) == _bytes_per_element(before)).all(dim=1)
        if bool(changed.any()):
            idx = first_index(changed.cpu(), list(t.shape))
            checks.append(ShapeCheck(bindings, seed, name, False, first_bad_index=idx, note="input mutated"))
            return Verdict(
                "input_mutated", f"input '{name}' was written by the kernel at index {idx} ({what})", checks
            )
    return None


def _check_one(
    workload: Workload,
    runner: Runner,
    bindings: dict[str, int],
    seed: int,
    device: torch.device,
    checks: list[ShapeCheck],
) -> Verdict | None:
    """The launches of one (shape, seed): one per schedule, each in buffers of its own (every
    launch's buffers stay alive, so the same values arrive at new addresses), then one more in
    the last launch's buffers refilled with new values (same addresses). A kernel that returns a
    result kept from an earlier call, keyed by an input pointer, fails the last comparison
    whatever addresses the allocator hands out."""
    where = f"shape {bindings} seed {seed}"
    dev_inputs = device_inputs(workload, bindings, seed, device)
    expected = workload.run_reference(dev_inputs)
    launches: list[_Launch] = []
    for run, (schedule, pattern) in enumerate(zip(runner.schedules, POISONS, strict=False)):
        launch = _allocate(workload, bindings, dev_inputs, pattern, device)
        bad = _run(
            workload, runner, launch, schedule, dev_inputs, bindings, seed, f"{where}, run {run}", checks
        )
        if bad is not None:
            return bad
        launches.append(launch)
    runs = [launch.produced for launch in launches]

    outs = workload.outputs
    for t in outs:
        if t.role != "out" or len(runs) < 2:
            continue
        a, b = runs[0][t.name], runs[1][t.name]
        unwritten = holds_pattern(a, POISONS[0]) & holds_pattern(b, POISONS[1])
        if bool(unwritten.any()):
            idx = first_index(unwritten.cpu(), list(a.shape))
            count = int(unwritten.sum())
            checks.append(ShapeCheck(bindings, seed, t.name, False, first_bad_index=idx, note="unwritten"))
            return Verdict(
                "unwritten_output",
                f"output '{t.name}': {count} of {a.numel()} elements never written, first at index {idx} ({where})",
                checks,
            )
    for t in outs:
        if len(runs) < 2 or workload.nondeterminism_tolerated:
            continue
        a, b = runs[0][t.name], runs[1][t.name]
        if same_bytes(a, b):
            continue
        differs = ~(_bytes_per_element(a) == _bytes_per_element(b)).all(dim=1)
        if bool(differs.any()):
            idx = first_index(differs.cpu(), list(a.shape))
            checks.append(ShapeCheck(bindings, seed, t.name, False, first_bad_index=idx, note="runs differ"))
            return Verdict(
                "nondeterministic",
                f"output '{t.name}' differs between two runs ({_schedule_words(runner)}) at index {idx}: "
                "{} vs {} ({})".format(*_elem_pair(a, b, idx), where),
                checks,
            )
    for t in outs:
        for run, produced in enumerate(runs):
            bad, check = _mismatch(
                workload,
                t,
                produced[t.name],
                expected[t.name],
                dev_inputs,
                bindings,
                seed,
                f"{where}, run {run}",
                checks,
            )
            if bad is not None:
                return bad
            if run == 0:
                checks.append(check)

    refill_inputs = device_inputs(workload, bindings, seed + REFILL_SEED_OFFSET, device)
    refill_expected = workload.run_reference(refill_inputs)
    last = launches[-1]
    _refill(workload, last, refill_inputs, POISONS[0])
    what = f"{where}, inputs refilled in place with new values"
    bad = _run(workload, runner, last, runner.schedules[0], refill_inputs, bindings, seed, what, checks)
    if bad is not None:
        return bad
    for t in outs:
        bad, _ = _mismatch(
            workload,
            t,
            last.produced[t.name],
            refill_expected[t.name],
            refill_inputs,
            bindings,
            seed,
            what + " at the same addresses",
            checks,
            hint="; the kernel returned a result kept from an earlier call (keyed by input pointer?)",
        )
        if bad is not None:
            return bad
    return None


def _mismatch(
    workload: Workload,
    t: Tensor,
    got: torch.Tensor,
    want: torch.Tensor,
    inputs: Mapping[str, Any],
    bindings: dict[str, int],
    seed: int,
    what: str,
    checks: list[ShapeCheck],
    hint: str = "",
) -> tuple[Verdict | None, ShapeCheck]:
    """Compare one output with the reference: (a `mismatch` verdict or None, the check)."""
    tol = workload.tolerance_for(t)
    allowance = accumulation_allowance(workload, t, inputs, bindings)
    ok, max_abs, max_rel, idx = compare(got, want, tol, allowance)
    check = ShapeCheck(bindings, seed, t.name, ok, max_abs, max_rel, idx)
    if ok:
        return None, check
    checks.append(check)
    nans = torch.isnan(got) if got.dtype.is_floating_point else None
    if nans is not None and bool(nans.any()):
        first = first_index(nans.cpu(), list(got.shape))
        return Verdict(
            "mismatch",
            f"output '{t.name}': NaN in output at index {first} ({int(nans.sum())} of {got.numel()} elements NaN, "
            f"expected {_elem(want.reshape(got.shape), first)}; {what}){hint}",
            checks,
        ), check
    g = _elem(got, idx) if idx else "?"
    w = _elem(want.reshape(got.shape), idx) if idx else "?"
    bound = f"atol {tol.atol:g}, rtol {tol.rtol:g}" + (
        f", accumulation over {tol.length}" if allowance is not None else ""
    )
    return Verdict(
        "mismatch",
        f"output '{t.name}' wrong at index {idx}: got {g}, expected {w} "
        f"(max abs err {max_abs:.3g}, max rel err {max_rel:.3g}; {bound}; {what})"
        f"{_accumulation_hint(workload, t, got, want, inputs, bindings, allowance)}{hint}",
        checks,
    ), check


def _accumulation_hint(
    workload: Workload,
    t: Tensor,
    got: torch.Tensor,
    want: torch.Tensor,
    inputs: Mapping[str, Any],
    bindings: dict[str, int],
    allowance: torch.Tensor | None,
) -> str:
    """Words for a reduction-shaped output that fails only by the rounding a sum may gather."""
    if allowance is not None or workload.tolerance_for(t).metric != "elementwise":
        return ""
    n = reduced_length(workload, t, bindings)
    extra = accumulation_allowance(workload, t, inputs, bindings, length=n) if n else None
    if extra is None or not compare(got, want, workload.tolerance_for(t), extra)[0]:
        return ""
    return (
        f"; every error is within the rounding of a sum of {n} terms in another order (4*sqrt(n)*u*sum|x|): if the "
        f"kernel may choose its summation order, declare Tolerance.accumulation(...) for '{t.name}' in the workload"
    )


def _elem(t: torch.Tensor, idx: Sequence[int]) -> str:
    v = t[tuple(idx)].item()
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _elem_pair(a: torch.Tensor, b: torch.Tensor, idx: Sequence[int]) -> tuple[str, str]:
    """Two elements known to differ, printed with as many digits as it takes to see it: a
    last-bit difference (an atomic sum's order) reads equal at six digits."""
    x, y = a[tuple(idx)].item(), b[tuple(idx)].item()
    if not (isinstance(x, float) and isinstance(y, float)):
        return str(x), str(y)
    for digits in (6, 9, 12, 17):
        sx, sy = f"{x:.{digits}g}", f"{y:.{digits}g}"
        if sx != sy:
            return sx, sy
    return x.hex(), y.hex()


def _schedule_words(runner: Runner) -> str:
    s = list(runner.schedules)
    return "two thread schedules" if len(set(s)) > 1 else "same schedule"
