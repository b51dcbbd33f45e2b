"""Checks shared by the tests of the parallel-structure operators (reductions, atomics, grid
mapping, tile sizes): an operator's output must parse, compile with nvcc and pass the emu gate.

While the emulator backend (gates/emu/backend.py) cannot be imported, the gate answers
`unsupported` for every candidate; these checks then still compile with nvcc and skip the emu part
with a reason, so the tests turn into real acceptance tests as soon as the backend lands.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
from pathlib import Path

import pytest

from klineage.deopt.base import Operator, Refused, Site
from klineage.source.model import CudaSource
from klineage.source.text import normalize

DATA = Path(__file__).resolve().parent / "data" / "deopt"


def emu_available() -> bool:
    try:
        importlib.import_module("klineage.gates.emu.backend")
    except Exception:  # noqa: BLE001 - any import failure means: not usable yet
        return False
    return True


def fixture(operator: str, name: str) -> tuple[CudaSource, Path]:
    folder = DATA / operator / name
    return CudaSource.from_file(folder / "expert.cu"), folder


def assert_passes(text: str, workload_dir: Path, tmp_path: Path, name: str = "candidate.cu") -> None:
    """Compiles with nvcc and is accepted by the emu gate (skips the emu part while it is missing)."""
    CudaSource.from_text(text, name)  # parses
    if emu_available():
        from klineage.gates.backend import GateOptions
        from klineage.gates.gate import gate

        r = gate(text, workload_dir, GateOptions(backend="emu"), name=name)
        assert r.accepted, f"{r.category}: {r.message}\n{text}"
        return
    if shutil.which("nvcc") is None:
        pytest.skip("neither the emu backend nor nvcc is available")
    from klineage.gates.compile import compile_cubin

    r = compile_cubin(text, tmp_path / "nvcc")
    assert r.ok, f"{r.first_error()}\n{text}"
    pytest.skip("klineage.gates.emu.backend cannot be imported yet: nvcc compile checked, emu gate skipped")


def ptx_of(text: str, tmp_path: Path) -> str:
    """The PTX nvcc writes for `text` at -O3 on sm_90a (skips the test without nvcc): what the
    compiler made of a forward step's loads."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not available: the PTX check is skipped")
    (tmp_path / "k.cu").write_text(text)
    subprocess.run(
        ["nvcc", "-arch=sm_90a", "-O3", "-ptx", str(tmp_path / "k.cu"), "-o", str(tmp_path / "k.ptx")],
        check=True,
        capture_output=True,
    )
    return (tmp_path / "k.ptx").read_text()


def only_site(op: Operator, src: CudaSource, **match: str) -> Site:
    sites = [s for s in op.find(src) if all(s.details.get(k) == v for k, v in match.items())]
    assert len(sites) == 1, [s.summary for s in op.find(src)]
    return sites[0]


def apply_forward(op: Operator, src: CudaSource) -> CudaSource:
    """`op`'s forward step at its one forward site, every precondition holding."""
    (site,) = op.find_forward(src)
    facts = op.preconditions(src, site)
    assert all(f.holds for f in facts), facts
    return op.apply(src, site)


def same_code(a: str, b: str) -> bool:
    return normalize(a) == normalize(b)


def edited(path: Path, *edits: tuple[str, str]) -> CudaSource:
    """The kernel file at `path` with each (old, new) replaced (each old text must be there)."""
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return CudaSource.from_text(text)


def assert_refused_on(op: Operator, src: CudaSource, fact: str) -> None:
    """`op` finds one site in `src`, exactly `fact` fails there, and the removal refuses naming it."""
    (site,) = op.find(src)
    assert {p.name for p in op.removal_preconditions(src, site) if not p.holds} == {fact}
    with pytest.raises(Refused, match=fact):
        op.remove(src, site)
