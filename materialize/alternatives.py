"""Skills that rewrite the same code in two ways: the loop's tournament.

Two applicable moves are alternatives when each one's candidate leaves no forward site for the
other (a warp per row and a block per row both take the one-thread-per-row loop apart; after
either, the other finds nothing). Ranking cannot tell which of the two is faster at the target's
shape on the CPU, and whichever the loop keeps first shuts the other out for the rest of the run.
So when the judge has GPU times (a `cuda` gate, or times measured elsewhere), the loop gates the
alternatives of its chosen move from the same kernel, each for one unit of budget, and keeps the
fastest (DESIGN.md, 'Materializer').

The check is static and mechanical: each operator's own forward step at every site, then the
other's forward finder on the result. Moves without a mechanical operator have no alternatives.
"""

from __future__ import annotations

from collections.abc import Sequence

from klineage.materialize.matching import forward_sites
from klineage.materialize.providers.base import Move
from klineage.materialize.providers.offline import apply_everywhere
from klineage.source.model import CudaSource


def _after(move: Move, src: CudaSource) -> CudaSource | None:
    """The move's mechanical candidate, or None when it has none here."""
    op = move.operator
    if op is None or not op.mechanical_apply:
        return None
    after, done, _refused = apply_everywhere(op, src)
    return after if done else None


def _shuts_out(move: Move, after: CudaSource) -> bool:
    """True when `move` finds no forward site left in `after`."""
    assert move.operator is not None
    try:
        sites, _bad = forward_sites(move.operator, after)
    except Exception:  # an operator bug: it cannot be said to be shut out
        return False
    return not sites


def alternatives(src: CudaSource, chosen: Move, candidates: Sequence[Move]) -> list[Move]:
    """The moves of `candidates` (in their order) that exclude `chosen` and are excluded by it;
    one per operator, none of `chosen`'s own operator."""
    mine = _after(chosen, src)
    if mine is None:
        return []
    assert chosen.operator is not None
    out: list[Move] = []
    ops = {chosen.operator.name}
    for other in candidates:
        op = other.operator
        if op is None or op.name in ops or not op.mechanical_apply or not _shuts_out(other, mine):
            continue
        theirs = _after(other, src)
        if theirs is not None and _shuts_out(chosen, theirs):
            out.append(other)
            ops.add(op.name)
    return out
