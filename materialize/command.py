"""`klineage materialize`: input checks, the run with a per-step display, the report, exit codes.

Exit codes (DESIGN.md, CLI): 0 a better kernel was found; 1 the run worked but found nothing
better, or the start kernel fails its own gate (nothing to improve from); 2 bad input (no start
kernel, empty skill store, no API key, unknown model, unknown option value), one line, no
traceback; 3 the LLM provider failed (retries spent, request refused, unreadable replies): the
run is closed with the reason, its best kernel so far written.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from klineage.errors import KLineageError
from klineage.gates.backend import GateOptions
from klineage.llm.base import EXIT_PROVIDER_FAILED
from klineage.materialize.curriculum import ORDERS
from klineage.materialize.loop import (
    DEFAULT_BUDGET,
    SKILLS_MODES,
    MaterializeOptions,
    MaterializeResult,
    StepRecord,
    materialize,
)
from klineage.materialize.measured import read_measured
from klineage.materialize.providers.base import Provider, make_provider, provider_names
from klineage.skills import Skill, load_skills
from klineage.store.db import Store, default_db_path
from klineage.workload import load_workload

#: The store keeps a run's budget in an INTEGER column (32 bits).
MAX_BUDGET = 2**31 - 1


@dataclass
class MaterializeArgs:
    workload_dir: Path
    start: Path | None = None
    budget: int = DEFAULT_BUDGET
    provider: str = "offline"
    skills: str = "all"
    order: str = "curriculum"
    seed: int = 0
    backend: str = "emu"
    db: Path | None = None
    out: Path | None = None
    model: str | None = None
    max_cost: float | None = None
    base_url: str | None = None
    ncu: bool = False
    timeout_s: float = 120.0
    as_json: bool = False
    measured: list[Path] | None = None  # `klineage timings bench` JSON: GPU times for the judge of a CPU run
    llm_timeout_s: float | None = (
        None  # seconds of silence allowed per LLM attempt (None: the client's default)
    )
    include_unverified: bool = False  # also offer skills whose every roundtrip failed
    explore: bool = False  # after the skills run out, the operator library (reported apart)


def _check(args: MaterializeArgs) -> None:
    """Every bad-input case before any gating, each one line naming the problem."""
    if args.provider not in provider_names():
        raise KLineageError(f"unknown provider '{args.provider}' (known: {', '.join(provider_names())})")
    if args.skills not in SKILLS_MODES:
        raise KLineageError(f"unknown --skills '{args.skills}' (known: {', '.join(SKILLS_MODES)})")
    if args.order not in ORDERS:
        raise KLineageError(f"unknown --order '{args.order}' (known: {', '.join(ORDERS)})")
    if args.backend not in ("emu", "cuda"):
        raise KLineageError(f"unknown backend '{args.backend}' (known: emu, cuda)")
    if not 1 <= args.budget <= MAX_BUDGET:
        raise KLineageError(f"--budget must be between 1 and {MAX_BUDGET} (got {args.budget})")
    if args.max_cost is not None and args.max_cost <= 0:
        raise KLineageError("--max-cost must be a positive amount in USD")
    if args.provider == "offline" and (
        args.model or args.max_cost is not None or args.base_url or args.llm_timeout_s is not None
    ):
        raise KLineageError(
            "--model, --max-cost, --base-url and --llm-timeout apply to an LLM provider "
            "(--provider anthropic)"
        )
    if args.explore and args.skills != "all":
        raise KLineageError(
            "--explore goes on with the operator library after the skills run out; "
            "--skills none tries the operators from the start"
        )
    if args.measured and args.backend != "emu":
        raise KLineageError(
            "--measured gives a CPU run GPU times; with --backend cuda the gate times every candidate"
        )


def start_path(args: MaterializeArgs) -> Path:
    path = args.start or args.workload_dir / "naive.cu"
    if not path.is_file():
        if args.start is None:
            raise KLineageError(
                f"{args.workload_dir}: no start kernel (naive.cu); give one with --start FILE"
            )
        raise KLineageError(f"{path}: no such start kernel")
    return path


def open_skills(args: MaterializeArgs, note: Console | None = None) -> tuple[Store, list[Skill]]:
    """The skill store: --db, else $KLINEAGE_DB or ./skills_db/skills.duckdb when it exists, else
    the repository's shipped skills (skills_db/skills.jsonl) built into a store under
    $KLINEAGE_HOME, never a new file in the working folder. `note` is told where it was built."""
    if args.db is not None:
        db = args.db
        if args.skills == "all" and not db.exists():
            raise KLineageError(
                f"{db}: no such skill store (given with --db; run `klineage mine --db {db}` first, "
                "or use --skills none)"
            )
    else:
        db = default_db_path()
        if not db.exists() and args.skills != "all":
            db = _scratch_db()
        elif not db.exists():
            from klineage.export import shipped_store_in_home

            built, export = shipped_store_in_home()
            if built is None:
                raise KLineageError(
                    f"{db}: no skill store, and no shipped skills ({export}) to build one from "
                    "(run `klineage mine` first, give --db, or use --skills none)"
                )
            if note is not None:
                note.print(
                    escape(
                        f"skills: {db} not found; using the shipped skills of {export}, built into {built}"
                    ),
                    highlight=False,
                )
            db = built
    store = Store(db)
    skills = load_skills(store) if args.skills == "all" else []
    if args.skills == "all" and not skills:
        store.close()
        raise KLineageError(
            f"{db}: the skill store is empty (run `klineage mine` first, or use --skills none)"
        )
    return store, skills


def _scratch_db() -> Path:
    """Where a --skills none run without a store records its steps: under $KLINEAGE_HOME."""
    from klineage.paths import home

    return home() / "materialize" / "runs.duckdb"


def build_provider(args: MaterializeArgs) -> Provider:
    if args.provider == "anthropic":
        return make_provider(
            "anthropic",
            model=args.model,
            base_url=args.base_url,
            max_cost_usd=args.max_cost,
            timeout_s=args.llm_timeout_s,
        )
    return make_provider(args.provider)


def _move_label(s: StepRecord) -> str:
    """The move (marked when it came from exploration, not a skill), and the step whose kernel its
    line began from when the loop went back to one."""
    move = f"{s.move} (explore)" if s.explored else s.move
    return move if s.line is None else f"{move} @{s.line}"


def _step_line(s: StepRecord) -> str:
    colour = {
        "kept": "green",
        "rejected": "red",
        "no_candidate": "yellow",
        "duplicate": "dim",
        "outpaced": "cyan",
    }.get(s.verdict, "yellow")
    t = f"{s.time_ms:.4f} ms" if s.time_ms is not None else "-"
    cost = f" ${s.cost_usd:.4f}" if s.cost_usd else ""
    return (
        f"step {s.index:>2}  {escape(_move_label(s)):<28} [{colour}]{s.verdict:<12}[/] {t:>12}  {s.elapsed_s:5.1f} s{cost}  "
        f"{escape(s.reason[:90])}"
    )


def report(res: MaterializeResult, console: Console) -> None:
    table = Table(
        title=f"materialize {res.workload} ({res.provider}, skills {res.skills_mode}, order {res.order})"
    )
    for col in ("step", "move", "verdict", "time ms", "reason"):
        table.add_column(col, overflow="fold")
    for s in res.steps:
        table.add_row(
            str(s.index),
            _move_label(s),
            s.verdict,
            f"{s.time_ms:.4f}" if s.time_ms is not None else "-",
            s.reason[:100],
        )
    console.print(table)
    best = f"step {res.best_step}" if res.best_step is not None else "the start kernel"
    line = (
        f"{res.status}: best is {best}; {res.gated}/{res.budget} candidates gated; stopped: {res.stop_reason}"
    )
    console.print(escape(line), highlight=False)
    if res.speedup is not None:
        vs = f", {res.speedup_vs_torch:.2f}x vs torch" if res.speedup_vs_torch else ""
        console.print(f"speedup over the start kernel: {res.speedup:.2f}x{vs}", highlight=False)
    if res.applied:
        console.print(escape(f"skills applied: {', '.join(res.applied)}"), highlight=False)
    if res.explore:
        o = res.origins
        found = f" ({', '.join(res.explored)} in the best kernel)" if res.explored else ""
        console.print(
            escape(
                f"from skills: {o['skills']['kept']} kept of {o['skills']['gated']} gated; "
                f"from exploration: {o['explore']['kept']} kept of {o['explore']['gated']} gated{found}"
            ),
            highlight=False,
        )
    if res.timed_by:
        missing = (
            f"; {len(res.unmeasured)} correct kernel(s) had no time and were judged on the CPU rule"
            if res.unmeasured
            else ""
        )
        console.print(escape(f"times: {res.timed_by}{missing}"), highlight=False)
    if res.cost:
        unpriced = (
            f"; {res.cost['unpriced_calls']} at an unknown price" if res.cost.get("unpriced_calls") else ""
        )
        console.print(
            f"LLM cost: ${res.cost['spent_usd']:.4f} in {res.cost['calls']} call(s){unpriced}",
            highlight=False,
        )
    console.print(escape(f"output: {res.out_dir} (best.cu, trace.json)"), highlight=False)


def run(args: MaterializeArgs, out: Console, err: Console) -> int:
    """The command; returns the exit code (KLineageError for bad input is the caller's, exit 2)."""
    _check(args)
    wl = load_workload(args.workload_dir)
    start = start_path(args)
    try:
        text = start.read_text()
    except UnicodeDecodeError:
        raise KLineageError(f"{start}: not UTF-8 text") from None
    provider = build_provider(args)  # a missing API key stops here, before any gating
    measured = read_measured(args.measured) if args.measured else None
    store, skills = open_skills(args, err)
    show = not args.as_json and err.is_terminal

    def progress(s: StepRecord) -> None:
        if show:
            err.print(_step_line(s), highlight=False)

    spinner = err.status("", spinner="dots") if show else None

    def announce(what: str) -> None:
        if spinner is not None:
            spinner.update(escape(what))

    options = MaterializeOptions(
        backend=args.backend,
        skills_mode=args.skills,
        order=args.order,
        seed=args.seed,
        out_dir=args.out,
        store=store,
        gate_options=GateOptions(backend=args.backend, timeout_s=args.timeout_s, ncu=args.ncu),
        progress=progress,
        announce=announce,
        start_name=start.name,
        measured=measured,
        include_unverified=args.include_unverified,
        explore=args.explore,
    )
    try:
        if spinner is not None:
            err.print(
                f"materializing {wl.name} from {start} with {len(skills)} skill(s), budget {args.budget}",
                highlight=False,
            )
            spinner.start()
        res = materialize(wl, text, skills, provider, args.budget, options)
        if store is not None:
            from klineage.admission import record_admissions

            record_admissions(store, res)
    finally:
        if spinner is not None:
            spinner.stop()
        store.close()
    if args.as_json:
        sys.stdout.write(json.dumps(res.to_dict(), indent=1, default=str) + "\n")
    else:
        report(res, out)
    if res.status == "provider_failed":
        err.print(escape(f"error: {res.stop_reason} (trace: {res.out_dir}/trace.json)"), highlight=False)
        return EXIT_PROVIDER_FAILED
    if res.status == "start_rejected":
        err.print(escape(f"error: {res.stop_reason} (trace: {res.out_dir}/trace.json)"), highlight=False)
        return 1
    if "cost limit" in res.stop_reason and not args.as_json:
        err.print(escape(f"stopped: {res.stop_reason}"), highlight=False)
    return 0 if res.status == "improved" else 1
