"""Which skills apply to the current kernel, and why the others do not.

A skill applies when its operator finds forward sites in the kernel whose static preconditions
hold (the same named facts the skill was mined under, evaluated again on this code),
and when its validated scope fits the target: a skill with Data-types preconditions needs a dtype
it was validated on; a skill with Hardware preconditions validated on one GPU does not carry to
another GPU (the CPU emulator checks correctness only, so it never excludes a platform).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from klineage.cards import precondition_kind
from klineage.deopt.base import LaunchValues, Operator, Site
from klineage.deopt.registry import get_operator
from klineage.errors import KLineageError
from klineage.skills import Skill
from klineage.source.model import CudaSource
from klineage.workload import Tensor, Workload

EMULATOR = "cpu-emulator"


@dataclass(frozen=True)
class Target:
    """What the skills are matched against besides the code: the workload's dtypes and platform."""

    workload: str
    dtypes: tuple[str, ...]
    platform: str = EMULATOR
    #: per bench shape, the launcher's argument values (None for tensors): the sizes that matter
    bench: tuple[LaunchValues, ...] = ()


def bench_launch_values(wl: Workload) -> tuple[LaunchValues, ...]:
    """Per bench shape of the workload, the launcher's arguments in the protocol's order: each
    scalar's value, None for each tensor (shapes whose scalars cannot be evaluated are left out)."""
    out = []
    for shape in wl.shape_set("bench"):
        try:
            out.append(tuple(None if isinstance(a, Tensor) else wl.scalar_value(a, shape) for a in wl.args))
        except (KeyError, ValueError):
            continue
    return tuple(out)


@dataclass
class Match:
    """An applicable skill: its operator and the forward sites where its preconditions hold."""

    skill: Skill
    operator: Operator | None
    sites: list[Site]
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.skill.skill_id


@dataclass
class MatchReport:
    applicable: list[Match] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def reasons(self) -> dict[str, str]:
        return dict(self.skipped)


#: platform names that say nothing about which GPU (the walker records "cuda" when the gate
#: reports no device name): they match any target
_GENERIC = {"", EMULATOR, "unknown", "cpu", "cuda", "gpu"}


def _is_gpu(platform: str) -> bool:
    """A named GPU (e.g. 'NVIDIA H200'), as opposed to the emulator or a generic backend name."""
    return platform.strip().lower() not in _GENERIC


def scope_problem(skill: Skill, target: Target) -> tuple[str | None, list[str]]:
    """(reason to skip or None, notes) from the skill's validated dtypes and platforms."""
    notes: list[str] = []
    kinds = {precondition_kind(p) for p in skill.preconditions if p.get("holds", True)}
    dtypes = set(skill.scope.get("dtypes") or [])
    if dtypes and target.dtypes and not dtypes & set(target.dtypes):
        msg = f"validated on {', '.join(sorted(dtypes))}, target uses {', '.join(target.dtypes)}"
        if "Data types" in kinds:
            return f"dtype scope: {msg} and the skill has data-type preconditions", notes
        notes.append(f"dtype scope differs ({msg}); no data-type precondition, so it may carry over")
    platforms = [p for p in skill.scope.get("platforms") or [] if _is_gpu(p)]
    if (
        platforms
        and _is_gpu(target.platform)
        and target.platform.lower() not in {p.lower() for p in platforms}
    ):
        msg = f"validated on {', '.join(platforms)}, target is {target.platform}"
        if "Hardware" in kinds:
            return f"platform scope: {msg} and the skill has hardware preconditions", notes
        notes.append(f"platform differs ({msg})")
    return None, notes


def site_problem(op: Operator, src: CudaSource, site: Site, bench: Sequence[LaunchValues] = ()) -> str | None:
    """Why `site` cannot take the optimization: the operator's failing static preconditions, and
    with the target's bench sizes, its failing shape preconditions.

    A skill's recorded preconditions are the same named facts, evaluated where it was mined; here
    they are evaluated again on the target code, so a fact that held there must hold here too."""
    facts = op.preconditions(src, site)
    if bench and all(f.holds for f in facts):
        facts = facts + op.shape_preconditions(src, site, bench)
    failed = [f for f in facts if not f.holds]
    return "; ".join(f"{f.name}: {f.reason}" for f in failed) if failed else None


def forward_sites(
    op: Operator, src: CudaSource, bench: Sequence[LaunchValues] = ()
) -> tuple[list[Site], list[str]]:
    """Forward sites where the preconditions hold (at the bench sizes, when given), and the
    reasons of the ones that fail."""
    good, bad = [], []
    for site in op.find_forward(src):
        why = site_problem(op, src, site, bench)
        if why is None:
            good.append(site)
        else:
            bad.append(f"line {site.line}: {why}")
    return good, bad


def _present(op: Operator, src: CudaSource) -> int:
    try:
        return len(op.find(src))
    except Exception:  # an operator bug: treat as present, so nothing is proposed on its word
        return 1


def match_skills(
    src: CudaSource,
    skills: Sequence[Skill],
    target: Target,
    *,
    mechanical_only: bool = True,
) -> MatchReport:
    """Split skills into applicable matches and (skill_id, reason) skips, in the given order.

    `mechanical_only`: the provider can only use an operator's `apply` (offline); an LLM provider
    can also write skills whose forward step is not mechanical, or imported ones without operator.
    """
    report = MatchReport()
    for skill in skills:
        problem, notes = scope_problem(skill, target)
        if problem:
            report.skipped.append((skill.skill_id, problem))
            continue
        try:
            op: Operator | None = get_operator(skill.operator)
        except KLineageError:
            op = None
        if op is None:
            if mechanical_only:
                report.skipped.append(
                    (
                        skill.skill_id,
                        f"operator '{skill.operator}' unknown here: only an LLM provider can apply it",
                    )
                )
            else:
                report.applicable.append(
                    Match(skill, None, [], [*notes, "no operator: sites are the model's call"])
                )
            continue
        if mechanical_only and not op.mechanical_apply:
            report.skipped.append(
                (
                    skill.skill_id,
                    f"operator '{op.name}' has no mechanical forward step (needs an LLM provider)",
                )
            )
            continue
        try:
            sites, failures = forward_sites(op, src, target.bench)
        except Exception as e:  # an operator bug skips its skills; it must not end the run
            report.skipped.append(
                (skill.skill_id, f"operator '{op.name}' failed on this code: {type(e).__name__}: {e}")
            )
            continue
        if sites:
            report.applicable.append(Match(skill, op, sites, notes))
            continue
        if not mechanical_only and not op.mechanical_apply and not failures and not _present(op, src):
            # no static forward finder: the optimization is absent, so the model decides where it fits
            report.applicable.append(
                Match(skill, op, [], [*notes, f"'{op.name}' has no forward finder; the model picks sites"])
            )
            continue
        if failures:
            reason = f"preconditions fail at every site: {' | '.join(failures[:3])}"
        else:
            present = _present(op, src)
            reason = f"no forward site for '{op.name}'" + (
                f" (already present at {present} site(s))" if present else " (nothing in the code it fits)"
            )
        report.skipped.append((skill.skill_id, reason))
    return report
