"""The `klineage` command line (DESIGN.md, 'CLI').

Exit codes: 0 success (gate: accepted), 1 the work ran and the answer is no (gate: rejected),
2 usage or bad input with one clear line and no traceback. `--json` prints one JSON document on
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
err = Console(stderr=True)


def emit_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")


@app.command()
def doctor(as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False) -> None:
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
        Path | None, typer.Option("--workload", "-w", help="Workload folder (default: each kernel's own folder).")
    ] = None,
    backend: Annotated[str, typer.Option(help="emu (CPU emulator) or cuda (GPU).")] = "emu",
    shape_set: Annotated[str, typer.Option("--shape-set", help="test, emu or bench (default: the backend's).")] = "",
    arch: Annotated[str, typer.Option(help="nvcc target architecture.")] = "sm_90a",
    timeout: Annotated[float, typer.Option(help="Seconds allowed for each stage run in a child process.")] = 120.0,
    sanitize: Annotated[bool, typer.Option(help="Address-sanitized (emu) or compute-sanitizer (cuda) run.")] = False,
    ncu: Annotated[bool, typer.Option(help="cuda: Nsight Compute metrics.")] = False,
    energy: Annotated[bool, typer.Option(help="cuda: NVML energy per call.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Gate again even when a cached verdict exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Gate kernels: parse, compile, run, check against the workload's reference, profile."""
    from klineage.gates.backend import GateOptions
    from klineage.gates.backends import BACKENDS
    from klineage.gates.gate import gate
    from klineage.workload import load_workload

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
    loaded = {folder: load_workload(folder) for _, folder in jobs}
    options = GateOptions(
        backend=backend, shape_set=shape_set, arch=arch, timeout_s=timeout, sanitize=sanitize, ncu=ncu, energy=energy
    )
    results = []
    for k, folder in jobs:
        with err.status(f"gating {k}", spinner="dots") if not as_json and err.is_terminal else _nullctx():
            r = gate(k, loaded[folder], options, use_cache=not no_cache)
        results.append((k, r))
        if not as_json:
            _print_result(k, r)
    if as_json:
        docs = [{"kernel": str(k), **r.to_dict()} for k, r in results]
        emit_json(docs[0] if len(docs) == 1 else docs)
    if not all(r.accepted for _, r in results):
        raise typer.Exit(1)


class _nullctx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _print_result(kernel: Path, r) -> None:  # noqa: ANN001 - GateResult, imported lazily
    verdict = "[green]ACCEPTED[/]" if r.accepted else f"[red]REJECTED[/] [bold]{r.category}[/]"
    cached = " (cached)" if r.cached else ""
    out.print(f"{kernel}: {verdict} [{r.backend}, {r.elapsed_s:.2f} s{cached}] {r.message}", highlight=False)
    for name, res in r.resources.items():
        out.print(
            f"    {name}: {res.registers} regs, {res.shared_bytes} B smem, {res.stack_bytes} B stack, "
            f"spills {res.spill_stores}/{res.spill_loads}, {res.barriers} barriers",
            highlight=False,
        )
    if r.timing:
        t = r.timing
        ref = f", torch {t.reference_median_ms:.4f} ms" if t.reference_median_ms else ""
        out.print(f"    time {t.median_ms:.4f} ms (min {t.min_ms:.4f}, max {t.max_ms:.4f}){ref}", highlight=False)


def main() -> None:
    """Console-script entry: KLineageError -> one line on stderr, exit 2."""
    try:
        rc = app(standalone_mode=False)  # click returns an Exit's code instead of raising here
        sys.exit(rc if isinstance(rc, int) else 0)
    except KLineageError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as e:  # click's usage errors (typer vendors click) arrive here in non-standalone mode
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            if e.format_message():
                err.print(f"error: {e.format_message()}", highlight=False, soft_wrap=True)
            sys.exit(2)
        raise
