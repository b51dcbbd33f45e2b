"""Skill cards: Markdown with YAML front matter in the published KLineage SKILL.md layout, and
its JSON form (the four front-matter keys plus `body`; a memory file is a JSON array of them).

The front matter holds exactly `skill_id`, `intent`, `preconditions` (each item prefixed by
Data types / Layout / Storage / Pipeline / Hardware) and `scope` {cases, languages, platforms},
so a card we export loads in their tooling; our richer fields travel in a fenced JSON block
under the extra heading `# KLineage Evidence`, which their tooling ignores.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from klineage.deopt.base import PRECONDITION_KINDS
from klineage.errors import KLineageError
from klineage.store.skill_record import SKILL_FIELDS, Skill

EVIDENCE_HEADING = "# KLineage Evidence"
_KIND_HINTS = (
    ("Data types", ("dtype", "float", "half", "bf16", "type", "precision", "int")),
    ("Storage", ("smem", "shared", "register", "read_only", "const", "restrict", "alias", "global")),
    ("Pipeline", ("async", "stage", "pipeline", "barrier", "sync", "order", "atomic")),
    ("Hardware", ("warp", "block", "sm_", "arch", "launch", "occupancy", "thread", "tensor_core")),
)


class CardError(KLineageError):
    """A card that cannot be read; the message names the file and what is wrong."""


def precondition_kind(p: dict[str, Any]) -> str:
    kind = p.get("kind") or ""
    if kind in PRECONDITION_KINDS:
        return kind
    name = p.get("name", "").lower()
    for k, hints in _KIND_HINTS:
        if any(h in name for h in hints):
            return k
    return "Layout"


def platform_string(arch: str = "sm_90a", cuda_major: str = "13") -> str:
    return f"nvidia-{arch.replace('_', '')}-cuda{cuda_major}"


def same_platform(a: str, b: str) -> bool:
    """Compare by architecture family: `nvidia-sm90a-cuda13` matches `nvidia-sm90-cuda13`."""

    def family(p: str) -> tuple[str, str]:
        m = re.match(r"(\w+)-sm(\d+)[a-z]?-cuda(\d+)", p)
        return (m.group(1), m.group(2)) if m else (p, "")

    return family(a) == family(b)


def _split_carrier(carrier: str) -> tuple[str, str]:
    before, after = [], []
    for line in carrier.splitlines():
        if line.startswith(("---", "+++", "@@")) or line.startswith("..."):
            if line.startswith("@@") and before:
                before.append("// ...")
                after.append("// ...")
            continue
        tag, body = line[:1], line[1:]
        if tag in (" ", "-"):
            before.append(body)
        if tag in (" ", "+"):
            after.append(body)
    return "\n".join(before).strip("\n"), "\n".join(after).strip("\n")


def general_preconditions(skill: Skill) -> list[str]:
    """The published convention: one line per kind (`Storage: ...`), each naming the general
    conditions the skill needs, once. The instance facts behind them (`launch at line 57
    passes distinct pointers`, one per site of every lineage step) stay in the evidence block.
    An imported card keeps its upstream lines as written."""
    held = [p for p in skill.preconditions if p.get("holds", True)]
    if skill.origin == "imported":
        return [
            f"{p['kind']}: {p.get('reason') or p.get('name')}"
            if p.get("kind")
            else str(p.get("reason") or p.get("name"))
            for p in held
        ]
    groups: dict[str, list[str]] = {}
    for p in held:
        text = " ".join(str(p.get("name", "")).replace("_", " ").split())
        if text and text not in groups.setdefault(precondition_kind(p), []):
            groups[precondition_kind(p)].append(text)
    order = [k for k in PRECONDITION_KINDS if k in groups] + sorted(
        k for k in groups if k not in PRECONDITION_KINDS
    )
    return [f"{k}: {'; '.join(groups[k])}" for k in order]


def front_matter(skill: Skill, platform: str) -> dict[str, Any]:
    pre = general_preconditions(skill)
    return {
        "skill_id": skill.skill_id,
        "intent": " ".join(skill.intent.split()),
        "preconditions": pre,
        "scope": {
            "cases": list(skill.scope.get("workloads", [])),
            "languages": ["cuda"],
            "platforms": [platform],
        },
    }


def card_body(skill: Skill) -> str:
    """The Markdown body: an imported card's own, verbatim (its Overview, Preconditions, Scope,
    Before/After and the prose between them); a mined skill's, written from the skill."""
    upstream = next((p.get("body") for p in skill.provenance if isinstance(p, dict) and p.get("body")), None)
    if skill.origin == "imported" and isinstance(upstream, str):
        return upstream.strip("\n") + "\n"
    before, after = _split_carrier(skill.carrier)
    example = next(iter(skill.provenance), {})
    effects = skill.effects.get("per_workload", {})
    lines = [
        "# Overview",
        "",
        skill.intent,
        "",
        f"Operator `{skill.operator}`; mined from {len(skill.provenance)} lineage step(s).",
        "",
        "## Example configuration",
        "",
        f"- workload: {example.get('workload', 'n/a')}",
        f"- dtypes: {', '.join(skill.scope.get('dtypes', [])) or 'n/a'}",
        f"- lineage depth from the naive end: {example.get('lineage_depth', 'n/a')}",
        "",
        "# Precondition",
        "",
        *([f"- {line}" for line in general_preconditions(skill)] or ["- none recorded"]),
        "",
        "(Each fact checked at each site is in the KLineage Evidence block.)",
        "",
        "# Scope",
        "",
        f"- cases: {', '.join(skill.scope.get('workloads', [])) or 'n/a'}",
        f"- platforms: {', '.join(skill.scope.get('platforms', [])) or 'n/a'}",
        f"- applied after: {', '.join(skill.scope.get('prior_skills', [])) or 'nothing'}",
        f"- effects: {json.dumps(_sorted_keys(effects), default=str)}",
        "",
        "# Code Change Snippet",
        "",
        "## Before",
        "",
        "```cuda",
        before,
        "```",
        "",
        "## After",
        "",
        "```cuda",
        after,
        "```",
        "",
    ]
    return "\n".join(lines)


def _sorted_keys(value: Any) -> Any:
    """Nested mappings with their keys sorted: a merged skill (resumed run, several lineages)
    builds the same dicts in another key order, and the card text must not depend on it."""
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    return value


#: the skill's fields beyond the front matter's, in declaration order: the evidence block's keys
EXTRA_FIELDS = tuple(f for f in SKILL_FIELDS if f not in ("skill_id", "intent"))


def _extras(skill: Skill) -> dict[str, Any]:
    d = skill.to_dict()
    return {k: _sorted_keys(d[k]) for k in EXTRA_FIELDS}


def to_markdown(skill: Skill, platform: str = platform_string()) -> str:
    fm = yaml.safe_dump(front_matter(skill, platform), sort_keys=False, allow_unicode=True, width=1000)
    extras = json.dumps(_extras(skill), indent=1, default=str)
    return f"---\n{fm}---\n\n{card_body(skill)}\n{EVIDENCE_HEADING}\n\n```json\n{extras}\n```\n"


def to_json(skill: Skill, platform: str = platform_string()) -> dict[str, Any]:
    return {**front_matter(skill, platform), "body": card_body(skill), "klineage": _extras(skill)}


_FM = re.compile(r"\A---\s*\n(.*?)\n---\s*\n(.*)\Z", re.S)


def _validate_front(front: Any, where: str) -> dict[str, Any]:
    if not isinstance(front, dict):
        raise CardError(f"{where}: front matter is not a mapping")
    missing = [k for k in ("skill_id", "intent", "preconditions", "scope") if k not in front]
    if missing:
        raise CardError(f"{where}: front matter lacks {', '.join(missing)}")
    if not isinstance(front["preconditions"], list):
        raise CardError(f"{where}: preconditions must be a list")
    return front


def _from_parts(front: dict[str, Any], body: str, extras: dict[str, Any] | None, where: str) -> Skill:
    front = _validate_front(front, where)
    if extras is not None and not isinstance(extras, dict):
        raise CardError(f"{where}: the evidence block is not a JSON object")
    if extras:
        unknown = sorted(set(extras) - set(EXTRA_FIELDS) - {"skill_id", "intent"})
        if unknown:
            raise CardError(
                f"{where}: the evidence block has keys that are not skill fields: {', '.join(unknown)}"
            )
        fields = {k: v for k, v in extras.items() if k in EXTRA_FIELDS}
        return Skill(
            **{
                "operator": "imported",
                **fields,
                "skill_id": str(front["skill_id"]),
                "intent": str(front["intent"]),
            }
        )
    pre = []
    for item in front["preconditions"]:
        text = str(item)
        kind, _, reason = text.partition(":")
        kind = kind.strip() if kind.strip() in PRECONDITION_KINDS else ""
        pre.append(
            {
                "name": re.sub(r"\W+", "_", (reason or text).strip().lower())[:48],
                "holds": True,
                "reason": (reason or text).strip(),
                "kind": kind,
            }
        )
    scope = front.get("scope") or {}
    before, after = _fenced_after(body, "Before", "After"), _fenced_after(body, "After", None)
    carrier = ""
    if before is not None and after is not None:
        carrier = "\n".join(
            [
                "--- before.cu",
                "+++ after.cu",
                *[f"-{ln}" for ln in before.rstrip("\n").splitlines()],
                *[f"+{ln}" for ln in after.rstrip("\n").splitlines()],
            ]
        )
    return Skill(
        skill_id=str(front["skill_id"]),
        operator="imported",
        intent=str(front["intent"]),
        carrier=carrier,
        preconditions=pre,
        scope={
            "workloads": list(scope.get("cases", [])),
            "platforms": list(scope.get("platforms", [])),
            "languages": list(scope.get("languages", [])),
        },
        verification={"status": "unverified", "source": where},
        provenance=[{"imported_from": where, "body": body}],
        origin="imported",
    )


def _fenced_after(body: str, heading: str, stop: str | None) -> str | None:
    """The first fenced code block under `## <heading>` (prose may stand between the heading and
    the fence), not looking past `## <stop>`."""
    m = re.search(rf"^##\s+{heading}\b[^\n]*\n", body, re.M)
    if not m:
        return None
    rest = body[m.end() :]
    if stop is not None:
        end = re.search(rf"^##\s+{stop}\b", rest, re.M)
        rest = rest[: end.start()] if end else rest
    fence = re.search(r"^```[^\n]*\n(.*?)^```", rest, re.S | re.M)
    return fence.group(1) if fence else None


def from_markdown(text: str, where: str = "<card>") -> Skill:
    m = _FM.match(text.lstrip("\ufeff"))
    if not m:
        raise CardError(f"{where}: no YAML front matter (a card starts with a '---' block)")
    try:
        front = yaml.safe_load(m.group(1))
    except yaml.YAMLError as e:
        raise CardError(f"{where}: front matter is not valid YAML ({str(e).splitlines()[0]})") from None
    body = m.group(2)
    extras = None
    if EVIDENCE_HEADING in body:
        body, _, tail = body.partition(EVIDENCE_HEADING)
        block = re.search(r"```json\n(.*?)\n```", tail, re.S)
        if block:
            try:
                extras = json.loads(block.group(1))
            except json.JSONDecodeError as e:
                raise CardError(f"{where}: the KLineage Evidence block is not valid JSON ({e.msg})") from None
    return _from_parts(front, body, extras, where)


def from_json(doc: Any, where: str = "<json>") -> list[Skill]:
    """A card object or a memory file (array of card objects)."""
    items = doc if isinstance(doc, list) else [doc]
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise CardError(f"{where}[{i}]: not a card object")
        out.append(
            _from_parts(
                {k: item.get(k) for k in ("skill_id", "intent", "preconditions", "scope") if k in item},
                str(item.get("body", "")),
                item.get("klineage"),
                f"{where}[{i}]",
            )
        )
    return out
