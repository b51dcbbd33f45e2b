"""The skill tables (`skills`, `skill_evidence`): rows in and out as `Skill`s.

The columns and which of them hold JSON come from the Skill declaration (store/skill_record.py);
merging and extraction are klineage/skills.py's business, not the store's.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from klineage.store.db import Store
from klineage.store.skill_record import JSON_COLUMNS, SKILL_FIELDS, Skill

_STORE_ONLY = ("updated_at",)  # columns the store keeps beside a skill's own fields


def _from_row(row: dict[str, Any]) -> Skill:
    return Skill.from_dict(
        {k: v for k, v in row.items() if k not in _STORE_ONLY}, f"skills row {row.get('skill_id')}"
    )


def get_skill(store: Store, skill_id: str) -> Skill | None:
    rows = store.rows("SELECT * FROM skills WHERE skill_id = ?", [skill_id])
    return _from_row(rows[0]) if rows else None


def load_skills(store: Store) -> list[Skill]:
    """Every skill, by operator then id (the export's order)."""
    return [_from_row(r) for r in store.rows("SELECT * FROM skills ORDER BY operator, skill_id")]


def count_skills(store: Store) -> int:
    return int(store.scalar("SELECT count(*) FROM skills") or 0)


def put_skill(con: duckdb.DuckDBPyConnection, skill: Skill) -> None:
    """Write (or replace) one skill and link its evidence steps; inside the caller's transaction."""
    d = skill.to_dict()
    cols = ", ".join(SKILL_FIELDS)
    marks = ", ".join("?" for _ in SKILL_FIELDS)
    con.execute(
        f"INSERT OR REPLACE INTO skills ({cols}, updated_at) VALUES ({marks}, current_timestamp)",
        [json.dumps(d[f]) if f in JSON_COLUMNS else d[f] for f in SKILL_FIELDS],
    )
    for sid in skill.evidence.get("steps", []):
        con.execute("INSERT INTO skill_evidence VALUES (?, ?) ON CONFLICT DO NOTHING", [skill.skill_id, sid])


def set_verification(store: Store, skill: Skill) -> None:
    """Store a skill's verification and admission (a materialization kept it)."""
    with store.transaction() as con:
        con.execute(
            "UPDATE skills SET verification = ?, admitted = ?, updated_at = current_timestamp WHERE skill_id = ?",
            [json.dumps(skill.verification, default=str), skill.admitted, skill.skill_id],
        )
