"""Prompt building for LLM providers: jinja2 templates, static parts first so they can be cached.

The system prompt (launcher and gate rules for the workload) and the skill cards do not change
during a run: they form the cached prefix. The current code, the last gate feedback and the task
change each step and come last.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jinja2

from klineage.cards import to_markdown
from klineage.materialize.providers.base import ProposalRequest
from klineage.skills import Skill
from klineage.workload import Scalar, Workload


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("klineage.materialize", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - plain-text prompts, not HTML
    )


def _args(wl: Workload) -> list[dict[str, Any]]:
    out = []
    for a in wl.args:
        if isinstance(a, Scalar):
            out.append({"name": a.name, "kind": "scalar", "shape": "", "dtype": a.dtype, "role": ""})
        else:
            out.append({"name": a.name, "kind": "tensor", "shape": "(" + ", ".join(map(str, a.shape)) + ")",
                        "dtype": a.dtype, "role": a.role})
    return out


def system_prompt(wl: Workload, backend: str, arch: str = "sm_90a") -> str:
    return environment().get_template("system.md.j2").render(
        signature=wl.c_signature(), args=_args(wl), divisible_by=dict(wl.divisible_by), workload=wl.name,
        description=wl.description or "(no description)", test_shapes=wl.shape_set("test"), backend=backend,
        arch=arch,
    )


def skill_cards(skills: list[Skill]) -> str:
    cards = [to_markdown(s) for s in sorted(skills, key=lambda s: s.skill_id)]
    return environment().get_template("skills.md.j2").render(cards=cards)


def task_prompt(req: ProposalRequest) -> str:
    skill = req.move.skill
    return environment().get_template("task.md.j2").render(
        step_index=req.step_index, source=req.source.rstrip("\n"), feedback=req.feedback,
        skill_id=skill.skill_id if skill else "", intent=skill.intent if skill else "",
        sites=[f"line {s.line}: {s.summary}" for s in req.move.sites],
    )


@dataclass
class Prompt:
    """System blocks as (text, cache) pairs, static first, and the messages."""

    system: list[tuple[str, bool]]
    messages: list[dict[str, Any]]


def build_prompt(req: ProposalRequest) -> Prompt:
    """Rules (cached), skill cards when the run has skills (cached), then the step's task."""
    system: list[tuple[str, bool]] = [(system_prompt(req.workload, req.backend), True)]
    if req.skills:
        system.append((skill_cards(req.skills), True))
    return Prompt(system, [{"role": "user", "content": [{"type": "text", "text": task_prompt(req)}]}])
