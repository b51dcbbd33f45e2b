"""The `offline` provider: the operator's mechanical `apply`, deterministic, no network.

It applies the move's optimization at every forward site whose preconditions hold, finding the
sites again after each edit (offsets move), so one candidate is the skill applied wherever it fits.
The workload's bench sizes go with every step: a site whose shape preconditions fail there is left
alone, and an operator that sizes what it writes (a block per row's block) sizes it for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from klineage.deopt.base import LaunchValues, Operator, Refused
from klineage.errors import SourceError
from klineage.materialize.matching import bench_launch_values, forward_sites
from klineage.materialize.providers.base import Proposal, ProposalRequest, Provider, register_provider
from klineage.source.model import CudaSource

MAX_SITES = 64


def apply_everywhere(
    op: Operator, src: CudaSource, bench: Sequence[LaunchValues] = ()
) -> tuple[CudaSource, list[str], list[str]]:
    """`op`'s forward step at every site whose preconditions hold (at the bench sizes, when
    given), re-finding sites after each edit: (the code after, the sites done, the sites refused
    with the reason)."""
    done: list[str] = []
    refused: list[str] = []
    tried: set[tuple[str, str]] = set()
    for _ in range(MAX_SITES):
        try:
            sites, _bad = forward_sites(op, src, bench)
        except Exception as e:  # an operator bug: no candidate, with the reason
            refused.append(f"{op.name} failed: {type(e).__name__}: {e}")
            break
        sites = [s for s in sites if (s.anchor.path, s.summary) not in tried]
        if not sites:
            break
        site = sites[0]
        tried.add((site.anchor.path, site.summary))
        try:
            after = op.apply(src, site, bench)
        except (Refused, SourceError) as e:
            refused.append(f"line {site.line}: {e}")
            continue
        except Exception as e:  # an operator bug at one site: try the others
            refused.append(f"line {site.line}: {op.name} failed: {type(e).__name__}: {e}")
            continue
        if after.text == src.text:
            refused.append(f"line {site.line}: apply changed nothing")
            continue
        src = after
        done.append(f"line {site.line}: {site.summary}")
    return src, done, refused


@register_provider
class OfflineProvider(Provider):
    name = "offline"
    mechanical = True
    attempts_per_move = 1

    def __init__(self, **_: object) -> None:
        self.model = None

    def propose(self, request: ProposalRequest) -> Proposal:
        op = request.move.operator
        if op is None:
            return Proposal(None, "the offline provider needs an operator with a mechanical forward step")
        try:
            src = CudaSource.from_text(request.source, "current.cu")
        except SourceError as e:
            return Proposal(None, f"current kernel does not parse: {e}")
        after, done, refused = apply_everywhere(op, src, bench_launch_values(request.workload))
        if not done:
            return Proposal(
                None,
                f"{op.name}: no site could be applied" + (f" ({'; '.join(refused[:3])})" if refused else ""),
            )
        note = f"{op.name} applied at {len(done)} site(s): " + "; ".join(done[:4])
        if refused:
            note += f"; refused at {len(refused)}"
        return Proposal(after.text, note)
