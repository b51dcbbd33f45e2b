"""Stable in-page anchors. Every link the report writes goes through these functions, so the
link and its target can never disagree (the tests check that every `href="#x"` has an `id`)."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def slug(s: str) -> str:
    return _UNSAFE.sub("_", s) or "_"


def skill(skill_id: str) -> str:
    return f"skill-{slug(skill_id)}"


def workload(name: str) -> str:
    return f"wl-{slug(name)}"


def state(workload_name: str, state_hash: str) -> str:
    return f"state-{slug(workload_name)}-{slug(state_hash)}"


def step(step_id: str) -> str:
    return f"step-{slug(step_id)}"


def run(run_id: str) -> str:
    return f"run-{slug(run_id)}"
