"""Shared fixtures: repository paths and an isolated KLineage home per test session."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Gate caches and artifacts go to a temporary folder, never the user's ~/.cache; a command
    run without --db opens a store there, never the repository's skills_db/skills.duckdb (two
    test workers opening that one file collide on DuckDB's lock)."""
    if "KLINEAGE_TEST_KEEP_HOME" not in os.environ:
        home = tmp_path_factory.mktemp("klineage_home")
        os.environ["KLINEAGE_HOME"] = str(home)
        os.environ["KLINEAGE_DB"] = str(home / "skills.duckdb")


def with_emu_shapes(workload: Path, shapes: str, folder: Path) -> Path:
    """`folder` made a copy of `workload`'s workload.py with its emu shape set replaced by `shapes`
    (JSON text): the emulator gates a kernel on shapes a test chooses (several tiles, tails)."""
    text = (workload / "workload.py").read_text()
    emu = re.search(r'"emu": \[.*?\],\n', text, re.S)
    assert emu is not None
    folder.mkdir()
    (folder / "workload.py").write_text(text.replace(emu.group(0), f'"emu": {shapes},\n'))
    return folder


def define_lines(defines: str) -> str:
    """`A=1,B=2` as the `#define` lines a GPU sweep prepends to a knob file's text."""
    return "".join(f"#define {d.replace('=', ' ')}\n" for d in defines.split(",") if d)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Ctrl-C as Python handles it (KeyboardInterrupt), for tests that simulate one with
    `_thread.interrupt_main()`: a test run started in the background of a non-interactive shell
    inherits SIGINT ignored, and a simulated Ctrl-C is then dropped."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.fixture()
def spy(monkeypatch: pytest.MonkeyPatch) -> list:
    """The ChildOutcome of every run_worker call the gate makes (gates/child.py)."""
    from klineage.gates import child

    seen: list = []
    real = child.run_worker

    def wrapped(*a, **kw):  # noqa: ANN202 - passes through run_worker's signature
        out = real(*a, **kw)
        seen.append(out)
        return out

    monkeypatch.setattr("klineage.gates.gate.run_worker", wrapped)
    return seen


@pytest.fixture()
def cpu_gate(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The materializer's gate replaced by a stand-in that accepts every candidate without timing
    (as the emulator would, with no build); the list collects the names gated, in order."""
    from klineage.gates.result import GateResult
    from klineage.materialize import loop as loop_module
    from klineage.source.digest import source_hash

    gated: list[str] = []

    def fake_gate(text: str, workload, options, name: str = "") -> GateResult:  # noqa: ANN001
        gated.append(name)
        return GateResult(True, "done", "ok", backend="emu", artifact_id=source_hash(text))

    monkeypatch.setattr(loop_module, "gate", fake_gate)
    return gated
