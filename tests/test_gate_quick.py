"""A cached `klineage gate` answer without loading the workload (no torch, no GPU): the quick-answer
index of gates/cache.py, keyed by the candidate, the workload folder's bytes, the options and the
toolchain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from klineage.gates import cache
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate, quick_answer

VADD = Path(__file__).parent / "kernels" / "emu" / "vadd"


def test_cached_cli_answer_imports_no_torch(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = dict(os.environ, KLINEAGE_HOME=str(home))
    cmd = [sys.executable, "-X", "importtime", "-m", "klineage", "gate", str(VADD / "good.cu"), "--json"]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    assert not json.loads(first.stdout)[0]["cached"]
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)[0]["cached"]
    imported = {
        ln.split("|")[-1].strip() for ln in again.stderr.splitlines() if ln.startswith("import time:")
    }
    # answered before the command-line framework is imported (klineage/cli_quick.py)
    assert "klineage.cli" not in imported and "typer" not in imported
    assert "torch" not in imported and "klineage.workload" not in imported
    # the same output and exit status as the full command line, in JSON and in words
    full = [sys.executable, "-c", "from klineage.cli import main; main()"]
    for tail in (["--json"], []):
        args = ["gate", str(VADD / "good.cu"), *tail]
        quick = subprocess.run(
            [sys.executable, "-m", "klineage", *args], capture_output=True, text=True, env=env
        )
        slow = subprocess.run([*full, *args], capture_output=True, text=True, env=env)
        assert (quick.returncode, quick.stdout) == (slow.returncode, slow.stdout)
        assert quick.returncode == 0 and ("cached" in quick.stdout)


def test_quick_cli_reads_only_plain_gate_calls() -> None:
    """What the fast path reads; everything else goes to the full command line (None)."""
    from klineage.cli_quick import GateArgs, parse_gate_args

    got = parse_gate_args(["gate", "a.cu", "-w", "wl", "--backend=cuda", "--timeout", "9", "--json", "b.cu"])
    assert got == GateArgs(
        kernels=[Path("a.cu"), Path("b.cu")], workload="wl", backend="cuda", timeout="9", as_json=True
    )
    assert parse_gate_args(["gate", "a.cu", "--sanitize", "--no-ncu"]) == GateArgs(
        kernels=[Path("a.cu")], sanitize=True
    )
    for argv in (
        [],
        ["mine", "a.cu"],
        ["gate"],
        ["gate", "--json"],
        ["gate", "a.cu", "--no-cache"],
        ["gate", "a.cu", "--help"],
        ["gate", "a.cu", "--bakend", "cuda"],
        ["gate", "a.cu", "--backend"],
        ["gate", "--", "a.cu"],
        ["gate", "a.cu", "-w=wl"],
    ):
        assert parse_gate_args(argv) is None, argv


def test_quick_cli_falls_through_without_a_hit(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from klineage.cli_quick import answer

    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    assert answer(["gate", str(VADD / "good.cu")]) is None  # nothing cached yet
    assert answer(["gate", str(tmp_path / "missing.cu")]) is None  # the full CLI's error
    assert answer(["gate", str(VADD / "good.cu"), "--backend", "nope"]) is None
    assert answer(["gate", str(VADD / "good.cu"), "--timeout", "soon"]) is None


def test_quick_answer_follows_the_folder(tmp_path: Path) -> None:
    """A changed file of the workload folder (or other options) finds no quick answer."""
    folder = tmp_path / "vadd"
    folder.mkdir()
    for name in ("workload.py", "good.cu"):
        (folder / name).write_bytes((VADD / name).read_bytes())
    root = tmp_path / "cache"
    text = (folder / "good.cu").read_text()
    opts = GateOptions()
    assert quick_answer(text, folder, opts, root) is None
    r = gate(text, folder, opts, name="good.cu", cache_root=root)
    assert r.accepted and not r.cached
    hit = quick_answer(text, folder, opts, root)
    assert hit is not None and hit.cached and hit.to_dict() | {"cached": False} == r.to_dict()
    assert quick_answer(text, folder, GateOptions(seeds=(0, 1, 2)), root) is None
    assert quick_answer(text + "\n", folder, opts, root) is None
    (folder / "notes.txt").write_text("a file the fingerprint may read")
    assert cache.folder_digest(folder) is not None
    assert quick_answer(text, folder, opts, root) is None
