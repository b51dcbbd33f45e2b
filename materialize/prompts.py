"""Prompt building for LLM providers: jinja2 templates, static parts first, cut to a token budget.

The order is the rules (launcher and gate rules for the workload: the same on every call of a run),
then the cards of the skills that match the current kernel, in curriculum order, each trimmed to
what the model needs (intent, preconditions, carrier, risks: not the whole evidence), then the
current code, the last gate feedback and the task. Both system blocks are marked for caching: the
rules are identical across calls, the cards while the matching skills stay the same.

The prompt never grows with the store: it is built to `budget` input tokens. Cards are dropped
from the end of the curriculum (never the card of the skill being applied), then the feedback is
shortened; a prompt the rules and the code alone put over budget is refused (PromptTooLarge). The
cut uses a conservative local estimate; `fit_prompt` then counts the result with the provider
(the API's count_tokens where reachable) and cuts harder if the real count is over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jinja2

from klineage.cards import precondition_kind
from klineage.llm.anthropic_provider import estimate_tokens
from klineage.llm.base import LLMError
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
            out.append(
                {
                    "name": a.name,
                    "kind": "tensor",
                    "shape": "(" + ", ".join(map(str, a.shape)) + ")",
                    "dtype": a.dtype,
                    "role": a.role,
                }
            )
    return out


def system_prompt(wl: Workload, backend: str, arch: str = "sm_90a") -> str:
    return (
        environment()
        .get_template("system.md.j2")
        .render(
            signature=wl.c_signature(),
            args=_args(wl),
            divisible_by=dict(wl.divisible_by),
            workload=wl.name,
            description=wl.description or "(no description)",
            test_shapes=wl.shape_set("test"),
            backend=backend,
            arch=arch,
        )
    )


DEFAULT_BUDGET = 50_000  # input tokens per call: far inside every current model's context
MAX_CARRIER_LINES = 60
MAX_RISKS = 3
MAX_TEXT = 240  # characters of one precondition reason or risk message


class PromptTooLarge(LLMError):
    """The rules and the current code alone exceed the token budget."""


def _clip(text: str, n: int = MAX_TEXT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def compact_card(skill: Skill) -> str:
    """A skill as a prompt needs it: intent, operator, the distinct preconditions it was mined
    under, the carrier (before/after sketch) and the first distinct failures seen (risks)."""
    pre: dict[tuple[str, bool], str] = {}
    for p in skill.preconditions:
        key = (str(p.get("name", "")), bool(p.get("holds", True)))
        pre.setdefault(
            key,
            f"{precondition_kind(p)}: {key[0]}{'' if key[1] else ' (did not hold)'}: "
            f"{_clip(p.get('reason', ''))}",
        )
    risks: dict[tuple[str, str], None] = {}
    for r in skill.risks:
        risks.setdefault((str(r.get("category", "")), _clip(r.get("message", ""))), None)
    carrier = skill.carrier.splitlines()
    if len(carrier) > MAX_CARRIER_LINES:
        carrier = carrier[:MAX_CARRIER_LINES] + [f"... ({len(carrier) - MAX_CARRIER_LINES} more lines)"]
    return (
        environment()
        .get_template("card.md.j2")
        .render(
            skill_id=skill.skill_id,
            operator=skill.operator,
            intent=" ".join(skill.intent.split()),
            preconditions=list(pre.values()),
            carrier="\n".join(carrier),
            risks=[f"{c}: {m}" for c, m in list(risks)[:MAX_RISKS]],
            more_risks=max(0, len(risks) - MAX_RISKS),
        )
    )


def skill_cards(skills: Sequence[Skill]) -> str:
    """The card block: the given skills' compact cards, in the order given (curriculum order)."""
    return environment().get_template("skills.md.j2").render(cards=[compact_card(s) for s in skills])


def task_prompt(req: ProposalRequest, feedback: str | None = None) -> str:
    skill = req.move.skill
    return (
        environment()
        .get_template("task.md.j2")
        .render(
            step_index=req.step_index,
            source=req.source.rstrip("\n"),
            feedback=req.feedback if feedback is None else feedback,
            skill_id=skill.skill_id if skill else "",
            intent=skill.intent if skill else "",
            sites=[f"line {s.line}: {s.summary}" for s in req.move.sites],
        )
    )


@dataclass
class Prompt:
    """System blocks as (text, cache) pairs, static first, and the messages; `cards` names the
    skills whose cards it carries, `tokens` its count (API or estimate) once fitted."""

    system: list[tuple[str, bool]]
    messages: list[dict[str, Any]]
    cards: list[str]
    tokens: int = 0


Counter = Callable[[list[tuple[str, bool]], list[dict[str, Any]]], int]


def _assemble(rules: str, cards: list[Skill], req: ProposalRequest, feedback: str) -> Prompt:
    system = [(rules, True)] + ([(skill_cards(cards), True)] if cards else [])
    messages = [{"role": "user", "content": [{"type": "text", "text": task_prompt(req, feedback)}]}]
    return Prompt(system, messages, [s.skill_id for s in cards])


def build_prompt(req: ProposalRequest, budget: int = DEFAULT_BUDGET) -> Prompt:
    """Rules, then the matching skills' cards, then the task, cut to `budget` estimated tokens."""
    rules = system_prompt(req.workload, req.backend)
    current = req.move.skill
    cards = list(req.skills)
    if current is not None and all(s.skill_id != current.skill_id for s in cards):
        cards.insert(0, current)

    def size(p: Prompt) -> int:
        return estimate_tokens(p.system, p.messages)

    prompt = _assemble(rules, cards, req, req.feedback)
    if size(prompt) <= budget:
        prompt.tokens = size(prompt)
        return prompt
    base = size(_assemble(rules, [], req, req.feedback))
    kept: list[Skill] = [current] if current is not None else []
    room = budget - base - (estimate_tokens([(skill_cards(kept), True)], []) if kept else 0)
    for s in cards:  # curriculum order: the longest prefix of cards that fits
        if current is not None and s.skill_id == current.skill_id:
            continue
        cost = estimate_tokens([(compact_card(s), False)], [])
        if cost > room:
            break
        kept.append(s)
        room -= cost
    kept = [s for s in cards if s in kept]  # back in curriculum order
    prompt = _assemble(rules, kept, req, req.feedback)
    over = size(prompt) - budget
    if over > 0 and req.feedback:  # the feedback's tail is dropped before the code is
        keep_chars = max(0, len(req.feedback) - 3 * over - 200)
        prompt = _assemble(
            rules, kept, req, req.feedback[:keep_chars] + "\n... (feedback cut to the token budget)"
        )
    if size(prompt) > budget:
        raise PromptTooLarge(
            f"the prompt needs about {size(prompt)} tokens with its rules and the current code alone, "
            f"over the budget of {budget}"
        )
    prompt.tokens = size(prompt)
    return prompt


def fit_prompt(req: ProposalRequest, budget: int = DEFAULT_BUDGET, count: Counter | None = None) -> Prompt:
    """`build_prompt` checked by `count` (the provider's token count): cut harder while over."""
    limit = budget
    for _ in range(4):
        prompt = build_prompt(req, limit)
        if count is None:
            return prompt
        prompt.tokens = count(prompt.system, prompt.messages)
        if prompt.tokens <= budget:
            return prompt
        limit = int(limit * budget / prompt.tokens * 0.95)
    raise PromptTooLarge(
        f"the prompt counts {prompt.tokens} tokens, over the budget of {budget}, after cutting"
    )
