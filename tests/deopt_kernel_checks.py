"""Checks shared by the tests of the memory, intrinsic and shared-memory operators (ldg, vectorize,
fast_math, packed_half2, reciprocal_hoist, smem_padding, smem_staging, pipeline, tensor_core).

`passes_gate` always proves the candidate parses and compiles with nvcc; the emu gate then has to
accept it. While klineage.gates.emu.backend cannot be imported the emu part is skipped with a
reason, so these tests become full acceptance tests the moment the backend lands.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from klineage.deopt.base import Operator, Site
from klineage.source.model import CudaSource

DATA = Path(__file__).resolve().parent / "data" / "deopt"


def emu_ready() -> bool:
    try:
        importlib.import_module("klineage.gates.emu.backend")
    except Exception:  # noqa: BLE001 - an import that fails for any reason means "not usable yet"
        return False
    return True


def load(operator: str, name: str, file: str = "expert.cu") -> tuple[CudaSource, Path]:
    folder = DATA / operator / name
    return CudaSource.from_file(folder / file), folder


def compiles(text: str, workdir: Path) -> None:
    """nvcc accepts the text (skips when nvcc is not installed)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    from klineage.gates.compile import compile_cubin

    r = compile_cubin(text, workdir)
    assert r.ok, f"{r.first_error()}\n{text}"


def passes_gate(text: str, workload_dir: Path, tmp_path: Path, name: str = "candidate.cu") -> None:
    """Parses, compiles with nvcc, and is accepted by the emu gate (emu part skipped while missing)."""
    CudaSource.from_text(text, name)
    if not emu_ready():
        compiles(text, tmp_path / "nvcc")
        pytest.skip(
            "klineage.gates.emu.backend cannot be imported yet: parse + nvcc checked, emu gate skipped"
        )
    from klineage.gates.backend import GateOptions
    from klineage.gates.gate import gate

    r = gate(text, workload_dir, GateOptions(backend="emu"), name=name)
    assert r.accepted, f"{r.category}: {r.message}\n{text}"


def all_pass(texts: list[str], workload_dir: Path, tmp_path: Path) -> None:
    """Every text compiles (one nvcc run each) and passes the emu gate (skipped while missing)."""
    for i, t in enumerate(texts):
        CudaSource.from_text(t, f"c{i}.cu")
    if not emu_ready():
        for i, t in enumerate(texts):
            compiles(t, tmp_path / f"nvcc{i}")
        pytest.skip(
            "klineage.gates.emu.backend cannot be imported yet: parse + nvcc checked, emu gate skipped"
        )
    from klineage.gates.backend import GateOptions
    from klineage.gates.gate import gate

    for i, t in enumerate(texts):
        r = gate(t, workload_dir, GateOptions(backend="emu"), name=f"c{i}.cu")
        assert r.accepted, f"{r.category}: {r.message}\n{t}"


def one_site(op: Operator, src: CudaSource, **match: str) -> Site:
    sites = [s for s in op.find(src) if all(s.details.get(k) == v for k, v in match.items())]
    assert len(sites) == 1, [s.summary for s in op.find(src)]
    return sites[0]


def remove_all(op: Operator, src: CudaSource) -> CudaSource:
    """Remove the operator's sites one by one until none is left (re-finding after each edit)."""
    for _ in range(50):
        sites = op.find(src)
        if not sites:
            return src
        src = op.remove(src, sites[0])
    raise AssertionError(f"{op.name}: sites keep appearing")


def failed_forward(op: Operator, text: str) -> list[tuple[str, str]]:
    """(name, reason) of each forward precondition that fails at the one forward site of `text`."""
    src = CudaSource.from_text(text, "k.cu")
    (site,) = op.find_forward(src)
    return [(f.name, f.reason) for f in op.preconditions(src, site) if not f.holds]
