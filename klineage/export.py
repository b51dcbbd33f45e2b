"""The committed text form of the skill store (cards + JSONL) and importing cards written elsewhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

from klineage.cards import CardError, from_json, from_markdown, to_json, to_markdown
from klineage.errors import KLineageError
from klineage.skills import Skill, load_skills, upsert
from klineage.store.db import Store
from klineage.store.skill_record import SkillFieldError


def export_skills(db: Path | None, out_dir: Path, fmt: str = "md") -> Path:
    """md: out_dir/cards/<id>.md (stale cards removed) + out_dir/skills.jsonl; json: one memory file."""
    if fmt not in ("md", "json"):
        raise KLineageError(f"unknown export format '{fmt}' (known: md, json)")
    with Store(db, read_only=True) as store:
        skills = load_skills(store)
    out_dir.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path = out_dir / "skills_memory.json"
        path.write_text(json.dumps([to_json(s) for s in skills], indent=1, default=str) + "\n")
        return path
    cards = out_dir / "cards"
    cards.mkdir(exist_ok=True)
    keep = set()
    for s in skills:
        p = cards / f"{s.skill_id}.md"
        p.write_text(to_markdown(s))
        keep.add(p.name)
    for stale in cards.glob("*.md"):
        if stale.name not in keep:
            stale.unlink()
    jsonl = out_dir / "skills.jsonl"
    jsonl.write_text("".join(json.dumps(s.to_dict(), sort_keys=True, default=str) + "\n" for s in skills))
    return out_dir


def read_jsonl(path: Path) -> list[Skill]:
    """Skills from the committed JSONL export (one Skill.to_dict() per line, every field kept)."""
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise CardError(f"{path}:{i}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise CardError(f"{path}:{i}: not a skill object")
        try:
            out.append(Skill.from_dict(row, f"{path}:{i}"))
        except (SkillFieldError, TypeError) as e:
            raise CardError(str(e) if isinstance(e, SkillFieldError) else f"{path}:{i}: {e}") from None
    return out


def shipped_store(db: Path, export_dir: Path | None = None) -> Path:
    """`db` itself when it exists; otherwise, when the repository's text export exists, a store
    rebuilt from it at `db` (the DuckDB file is not committed; skills_db/skills.jsonl is)."""
    if db.exists():
        return db
    from klineage.paths import repo_root

    jsonl = (export_dir or repo_root() / "skills_db") / "skills.jsonl"
    if jsonl.is_file():
        skills = read_jsonl(jsonl)
        if skills:
            with Store(db) as store:
                upsert(store, skills)
    return db


def _shipped_paths() -> tuple[Path, Path | None]:
    """(the repository's skills export, the store it is built into under $KLINEAGE_HOME, or None
    without an export). One store per export content: an updated export is a new store."""
    import hashlib

    from klineage.paths import home, repo_root

    jsonl = repo_root() / "skills_db" / "skills.jsonl"
    if not jsonl.is_file():
        return jsonl, None
    digest = hashlib.sha256(jsonl.read_bytes()).hexdigest()[:16]
    return jsonl, home() / "shipped" / f"skills-{digest}.duckdb"


def reading_store(db: Path | None) -> Path | None:
    """The store a reading command (skills list/show, report) opens without --db: the default
    store when it exists, else the shipped store a `materialize` or `heldout` without --db built
    under $KLINEAGE_HOME (and recorded its admissions in), else the default (which says it is
    missing)."""
    if db is not None or os.environ.get("KLINEAGE_DB"):
        return db
    from klineage.store.db import default_db_path

    if default_db_path().exists():
        return db
    _, built = _shipped_paths()
    return built if built is not None and built.exists() else db


def shipped_store_in_home() -> tuple[Path | None, Path]:
    """(the repository's shipped skills built into a store under $KLINEAGE_HOME, or None when the
    export is missing, the export's path); a used one is reused."""
    jsonl, db = _shipped_paths()
    if db is None:
        return None, jsonl
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        staging = db.with_suffix(f".{os.getpid()}.tmp")
        staging.unlink(missing_ok=True)
        shipped_store(staging)
        if not staging.exists():
            return None, jsonl
        os.replace(staging, db)
    return db, jsonl


def read_cards(paths: list[Path]) -> list[Skill]:
    """Every card under the paths; the first unreadable one is an error naming it (nothing imported)."""
    skills: list[Skill] = []
    for p in paths:
        files = sorted(p.rglob("*.md")) + sorted(p.rglob("*.json")) if p.is_dir() else [p]
        if not p.exists():
            raise CardError(f"{p}: no such file or folder")
        for f in files:
            if f.suffix == ".jsonl":
                skills += read_jsonl(f)
                continue
            text = f.read_text(encoding="utf-8", errors="strict")
            if f.suffix == ".json":
                try:
                    skills += from_json(json.loads(text), str(f))
                except json.JSONDecodeError as e:
                    raise CardError(f"{f}:{e.lineno}: not valid JSON ({e.msg})") from None
            else:
                skills.append(from_markdown(text, str(f)))
    return skills


def import_skills(db: Path | None, paths: list[Path]) -> int:
    skills = read_cards(paths)
    with Store(db) as store:
        upsert(store, skills)
    return len(skills)
