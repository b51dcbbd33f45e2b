"""The `klineage` command line (DESIGN.md, 'CLI').

Exit codes: 0 success (gate: accepted), 1 the work ran and the answer is no (gate: rejected),
2 usage or bad input with one clear line and no traceback, 3 an LLM provider failed (retries
spent, request refused, unreadable replies; the run's row is closed with the reason). `--json` prints one JSON document on
stdout and nothing else there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from klineage.errors import KLineageError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Mine verified CUDA optimization skills from expert kernels and apply them to new ones.",
)
out = Console()
out.soft_wrap = not out.is_terminal  # piped to a file: whole lines, never wrapped at 80 columns
err = Console(stderr=True, soft_wrap=True)  # messages stay one line, whatever the width


def emit_json(doc: object, sort_keys: bool = False) -> None:
    sys.stdout.write(json.dumps(doc, indent=1, default=str, sort_keys=sort_keys) + "\n")


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Toolchains, GPU, torch, parsers, store and provider keys (present or not; never printed)."""
    from klineage.doctor import run_checks

    checks = run_checks()
    if as_json:
        emit_json([c.__dict__ for c in checks])
    else:
        table = Table(title="klineage doctor", show_lines=False)
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for c in checks:
            mark = "[green]ok[/]" if c.ok else ("[red]missing[/]" if c.required else "[yellow]absent[/]")
            table.add_row(c.name, mark, c.detail)
        out.print(table)
    if any(c.required and not c.ok for c in checks):
        raise typer.Exit(1)


@app.command("gate")
def gate_cmd(
    kernels: Annotated[list[Path], typer.Argument(help="Kernel .cu files to gate.")],
    workload: Annotated[
        Path | None,
        typer.Option("--workload", "-w", help="Workload folder (default: each kernel's own folder)."),
    ] = None,
    backend: Annotated[str, typer.Option(help="emu (CPU emulator) or cuda (GPU).")] = "emu",
    shape_set: Annotated[
        str, typer.Option("--shape-set", help="test, emu or bench (default: the backend's).")
    ] = "",
    arch: Annotated[str, typer.Option(help="nvcc target architecture.")] = "sm_90a",
    timeout: Annotated[
        float, typer.Option(help="Seconds allowed for each stage run in a child process.")
    ] = 120.0,
    sanitize: Annotated[
        bool, typer.Option(help="Address-sanitized (emu) or compute-sanitizer (cuda) run.")
    ] = False,
    ncu: Annotated[bool, typer.Option(help="cuda: Nsight Compute metrics.")] = False,
    energy: Annotated[bool, typer.Option(help="cuda: NVML energy per call.")] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Gate again even when a cached verdict exists.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Gate kernels: parse, compile, run, check against the workload's reference, profile."""
    from klineage.gates.backend import GateOptions
    from klineage.gates.backends import BACKENDS
    from klineage.gates.gate import gate, quick_answer, read_source

    if backend not in BACKENDS:
        raise KLineageError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
    if shape_set and shape_set not in ("test", "emu", "bench"):
        raise KLineageError(f"unknown shape set '{shape_set}' (known: test, emu, bench)")
    jobs = []
    for k in kernels:
        if not k.is_file():
            raise KLineageError(f"{k}: no such file")
        folder = workload or k.parent
        if not (folder / "workload.py").is_file():
            raise KLineageError(f"{folder}: no workload.py (give --workload DIR)")
        jobs.append((k, folder))
    options = GateOptions(
        backend=backend,
        shape_set=shape_set,
        arch=arch,
        timeout_s=timeout,
        sanitize=sanitize,
        ncu=ncu,
        energy=energy,
    )
    # cached verdicts first, without loading any workload (no torch: a cache hit answers at once);
    # every other workload is loaded, so checked, before anything is gated
    quick = (
        {}
        if no_cache
        else {i: quick_answer(read_source(k), folder, options) for i, (k, folder) in enumerate(jobs)}
    )
    loaded = {}
    if any(quick.get(i) is None for i in range(len(jobs))):
        from klineage.workload import load_workload

        loaded = {folder: load_workload(folder) for i, (_, folder) in enumerate(jobs) if quick.get(i) is None}
    results = []
    for i, (k, folder) in enumerate(jobs):
        r = quick.get(i)
        if r is None:
            with err.status(f"gating {k}", spinner="dots") if not as_json and err.is_terminal else _nullctx():
                r = gate(k, loaded[folder], options, use_cache=not no_cache)
        results.append((k, r))
        if not as_json:
            _print_result(k, r)
    if as_json:
        emit_json([{"kernel": str(k), **r.to_dict()} for k, r in results])  # a list, one kernel or many
    if not all(r.accepted for _, r in results):
        raise typer.Exit(1)


class _nullctx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _print_result(kernel: Path, r) -> None:  # noqa: ANN001 - GateResult, imported lazily
    from klineage.cli_quick import print_result

    print_result(out, kernel, r)


DbOption = Annotated[
    Path | None, typer.Option("--db", help="Skill store (default: $KLINEAGE_DB or skills_db/skills.duckdb).")
]
IncludeUnverifiedOption = Annotated[
    bool,
    typer.Option(
        "--include-unverified",
        help="Also offer skills whose every roundtrip failed (kept as evidence otherwise).",
    ),
]


@app.command()
def mine(
    dirs: Annotated[list[Path], typer.Argument(help="Workload folders, or folders of workload folders.")],
    db: DbOption = None,
    backend: Annotated[str, typer.Option(help="emu (CPU emulator) or cuda (GPU).")] = "emu",
    max_steps: Annotated[int, typer.Option("--max-steps", help="Backward steps per expert kernel.")] = 48,
    workers: Annotated[
        int, typer.Option(help="Candidates gated at once (ray: CPUs of the local instance).")
    ] = 2,
    roundtrip: Annotated[bool, typer.Option(help="Re-derive each accepted step forward.")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per gate stage.")] = 120.0,
    executor: Annotated[
        str, typer.Option(help="local (a pool here) or ray (one Ray task per gate run).")
    ] = "local",
    address: Annotated[
        str | None, typer.Option(help="Ray cluster to join (default: start a local instance).")
    ] = None,
    llm: Annotated[
        str | None, typer.Option("--llm", help="LLM provider for open-vocabulary removals (anthropic).")
    ] = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model for --llm.")] = None,
    llm_max_cost: Annotated[
        float | None, typer.Option("--llm-max-cost", help="Stop asking the LLM past this many USD.")
    ] = None,
    llm_attempts: Annotated[
        int, typer.Option("--llm-attempts", help="LLM proposals per step when no rule passes.")
    ] = 2,
    llm_timeout: Annotated[
        float | None,
        typer.Option("--llm-timeout", help="Seconds of silence allowed per LLM attempt (default 60)."),
    ] = None,
    beam: Annotated[
        int,
        typer.Option(
            "--beam",
            help="States kept per depth: 1 walks greedily, N > 1 is a beam search "
            "whose lineage is a DAG (alternative orders).",
        ),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Walk each expert kernel backward, gate every simplification, store lineages and skills."""
    from klineage.executor import EXECUTORS
    from klineage.mining import mine_corpus

    if backend not in ("emu", "cuda"):
        raise KLineageError(f"unknown backend '{backend}' (known: emu, cuda)")
    if max_steps < 0 or workers < 1:
        raise KLineageError("--max-steps must be >= 0 and --workers >= 1")
    if executor not in EXECUTORS:
        raise KLineageError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    if address and executor != "ray":
        raise KLineageError("--address is for --executor ray")
    import contextlib

    # Ray prints its workers' deaths on stdout; with --json, stdout holds the one document only.
    quiet = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    with quiet:
        report = mine_corpus(
            dirs,
            db=db,
            backend=backend,
            max_steps=max_steps,
            workers=workers,
            roundtrip=roundtrip,
            timeout_s=timeout,
            console=None if as_json else err,
            executor=executor,
            address=address,
            llm=llm,
            llm_model=llm_model,
            llm_max_cost=llm_max_cost,
            llm_attempts=llm_attempts,
            beam=beam,
            llm_timeout_s=llm_timeout,
        )
    if as_json:
        emit_json(report)
    else:
        _print_mining(report)
    if report["workloads"] and all(w["skipped"] for w in report["workloads"]):
        raise KLineageError("nothing could be mined: every expert kernel failed its own gate")


def _print_mining(report: dict) -> None:
    table = Table(title=f"mined into {report['db']}")
    for col in (
        "workload",
        "states",
        "accepted",
        "rejected",
        "refused",
        "gate runs (cached)",
        "time s",
        "note",
    ):
        table.add_column(col)
    for w in report["workloads"]:
        table.add_row(
            w["workload"],
            str(w["states"]),
            str(w["accepted"]),
            str(w["rejected"]),
            str(w["refused"]),
            f"{w['gate_runs']} ({w['cached_gates']})",
            f"{w['elapsed_s']:.1f}",
            w["skipped"][:60],
        )
    out.print(table)
    out.print(f"skills in store: {report['skills']}; total time {report['elapsed_s']:.1f} s", highlight=False)


skills_app = typer.Typer(help="List, show, export and import skills.", no_args_is_help=True)
app.add_typer(skills_app, name="skills")


@skills_app.command("list")
def skills_list(db: DbOption = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The skills in the store."""
    from klineage.export import reading_store
    from klineage.skills import load_skills, roundtrip_failed
    from klineage.store.db import Store

    with Store(reading_store(db), read_only=True) as store:
        skills = load_skills(store)
    if as_json:
        emit_json([s.to_dict() for s in skills], sort_keys=True)  # byte-identical whatever the merge order
        return
    table = Table(title=f"{len(skills)} skills")
    for col in (
        "skill",
        "category",
        "workloads",
        "roundtrip",
        "effect (GPU speedup, else resources)",
        "admitted",
    ):
        table.add_column(col, overflow="fold")
    from klineage.deopt.registry import get_operator

    for s in skills:
        try:
            category = get_operator(s.operator).category
        except KLineageError:
            category = s.origin
        rts = [r.get("ok") for r in s.verification.get("roundtrips", [])]
        eff = "; ".join(f"{w}: {_effect(e)}" for w, e in s.effects.get("per_workload", {}).items())
        table.add_row(
            s.skill_id,
            category,
            ", ".join(s.scope.get("workloads", [])),
            f"{sum(bool(r) for r in rts)}/{len(rts)}"
            + (" failed: evidence, not offered" if roundtrip_failed(s) else ""),
            eff[:80],
            "yes" if s.admitted else "no",
        )
    out.print(table)
    held = sum(roundtrip_failed(s) for s in skills)
    if held:
        out.print(
            f"{held} skill(s) whose every roundtrip failed are kept as evidence: the materializer does not offer "
            "them unless given --include-unverified",
            highlight=False,
        )
    if skills and not any(s.admitted for s in skills):
        from klineage.admission import ADMISSIONS_NOTE

        out.print(ADMISSIONS_NOTE.format(db=store.path), highlight=False)


def _effect(e: dict) -> str:
    ratio = e.get("time_ratio")
    return f"{ratio:.2f}x" if isinstance(ratio, int | float) else _nonzero(e.get("resources"))


def _nonzero(res: object) -> str:
    if not isinstance(res, dict):
        return str(res)
    return ", ".join(f"{k} {v:+d}" for k, v in res.items() if v) or "no change"


@skills_app.command("show")
def skills_show(
    skill_id: str, db: DbOption = None, as_json: Annotated[bool, typer.Option("--json")] = False
) -> None:
    """One skill: its card, with evidence."""
    from klineage.cards import to_markdown
    from klineage.export import reading_store
    from klineage.skills import load_skills
    from klineage.store.db import Store

    with Store(reading_store(db), read_only=True) as store:
        found = [s for s in load_skills(store) if s.skill_id == skill_id]
    if not found:
        raise KLineageError(f"no skill '{skill_id}' in the store")
    if as_json:
        emit_json(found[0].to_dict(), sort_keys=True)
    else:
        sys.stdout.write(to_markdown(found[0]))


@skills_app.command("export")
def skills_export(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for cards/ and skills.jsonl.")] = Path(
        "skills_db"
    ),
    db: DbOption = None,
    fmt: Annotated[str, typer.Option("--format", help="md (cards + JSONL), json (a memory file).")] = "md",
) -> None:
    """Write the reviewable text form of the store: Markdown cards and JSONL (or one JSON memory file)."""
    from klineage.export import export_skills

    with_paths = export_skills(db, out_dir, fmt)
    out.print(f"wrote {with_paths}", highlight=False)


@skills_app.command("import")
def skills_import(
    paths: Annotated[list[Path], typer.Argument(help="SKILL.md cards, card folders, or JSON memory files.")],
    db: DbOption = None,
) -> None:
    """Import cards written elsewhere; they are marked unverified until they pass our gate."""
    from klineage.export import import_skills

    n = import_skills(db, paths)
    out.print(f"imported {n} skill(s)", highlight=False)


@app.command()
def report(
    db: DbOption = None,
    output: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
) -> None:
    """One self-contained HTML page: lineages drawn, skill cards with evidence, materialization traces."""
    from klineage.export import reading_store
    from klineage.report import write_report

    path = write_report(reading_store(db), output)
    out.print(f"wrote {path.resolve()}", highlight=False)


@skills_app.command("verify")
def skills_verify(
    skill_id: str,
    workload: Annotated[Path, typer.Option("--workload", help="Workload folder to apply the skill on.")],
    start: Annotated[
        Path | None, typer.Option(help="Start kernel (default: the workload's naive.cu).")
    ] = None,
    provider: Annotated[str, typer.Option(help="offline (rule operators) or anthropic.")] = "offline",
    budget: Annotated[int, typer.Option(help="Gated candidates allowed.")] = 3,
    backend: Annotated[str, typer.Option(help="emu or cuda.")] = "emu",
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Apply one skill to a workload under the gate; kept -> verified (and admitted when the workload is
    not one it was mined from). Exit 1 when it could not be applied with effect."""
    from klineage.admission import record_admissions
    from klineage.gates.backend import GateOptions
    from klineage.gates.gate import read_source
    from klineage.materialize.command import MaterializeArgs, build_provider
    from klineage.materialize.loop import MaterializeOptions, materialize
    from klineage.skills import load_skills
    from klineage.store.db import Store
    from klineage.workload import load_workload

    wl = load_workload(workload)
    start_file = start or workload / "naive.cu"
    text = read_source(start_file)
    with Store(db) as store:
        found = [s for s in load_skills(store) if s.skill_id == skill_id]
        if not found:
            raise KLineageError(f"no skill '{skill_id}' in the store")
        args = MaterializeArgs(workload, provider=provider, budget=budget, backend=backend)
        opts = MaterializeOptions(backend=backend, store=store, gate_options=GateOptions(backend=backend))
        res = materialize(wl, text, found, build_provider(args), budget, opts)
        admitted = record_admissions(store, res)
    kept = [s for s in res.steps if s.kept and s.skill_id == skill_id]
    doc = {
        "skill": skill_id,
        "workload": wl.name,
        "verified": bool(kept),
        "admitted": skill_id in admitted,
        "steps": [{"verdict": s.verdict, "reason": s.reason, "category": s.category} for s in res.steps],
    }
    if as_json:
        emit_json(doc)
    else:
        word = "verified" if kept else "not verified"
        out.print(
            f"{skill_id} on {wl.name}: {word}"
            + (" and admitted" if doc["admitted"] else "")
            + (f" ({kept[0].reason})" if kept else f" ({res.stop_reason})"),
            highlight=False,
        )
    if not kept:
        raise typer.Exit(1)


deopt_app = typer.Typer(help="The de-optimization operators.", no_args_is_help=True)
app.add_typer(deopt_app, name="deopt")


@deopt_app.command("list")
def deopt_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every rule operator in the soft removal order: category, mechanical forward step, intent."""
    from klineage.deopt.registry import operators

    ops = [op.describe() for op in operators()]
    if as_json:
        emit_json(ops)
        return
    table = Table(title=f"{len(ops)} rule operators (removal order)")
    for col in ("operator", "category", "apply", "intent"):
        table.add_column(col, overflow="fold")
    for o in ops:
        table.add_row(o["name"], o["category"], "yes" if o["apply"] else "no", o["intent"])
    out.print(table)


@deopt_app.command("sites")
def deopt_sites(
    kernel: Annotated[Path, typer.Argument(help="A CUDA file.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Where each operator finds its optimization (backward sites) or could add it (forward sites)."""
    from klineage.deopt.registry import operators
    from klineage.source.model import CudaSource

    src = CudaSource.from_file(kernel)
    rows = []
    for op in operators():
        for direction, finder in (("present", op.find), ("could apply", op.find_forward)):
            try:
                sites = finder(src)
            except Exception as e:  # an operator's bug is reported, not fatal
                rows.append(
                    {"operator": op.name, "direction": direction, "error": f"{type(e).__name__}: {e}"}
                )
                continue
            rows += [
                {
                    "operator": op.name,
                    "direction": direction,
                    "line": s.line,
                    "summary": s.summary,
                    "anchor": str(s.anchor),
                }
                for s in sites
            ]
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"operator sites in {kernel}")
    for col in ("operator", "where", "line", "site", "anchor"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["operator"],
            r["direction"],
            str(r.get("line", "")),
            r.get("summary", r.get("error", "")),
            r.get("anchor", ""),
        )
    out.print(table)


@app.command()
def lineage(
    workload: Annotated[str, typer.Argument(help="Workload name.")],
    db: DbOption = None,
    fmt: Annotated[str, typer.Option("--format", help="json, dot or png.")] = "json",
    output: Annotated[Path | None, typer.Option("--out", help="File to write (png needs one).")] = None,
) -> None:
    """The lineage graph of a workload, from the simplest state to the expert."""
    from klineage import lineage as lin
    from klineage.store.db import Store

    if fmt not in ("json", "dot", "png"):
        raise KLineageError(f"unknown format '{fmt}' (known: json, dot, png)")
    with Store(db, read_only=True) as store:
        g = lin.build(store, workload)
    if fmt == "png":
        path = output or Path(f"{workload}-lineage.png")
        lin.to_png(g, path)
        out.print(f"wrote {path}", highlight=False)
        return
    text = lin.dump(g, fmt)
    if output:
        output.write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


timings_app = typer.Typer(
    help="GPU times of lineage states, measured apart, as the effects of CPU-mined skills.",
    no_args_is_help=True,
)
app.add_typer(timings_app, name="timings")


@timings_app.command("export")
def timings_export(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for WORKLOAD/HASH.cu and index.json.")],
    db: DbOption = None,
    only: Annotated[str, typer.Option("--only", help="Comma-separated workloads (default: all).")] = "",
    untimed: Annotated[
        bool,
        typer.Option("--untimed", help="Only states without an imported GPU time, deepest (roots) first."),
    ] = False,
) -> None:
    """Write every lineage state for `klineage timings bench --extra` (timed on a GPU)."""
    from klineage.store.db import Store
    from klineage.timings import export_states

    with Store(db, read_only=True) as store:
        index = export_states(store, out_dir, [w for w in only.split(",") if w] or None, untimed=untimed)
    n = sum(len(v) for v in index["files"].values())
    out.print(
        f"wrote {n} states of {len(index['files'])} workloads and {out_dir / 'index.json'}", highlight=False
    )


@timings_app.command("import")
def timings_import(
    bench_json: Annotated[
        list[Path],
        typer.Argument(help="materialized_bench.json files of `klineage timings bench --extra INDEX` runs."),
    ],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Store the measured state times and extract the skills of those workloads again."""
    from dataclasses import asdict

    from klineage.store.db import Store
    from klineage.timings import import_timings

    with Store(db) as store:
        rep = import_timings(store, bench_json)
    if as_json:
        emit_json(asdict(rep))
        return
    out.print(
        f"{rep.device} ({rep.measured_at}): {sum(rep.imported.values())} kernel times of "
        f"{len(rep.imported)} workloads imported; {rep.not_states} other kernels and {rep.not_ok} not ok skipped; "
        f"skills of {len(rep.refreshed)} workloads extracted again",
        highlight=False,
    )
    for name, why in rep.not_refreshed.items():
        out.print(f"  {name}: skills not refreshed: {why}", highlight=False)


@timings_app.command("coverage")
def timings_coverage(
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
    only: Annotated[
        str | None, typer.Option(help="Comma-separated workloads (default: every one with a lineage).")
    ] = None,
) -> None:
    """Per workload, from imported times: naive, root, expert and torch, and the lineage coverage;
    then the mean coverage over the workloads shown (uncapped and capped at 1.0)."""
    from klineage import lineage as lin
    from klineage.store.db import Store
    from klineage.store.lineage import state_workloads

    with Store(db, read_only=True) as store:
        names = state_workloads(store)
        wanted = [w.strip() for w in only.split(",") if w.strip()] if only else names
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise KLineageError(f"--only: no lineage for {', '.join(unknown)} in this store")
        rows = [{"workload": n, **lin.build(store, n).graph.get("timing", {})} for n in wanted]
    if as_json:
        emit_json(rows)
        return
    table = Table(title="lineage coverage: ln(t_root/t_expert) / ln(t_naive/t_expert), imported GPU times")
    for col in (
        "workload",
        "naive ms",
        "root ms",
        "expert ms",
        "torch ms",
        "root x naive",
        "coverage",
        "device",
    ):
        table.add_column(col, justify="left" if col in ("workload", "device") else "right")

    def ms(v: object) -> str:
        return f"{v:.4f}" if isinstance(v, int | float) else "-"

    for r in rows:
        x = r["naive_ms"] / r["root_ms"] if r.get("root_ms") and r.get("naive_ms") else None
        table.add_row(
            r["workload"],
            ms(r.get("naive_ms")),
            ms(r.get("root_ms")),
            ms(r.get("expert_ms")),
            ms(r.get("torch_ms")),
            f"{x:.2f}" if x else "-",
            f"{r['coverage']:.2f}" if r.get("coverage") is not None else "-",
            r.get("device", "untimed"),
        )
    out.print(table)
    means = lin.mean_coverage([r.get("coverage") for r in rows])
    undefined = [r["workload"] for r in rows if r.get("coverage") is None]
    if means is not None:
        out.print(
            f"mean coverage over {len(rows) - len(undefined)} workloads: {means[0]:.3f} "
            f"({means[1]:.3f} with each capped at 1.0)"
            + (f"; undefined for {', '.join(undefined)}" if undefined else ""),
            highlight=False,
        )


@timings_app.command("bench")
def timings_bench(
    suite: Annotated[
        str, typer.Option(help="heldout or corpus: the folders of this repository to time.")
    ] = "heldout",
    workload: Annotated[
        list[Path] | None,
        typer.Option(
            "--workload", metavar="DIR", help="A workload folder anywhere (repeatable): replaces the suite's."
        ),
    ] = None,
    kernel: Annotated[
        list[str] | None,
        typer.Option(
            metavar="[LABEL=]FILE",
            help="A kernel file to time for the one --workload (repeatable; LABEL: the file's stem).",
        ),
    ] = None,
    only: Annotated[
        str, typer.Option(help="Comma-separated workloads (default: every folder with naive.cu).")
    ] = "",
    runs: Annotated[
        list[str] | None,
        typer.Option(
            "--run", metavar="LABEL=PATTERN", help="A materializer run: LABEL and a path pattern with {name}."
        ),
    ] = None,
    curve: Annotated[
        Path | None,
        typer.Option(
            metavar="INDEX_JSON",
            help="The budget index of materialize_bench.py (OUT/curve.json): time every budget point.",
        ),
    ] = None,
    extra: Annotated[
        Path | None,
        typer.Option(
            metavar="INDEX_JSON",
            help="More kernels to check and time, in no table: `klineage timings export`'s index.json "
            "(`klineage timings import` reads the JSON back).",
        ),
    ] = None,
    labels: Annotated[
        str, typer.Option(help="With --curve: comma list of labels to time (default: all).")
    ] = "",
    ks: Annotated[
        str, typer.Option(help="With --curve: comma list of budgets to time (default: 1..budget).")
    ] = "",
    budget_s: Annotated[
        float, typer.Option("--budget-s", help="Timing budget per kernel / torch call (s).")
    ] = 1.0,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Folder for materialized_bench.log and .json.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the distinct kernels per workload and stop.")
    ] = False,
    deadline_s: Annotated[
        float | None,
        typer.Option(
            "--deadline-s",
            help="After this many seconds from the start, time nothing more (those kernels: 'not timed'); "
            "the tables are still printed.",
        ),
    ] = None,
) -> None:
    """Check and time kernels made anywhere on the GPU, in one process, beside naive and torch
    (exit 1 when a run's kernel fails its check; without a GPU, one line and exit 2)."""
    from klineage.timing_bench import BenchOptions, run_bench

    opts = BenchOptions(
        suite=suite,
        workloads=tuple(workload or ()),
        kernels=tuple(kernel or ()),
        only=only,
        runs=tuple(runs or ()),
        curve=curve,
        extra=extra,
        labels=labels,
        ks=ks,
        budget_s=budget_s,
        out=out_dir,
        dry_run=dry_run,
        deadline_s=deadline_s,
    )
    code = run_bench(opts)
    if code:
        raise typer.Exit(code)


import_app = typer.Typer(
    help="Take workloads and kernels from KernelBench and FlashInfer-Bench.", no_args_is_help=True
)
export_app = typer.Typer(
    help="Give kernels back as KernelBench or FlashInfer-Bench solutions.", no_args_is_help=True
)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")


@import_app.command("kernelbench")
def import_kernelbench(
    problem: Annotated[
        Path | None, typer.Argument(help="A KernelBench problem file (Model, get_inputs, get_init_inputs).")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Workload folder to write (with --suite: a folder of them).")
    ] = None,
    solution: Annotated[
        Path | None, typer.Option(help="A KernelBench solution (ModelNew + load_inline) to wrap.")
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="Torch's default tolerances instead of KernelBench's 1e-2.")
    ] = False,
    suite: Annotated[
        Path | None,
        typer.Option("--suite", help="A level folder (level1/): import every problem, print a table."),
    ] = None,
    emu_size: Annotated[
        int, typer.Option("--emu-size", min=1, help="Largest size constant on the emu shapes.")
    ] = 16,
    test_size: Annotated[
        int, typer.Option("--test-size", min=1, help="Largest size constant on the test shapes.")
    ] = 64,
) -> None:
    """A KernelBench problem as a workload folder (sizes scaled for the CPU, the problem's own kept as
    bench); its solution (if given) as solution.cu there. --suite: every problem of a level."""
    from klineage.errors import WorkloadError
    from klineage.interop.kernelbench import Scale, import_problem

    scale = Scale(emu_size, test_size)
    if out_dir is None:
        raise WorkloadError("give --out: the workload folder to write")
    if suite is not None:
        from klineage.interop.suite import import_kernelbench_suite, print_table

        rows = import_kernelbench_suite(suite, out_dir, strict=strict, scale=scale)
        print_table(rows, f"KernelBench {suite.name}", out)
        return
    if problem is None:
        raise WorkloadError("give a problem file or --suite LEVEL_DIR")
    wl = import_problem(problem, out_dir, strict=strict, scale=scale, solution=solution)
    out.print(f"workload {wl.name} -> {out_dir / 'workload.py'}", highlight=False)
    if solution is not None:
        out.print(
            f"solution -> {out_dir / 'solution.cu'}" + (f" ({wl.verdict_note})" if wl.verdict_note else ""),
            highlight=False,
        )


@import_app.command("flashinfer")
def import_flashinfer(
    definition: Annotated[Path | None, typer.Argument(help="A FlashInfer-Bench definition JSON.")] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Workload folder to write (with --suite: a folder of them).")
    ] = None,
    workloads: Annotated[Path | None, typer.Option(help="Its workloads JSONL (FlashInfer-Trace).")] = None,
    solution: Annotated[
        Path | None, typer.Option(help="A Solution JSON whose kernel.cu follows our launcher.")
    ] = None,
    suite: Annotated[
        Path | None,
        typer.Option(
            "--suite", help="A FlashInfer-Trace dataset folder: import every definition, print a table."
        ),
    ] = None,
) -> None:
    """A FlashInfer-Bench definition (+ workloads) as a workload folder; --suite: every definition of a dataset."""
    from klineage.errors import WorkloadError
    from klineage.interop.flashinfer import import_definition, kernel_from_solution

    if out_dir is None:
        raise WorkloadError("give --out: the workload folder to write")
    if suite is not None:
        from klineage.interop.suite import import_flashinfer_suite, print_table

        print_table(import_flashinfer_suite(suite, out_dir), f"FlashInfer-Trace {suite.name}", out)
        return
    if definition is None:
        raise WorkloadError("give a definition JSON or --suite DATASET_DIR")
    defs = next((p for p in definition.parents if p.name == "definitions"), None)
    if workloads is None and defs is not None:  # a dataset: definitions/[op/]N.json, workloads/[op/]N.jsonl
        guess = defs.parent / "workloads" / definition.relative_to(defs).with_suffix(".jsonl")
        workloads = guess if guess.exists() else None
    kernel = (
        kernel_from_solution(solution) if solution is not None else None
    )  # refused before anything is written
    wl = import_definition(definition, out_dir, workloads)
    out.print(f"workload {wl.name} -> {out_dir / 'workload.py'}", highlight=False)
    if kernel is not None:
        (out_dir / "solution.cu").write_text(kernel)
        out.print(f"solution -> {out_dir / 'solution.cu'}", highlight=False)


@export_app.command("kernelbench")
def export_kernelbench(
    kernel: Annotated[Path, typer.Argument(help="A kernel of an imported KernelBench workload.")],
    workload: Annotated[Path, typer.Option("--workload", help="The workload folder (holds problem.py).")],
    output: Annotated[Path, typer.Option("--out", help="ModelNew.py to write.")],
) -> None:
    """A KernelBench solution file (ModelNew + load_inline) that KernelBench's evaluator loads."""
    from klineage.gates.gate import read_source
    from klineage.interop.solution import export_model_new
    from klineage.workload import load_workload

    text = export_model_new(read_source(kernel), load_workload(workload), workload / "problem.py")
    output.write_text(text)
    out.print(f"wrote {output}", highlight=False)


@export_app.command("flashinfer")
def export_flashinfer(
    kernel: Annotated[Path, typer.Argument(help="A kernel following the workload's launcher.")],
    workload: Annotated[Path, typer.Option("--workload", help="The workload folder.")],
    output: Annotated[Path, typer.Option("--out", help="Solution JSON to write.")],
    author: Annotated[str, typer.Option(help="Solution author.")] = "klineage",
) -> None:
    """A FlashInfer-Bench Solution JSON (language cuda, entry point, sources)."""
    from klineage.gates.gate import read_source
    from klineage.interop.flashinfer import export_solution
    from klineage.workload import load_workload

    doc = export_solution(read_source(kernel), load_workload(workload), kernel.stem, author)
    output.write_text(json.dumps(doc, indent=2) + "\n")
    out.print(f"wrote {output}", highlight=False)


@app.command("materialize")
def materialize_cmd(
    workload_dir: Annotated[
        Path, typer.Argument(help="Workload folder (workload.py; naive.cu is the default start).")
    ],
    start: Annotated[
        Path | None, typer.Option("--start", help="Start kernel (default: WORKLOAD_DIR/naive.cu).")
    ] = None,
    budget: Annotated[int, typer.Option("--budget", help="Gated candidates at most.")] = 10,
    provider: Annotated[
        str, typer.Option("--provider", help="offline (operators' apply) or anthropic.")
    ] = "offline",
    skills: Annotated[
        str, typer.Option("--skills", help="all (the store's skills) or none (baseline).")
    ] = "all",
    order: Annotated[
        str, typer.Option("--order", help="curriculum or random (seeded baseline).")
    ] = "curriculum",
    seed: Annotated[int, typer.Option("--seed", help="Seed of --order random.")] = 0,
    backend: Annotated[str, typer.Option(help="emu (CPU emulator) or cuda (GPU, timed).")] = "emu",
    db: DbOption = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default: materialized/WORKLOAD/RUN).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="LLM model (anthropic).")] = None,
    max_cost: Annotated[
        float | None, typer.Option("--max-cost", help="Stop once this many USD are spent.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="API base URL (default: $ANTHROPIC_BASE_URL).")
    ] = None,
    llm_timeout: Annotated[
        float | None,
        typer.Option("--llm-timeout", help="Seconds of silence allowed per LLM attempt (default 60)."),
    ] = None,
    ncu: Annotated[bool, typer.Option(help="cuda: Nsight Compute metrics for each candidate.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per gate stage.")] = 120.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
    measured: Annotated[
        list[Path] | None,
        typer.Option(
            "--measured",
            help="emu: GPU times of kernels (`klineage timings bench` JSON, repeatable) for the "
            "judge: faster by more than the spread, and alternative skills gated side by side.",
        ),
    ] = None,
    include_unverified: IncludeUnverifiedOption = False,
    explore: Annotated[
        bool,
        typer.Option(
            "--explore",
            help="After the skills run out, try every operator's forward step (no skill needed); "
            "reported apart from the skills' steps.",
        ),
    ] = False,
) -> None:
    """Apply mined skills to a workload's kernel in curriculum order, each candidate gated, within a budget."""
    from klineage.materialize.command import MaterializeArgs, run

    args = MaterializeArgs(
        workload_dir,
        start,
        budget,
        provider,
        skills,
        order,
        seed,
        backend,
        db,
        out_dir,
        model,
        max_cost,
        base_url,
        ncu,
        timeout,
        as_json,
        measured or None,
        llm_timeout,
        include_unverified,
        explore,
    )
    rc = run(args, out, err)
    if rc:
        raise typer.Exit(rc)


@app.command("heldout")
def heldout_cmd(
    provider: Annotated[
        str, typer.Option("--provider", help="offline (operators' apply) or anthropic.")
    ] = "offline",
    backend: Annotated[
        str, typer.Option(help="emu (CPU: static effect) or cuda (GPU: speedup over naive).")
    ] = "emu",
    budget: Annotated[int, typer.Option("--budget", help="Gated candidates at most, per instance.")] = 10,
    skills: Annotated[
        str, typer.Option("--skills", help="all (the store's skills) or none (baseline).")
    ] = "all",
    order: Annotated[
        str, typer.Option("--order", help="curriculum or random (seeded baseline).")
    ] = "curriculum",
    seed: Annotated[int, typer.Option("--seed", help="Seed of --order random.")] = 0,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only this instance (repeatable).")
    ] = None,
    db: DbOption = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default: materialized/heldout-TIME).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per gate stage.")] = 120.0,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            min=1,
            help="Instances materialized at once (builds run in parallel; GPU runs still take turns).",
        ),
    ] = 1,
    include_unverified: IncludeUnverifiedOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Materialize every held-out instance with the shipped skills; gate, speedup and copy check (exit 1 below the bar)."""
    from klineage.heldout import print_report, run_heldout
    from klineage.materialize.command import MaterializeArgs, build_provider, open_skills
    from klineage.materialize.command import _check as check_args  # the same input checks as `materialize`

    args = MaterializeArgs(
        Path("heldout"),
        budget=budget,
        provider=provider,
        skills=skills,
        order=order,
        seed=seed,
        backend=backend,
        db=db,
        out=out_dir,
        timeout_s=timeout,
        as_json=as_json,
    )
    check_args(args)
    build_provider(args)  # a missing API key stops here, before any gating
    store, skill_list = open_skills(args, err)  # says where a store it built is
    try:
        rep = run_heldout(
            skill_list,
            lambda: build_provider(args),
            backend=backend,
            budget=budget,
            skills_mode=skills,
            order=order,
            seed=seed,
            names=only,
            out_dir=out_dir,
            store=store,
            timeout_s=timeout,
            jobs=jobs,
            include_unverified=include_unverified,
            progress=None if as_json else lambda r: err.print(r.progress_line(), highlight=False),
        )
    finally:
        store.close()
    if as_json:
        emit_json(rep.to_dict())
    else:
        print_report(rep, out)
    failed = [r.name for r in rep.instances if r.status == "provider_failed"]
    if failed:
        from klineage.llm.base import EXIT_PROVIDER_FAILED

        err.print(f"error: the LLM provider failed on {', '.join(failed)}", highlight=False, markup=False)
        raise typer.Exit(EXIT_PROVIDER_FAILED)
    if rep.failures():
        raise typer.Exit(1)


def run_command(argv: list[str] | None = None, prog_name: str | None = None) -> int:
    """The command line on `argv` (default: sys.argv[1:]), its exit status returned: KLineageError
    -> one line on stderr, 2; a provider failure (LLMError) -> one line, 3. Scripts kept as thin
    wrappers of a command (benchmarks/materialized_bench.py) call this."""
    from klineage.llm.base import EXIT_PROVIDER_FAILED, LLMError

    try:
        rc = app(
            args=argv, prog_name=prog_name, standalone_mode=False
        )  # click returns an Exit's code instead of raising here
        return rc if isinstance(rc, int) else 0
    except KLineageError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True)
        return 2
    except LLMError as e:
        err.print(f"error: LLM provider failed: {e}", highlight=False, soft_wrap=True, markup=False)
        return EXIT_PROVIDER_FAILED
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        err.print("aborted")
        return 130
    except Exception as e:  # click's usage errors (typer vendors click) arrive here in non-standalone mode
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            if e.format_message():
                err.print(f"error: {e.format_message()}", highlight=False, soft_wrap=True)
            return 2
        raise


def main() -> None:
    """Console-script entry: `run_command` on sys.argv, its status as the process's."""
    sys.exit(run_command())
