"""A skill's fields, declared once (DESIGN.md, 'Walker, lineage, skills': the nine fields plus the
operator, provenance, admission and origin).

Everything else is derived from this declaration: the `skills` table's columns (store/schema.py),
the rows written and read (store/skills.py), the card's evidence block (cards.py) and the JSONL
export (export.py). A key that is not a field is an error, never silently dropped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from klineage.errors import KLineageError


class SkillFieldError(KLineageError):
    """A skill record with keys that are not skill fields."""


def _col(sql: str) -> dict[str, str]:
    return {"sql": sql}


@dataclass(frozen=True)
class Skill:
    """One skill. Frozen: derive a changed skill with `dataclasses.replace`."""

    skill_id: str = field(metadata=_col("VARCHAR PRIMARY KEY"))
    operator: str = field(metadata=_col("VARCHAR NOT NULL"))
    intent: str = field(metadata=_col("VARCHAR NOT NULL"))
    anchor: dict[str, Any] = field(default_factory=dict, metadata=_col("JSON"))
    carrier: str = field(default="", metadata=_col("VARCHAR"))
    preconditions: list[dict[str, Any]] = field(default_factory=list, metadata=_col("JSON"))
    effects: dict[str, Any] = field(default_factory=dict, metadata=_col("JSON"))
    evidence: dict[str, Any] = field(default_factory=dict, metadata=_col("JSON"))
    risks: list[dict[str, Any]] = field(default_factory=list, metadata=_col("JSON"))
    scope: dict[str, Any] = field(default_factory=dict, metadata=_col("JSON"))
    verification: dict[str, Any] = field(default_factory=dict, metadata=_col("JSON"))
    provenance: list[dict[str, Any]] = field(default_factory=list, metadata=_col("JSON"))
    admitted: bool = field(default=False, metadata=_col("BOOLEAN NOT NULL DEFAULT false"))
    origin: str = field(
        default="mined", metadata=_col("VARCHAR NOT NULL DEFAULT 'mined'")
    )  # mined | imported

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict[str, Any], where: str = "skill") -> Skill:
        """A skill from a record of its fields (None values take the field's default); any key
        that is not a field is refused, naming it."""
        unknown = sorted(set(record) - set(SKILL_FIELDS))
        if unknown:
            raise SkillFieldError(
                f"{where}: not skill fields: {', '.join(unknown)} (known: {', '.join(SKILL_FIELDS)})"
            )
        return cls(**{k: v for k, v in record.items() if v is not None})


#: the field names, in declaration order (the table's column order)
SKILL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Skill))
#: the fields stored as JSON columns
JSON_COLUMNS: frozenset[str] = frozenset(f.name for f in fields(Skill) if f.metadata["sql"] == "JSON")


def skills_table_ddl() -> str:
    """CREATE TABLE for `skills`: one column per field, then the store's own `updated_at`."""
    cols = [f"        {f.name} {f.metadata['sql']}," for f in fields(Skill)]
    return "\n".join(
        [
            "    CREATE TABLE IF NOT EXISTS skills (",
            *cols,
            "        updated_at TIMESTAMP DEFAULT current_timestamp",
            "    );",
        ]
    )
