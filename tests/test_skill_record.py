"""A skill's fields are declared once (klineage/store/skill_record.py): the table, the card's
evidence block and the JSONL export follow that declaration, and a key that is not a field is
refused wherever a skill is read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from klineage.cards import CardError, from_markdown, to_markdown
from klineage.export import export_skills, read_jsonl
from klineage.skills import upsert
from klineage.store.db import Store
from klineage.store.skill_record import SKILL_FIELDS, Skill, SkillFieldError
from tests.test_materialize_helpers import make_skill


def test_unknown_keys_are_refused_naming_them() -> None:
    d = make_skill("restrict").to_dict()
    assert Skill.from_dict(d) == make_skill("restrict")
    with pytest.raises(SkillFieldError, match="not skill fields: colour, weight"):
        Skill.from_dict({**d, "weight": 1, "colour": "red"})


def test_a_skill_is_frozen() -> None:
    s = make_skill("restrict")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.admitted = True  # type: ignore[misc]


def test_table_card_and_jsonl_follow_the_declaration(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        upsert(store, [make_skill("restrict")])
        cols = [
            r["column_name"]
            for r in store.rows(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'skills' ORDER BY ordinal_position"
            )
        ]
    assert cols == [*SKILL_FIELDS, "updated_at"]
    out = export_skills(db, tmp_path / "export")
    (line,) = (out / "skills.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)) == sorted(SKILL_FIELDS)
    card = (out / "cards" / "restrict-scale_test.md").read_text()
    block = json.loads(card.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert list(block) == [f for f in SKILL_FIELDS if f not in ("skill_id", "intent")]


def test_readers_refuse_unknown_keys(tmp_path: Path) -> None:
    d = make_skill("restrict").to_dict()
    jsonl = tmp_path / "skills.jsonl"
    jsonl.write_text(json.dumps(d) + "\n" + json.dumps({**d, "bogus": 1}) + "\n")
    with pytest.raises(CardError, match=r"skills.jsonl:2: not skill fields: bogus"):
        read_jsonl(jsonl)
    card = to_markdown(make_skill("restrict")).replace('"origin": "mined"', '"origin": "mined",\n "bogus": 1')
    with pytest.raises(
        CardError, match="card.md: the evidence block has keys that are not skill fields: bogus"
    ):
        from_markdown(card, "card.md")
