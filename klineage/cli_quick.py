"""The `klineage` entry point: a `klineage gate` whose every kernel has a cached verdict is
answered here, before typer (and pydantic, through it) is imported; anything else goes to the full
command line (klineage/cli.py).

Why: a cache hit needs no workload, no torch and no GPU (gates.gate.quick_answer), so importing the
command-line framework was most of its cost (0.73 s on the H200 machine). This path reads only
the options `klineage gate` has, and only in plain spellings; any other argument, a bad value, a
missing file, `--no-cache` or `--help` falls through to the full command line, which answers as it
always has (its errors included). Output and exit status are the full command's (one printer,
`print_result`, serves both).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from klineage.gates.result import GateResult

#: options of `klineage gate` that take a value, by spelling, and the field each sets
_VALUED = {
    "--workload": "workload",
    "-w": "workload",
    "--backend": "backend",
    "--shape-set": "shape_set",
    "--arch": "arch",
    "--timeout": "timeout",
}
#: switches of `klineage gate` (the cache-bypassing --no-cache is not here: it must gate)
_SWITCHES = {
    "--sanitize": ("sanitize", True),
    "--no-sanitize": ("sanitize", False),
    "--ncu": ("ncu", True),
    "--no-ncu": ("ncu", False),
    "--energy": ("energy", True),
    "--no-energy": ("energy", False),
    "--json": ("as_json", True),
}


@dataclass
class GateArgs:
    """`klineage gate`'s arguments, with the command's defaults."""

    kernels: list[Path] = field(default_factory=list)
    workload: str | None = None
    backend: str = "emu"
    shape_set: str = ""
    arch: str = "sm_90a"
    timeout: str = "120.0"
    sanitize: bool = False
    ncu: bool = False
    energy: bool = False
    as_json: bool = False


def parse_gate_args(argv: list[str]) -> GateArgs | None:
    """`argv` (without the program) as a `klineage gate` call in spellings this path knows; None
    when it is anything else (the full command line then reads it)."""
    if not argv or argv[0] != "gate":
        return None
    args = GateArgs()
    rest = argv[1:]
    i = 0
    while i < len(rest):
        a = rest[i]
        name, eq, value = a.partition("=")
        if name in _VALUED and (eq or i + 1 < len(rest)):
            if not eq:
                value = rest[i + 1]
                i += 1
            if name == "-w" and eq:
                return None  # click reads `-w=X` as the value '=X'
            setattr(args, _VALUED[name], value)
        elif a in _SWITCHES:
            attr, flag = _SWITCHES[a]
            setattr(args, attr, flag)
        elif a.startswith("-"):
            return None  # --help, --no-cache, `--`, an unknown or misspelled option
        else:
            args.kernels.append(Path(a))
        i += 1
    return args if args.kernels else None


def answer(argv: list[str]) -> int | None:
    """Answer a `klineage gate` call from the cache: the exit status after printing, or None when
    a kernel has no cached verdict or the call is not one this path reads."""
    args = parse_gate_args(argv)
    if args is None:
        return None
    from klineage.errors import KLineageError
    from klineage.gates.backend import GateOptions
    from klineage.gates.backends import BACKENDS
    from klineage.gates.gate import quick_answer, read_source

    if args.backend not in BACKENDS or args.shape_set not in ("", "test", "emu", "bench"):
        return None
    try:
        timeout = float(args.timeout)
    except ValueError:
        return None
    options = GateOptions(
        backend=args.backend,
        shape_set=args.shape_set,
        arch=args.arch,
        timeout_s=timeout,
        sanitize=args.sanitize,
        ncu=args.ncu,
        energy=args.energy,
    )
    results: list[tuple[Path, GateResult]] = []
    for k in args.kernels:
        folder = Path(args.workload) if args.workload is not None else k.parent
        if not k.is_file() or not (folder / "workload.py").is_file():
            return None
        try:
            r = quick_answer(read_source(k), folder, options)
        except KLineageError:
            return None
        if r is None:
            return None
        results.append((k, r))
    if args.as_json:
        doc = [{"kernel": str(k), **r.to_dict()} for k, r in results]
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    else:
        out = stdout_console()
        for k, r in results:
            print_result(out, k, r)
    return 0 if all(r.accepted for _, r in results) else 1


def stdout_console() -> Console:
    """The console the command line prints results on."""
    from rich.console import Console

    out = Console()
    out.soft_wrap = not out.is_terminal  # piped to a file: whole lines, never wrapped at 80 columns
    return out


def print_result(out: Console, kernel: Path, r: GateResult | Any) -> None:
    """One gated kernel: verdict, resources per kernel function, times."""
    from rich.markup import escape

    verdict = "[green]ACCEPTED[/]" if r.accepted else f"[red]REJECTED[/] [bold]{r.category}[/]"
    cached = " (cached)" if r.cached else ""
    out.print(
        f"{escape(str(kernel))}: {verdict} {escape(f'[{r.backend}, {r.elapsed_s:.2f} s{cached}] {r.message}')}",
        highlight=False,
    )
    for name, res in r.resources.items():
        out.print(
            f"    {name}: {res.registers} regs, {res.shared_bytes} B smem, {res.stack_bytes} B stack, "
            f"spills {res.spill_stores}/{res.spill_loads}, {res.barriers} barriers",
            highlight=False,
        )
    if r.timing:
        t = r.timing
        ref = f", torch {t.reference_median_ms:.4f} ms" if t.reference_median_ms else ""
        out.print(
            f"    time {t.median_ms:.4f} ms (min {t.min_ms:.4f}, max {t.max_ms:.4f}){ref}", highlight=False
        )


def main() -> None:
    """Console-script entry: a cache hit answered here, everything else by klineage.cli.main."""
    code = answer(sys.argv[1:])
    if code is not None:
        sys.stdout.flush()
        sys.exit(code)
    from klineage.cli import main as full

    full()
