"""Collect the report's views from the store and render them through the package's jinja2
templates, with autoescaping on: kernel code and gate messages contain `<` and `&`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import jinja2

from klineage import __version__ as klineage_version
from klineage.errors import KLineageError
from klineage.report import anchors
from klineage.report.corpus import overview, workload_names, workload_view
from klineage.report.materialization import materialization_view, materialized_on
from klineage.report.skillview import LinkRef, skill_view
from klineage.skills import load_skills
from klineage.store.db import Store

TEMPLATES = Path(__file__).parent / "templates"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ms"] = lambda v: f"{v:.4f} ms" if isinstance(v, int | float) else "—"
    env.filters["x"] = lambda v: f"{v:.2f}×" if isinstance(v, int | float) else "—"
    env.filters["usd"] = lambda v: f"${v:.4f}" if isinstance(v, int | float) else "—"
    env.globals["a"] = anchors
    return env


def build_context(store: Store) -> dict[str, Any]:
    """Everything the template shows, gathered once from a read-only store."""
    skills = load_skills(store)
    skill_ids = {s.skill_id for s in skills}
    workloads = [workload_view(store, w, skill_ids) for w in workload_names(store)]
    workload_anchor = {w.name: f"#{w.anchor}" for w in workloads}
    step_workload = {a.step_id: w.name for w in workloads for s in w.states for a in s.attempts}
    step_workload |= {s.step_id: w.name for w in workloads for s in w.steps}
    mat = materialization_view(store, skill_ids, {w.name for w in workloads if w.states})
    tried = materialized_on(mat)
    views = [
        skill_view(
            s,
            step_workload,
            workload_anchor,
            [LinkRef(label, href, verdict) for href, label, verdict in tried.get(s.skill_id, [])],
        )
        for s in skills
    ]
    admitted = [s.skill_id for s in skills if s.admitted]
    pending = [s.skill_id for s in skills if not s.admitted]
    return {
        "db": str(store.path),
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": klineage_version,
        "schema": store.schema_version,
        "overview": overview(store, workloads, admitted, pending),
        "workloads": workloads,
        "skills": views,
        "mat": mat,
    }


def render_report(store: Store) -> str:
    return _env().get_template("report.html.j2").render(**build_context(store))


def write_report(db: str | Path | None, out: str | Path) -> Path:
    """Render the store at `db` (default: $KLINEAGE_DB or skills_db/skills.duckdb) into `out`."""
    out = Path(out)
    if out.is_dir():
        raise KLineageError(f"{out}: is a directory (give a file name, e.g. --out report.html)")
    with Store(db, read_only=True) as store:
        html = render_report(store)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
    except OSError as e:
        raise KLineageError(f"{out}: cannot write the report ({e.strerror})") from None
    return out
