"""Is a gated candidate better than the current kernel?

GPU (timing on both): faster by more than the timing spread (the larger run-to-run spread of the
two: max minus min of the trial medians; a time whose samples show no spread at all, one launch of
a slow kernel, is given 0.5% of itself). CPU (no timing): correct and the optimization's static
effect present: the operator's `find` sees more sites than before (for a free LLM move, any
operator's), or, for a step whose effect is a changed value, the operator's `shape_effect` at the
workload's bench sizes (tile_size: a block grown where threads walked long rows). Text that did
not change is never better.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from klineage.deopt.base import LaunchValues, Operator
from klineage.deopt.registry import operators as all_operators
from klineage.errors import SourceError
from klineage.gates.result import GateResult, Timing
from klineage.source.model import CudaSource


@dataclass
class Verdict:
    kept: bool
    verdict: str  # kept | rejected | not_faster | no_effect
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


#: the spread assumed for a time whose samples do not vary (a kernel of a second or more is
#: launched once): a zero would let noise decide. The same H100 timed reduce_sum's naive kernel once
#: in each of five processes at 7385-7483 ms; the multi-trial spreads of the same judges: 0.1-0.6%.
SINGLE_SAMPLE_SPREAD = 0.005


def spread_ms(t: Timing) -> float:
    """The run-to-run spread of a time: max minus min of its trial medians (or of its repetitions);
    `SINGLE_SAMPLE_SPREAD` of the median where they show none (one sample)."""
    medians = (t.extra or {}).get("trial_medians_ms") or []
    spread = max(medians) - min(medians) if len(medians) >= 2 else max(0.0, t.max_ms - t.min_ms)
    return spread if spread > 0 else SINGLE_SAMPLE_SPREAD * t.median_ms


def gain_and_spread(cur: Timing, cand: Timing) -> tuple[float, float]:
    """(how much faster `cand` is than `cur`, the larger of their spreads), in ms: the GPU rule
    keeps `cand` when the gain is over the spread."""
    return cur.median_ms - cand.median_ms, max(spread_ms(cur), spread_ms(cand))


def site_counts(text: str, ops: list[Operator]) -> dict[str, int]:
    """How many sites of each optimization the code holds (0 for code that does not parse)."""
    try:
        src = CudaSource.from_text(text, "candidate.cu")
    except SourceError:
        return {op.name: 0 for op in ops}
    counts = {}
    for op in ops:
        try:
            counts[op.name] = len(op.find(src))
        except Exception:  # an operator bug must not end a run: count it as absent
            counts[op.name] = 0
    return counts


def judge(
    current: str,
    candidate: str,
    cur_gate: GateResult,
    cand_gate: GateResult,
    operator: Operator | None,
    bench: Sequence[LaunchValues] = (),
) -> Verdict:
    if not cand_gate.accepted:
        return Verdict(False, "rejected", f"{cand_gate.category}: {cand_gate.message}".strip())
    if candidate == current:
        return Verdict(False, "no_effect", "the candidate is the current kernel")
    if cur_gate.timing is not None and cand_gate.timing is not None:
        cur, cand = cur_gate.timing, cand_gate.timing
        gain, spread = gain_and_spread(cur, cand)
        detail = {
            "current_ms": cur.median_ms,
            "candidate_ms": cand.median_ms,
            "spread_ms": spread,
            "gain_ms": gain,
        }
        if gain > spread:
            return Verdict(
                True, "kept", f"{cur.median_ms:.4f} -> {cand.median_ms:.4f} ms (spread {spread:.4f})", detail
            )
        return Verdict(
            False,
            "not_faster",
            f"{cand.median_ms:.4f} ms vs {cur.median_ms:.4f} ms: not faster by more than the spread {spread:.4f} ms",
            detail,
        )
    ops = [operator] if operator is not None else all_operators()
    before, after = site_counts(current, ops), site_counts(candidate, ops)
    grew = sorted(n for n in after if after[n] > before.get(n, 0))
    detail = {"static_before": before, "static_after": after}
    if grew:
        return Verdict(
            True,
            "kept",
            "static effect present: " + ", ".join(f"{n} {before[n]} -> {after[n]} site(s)" for n in grew),
            detail,
        )
    why = _shape_effect(operator, current, candidate, bench)
    if why:
        return Verdict(True, "kept", f"shape effect present: {why}", detail)
    names = ", ".join(o.name for o in ops) if len(ops) <= 3 else "any operator"
    return Verdict(
        False, "no_effect", f"correct, but no more {names} sites than before (static effect absent)", detail
    )


def _shape_effect(
    operator: Operator | None, current: str, candidate: str, bench: Sequence[LaunchValues]
) -> str | None:
    """The operator's `shape_effect` of the step at the bench sizes (None without them)."""
    if operator is None or not bench:
        return None
    try:
        before = CudaSource.from_text(current, "current.cu")
        after = CudaSource.from_text(candidate, "candidate.cu")
        return operator.shape_effect(before, after, bench)
    except Exception:  # an operator bug or code that does not parse: no effect claimed
        return None
