"""benchmarks/round_agreement.py: a CPU round's bests against the GPU loop's, through one judge's
times (issue 26's agreement line)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from klineage.materialize.measured import read_measured
from klineage.source.digest import source_hash

ROOT = Path(__file__).resolve().parents[1]


def _module():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(
        "round_agreement", ROOT / "benchmarks" / "round_agreement.py"
    )
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["round_agreement"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _k(ms: float, lo: float, hi: float) -> dict[str, Any]:
    return {"check": "ok", "ms": ms, "min_ms": lo, "max_ms": hi}


def _run(w: str, mode: str, x: float, xt: float) -> dict[str, Any]:
    return {"workload": w, "mode": mode, "seed": 0, "speedup": x, "speedup_vs_torch": xt}


def _setup(tmp: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    texts = {w: f"// {w} cpu best\n" for w in ("a", "b", "c", "d")}
    for w, t in texts.items():
        (tmp / w / "curriculum").mkdir(parents=True)
        (tmp / w / "curriculum" / "best.cu").write_text(t)
    h = {w: source_hash(t) for w, t in texts.items()}
    rows = [
        # a: the loop ended on the same kernel
        {
            "name": "a",
            "kernels": {h["a"]: _k(1.0, 0.99, 1.01)},
            "curriculum": dict(_k(1.0, 0.99, 1.01), digest=h["a"]),
        },
        # b: another kernel, 1% slower, spread 3%
        {
            "name": "b",
            "kernels": {h["b"]: _k(2.02, 2.0, 2.06), "x": _k(2.0, 1.98, 2.02)},
            "curriculum": dict(_k(2.0, 1.98, 2.02), digest="x"),
        },
        # c: the loop's best 30% faster, spreads 1%
        {
            "name": "c",
            "kernels": {h["c"]: _k(1.3, 1.29, 1.31), "y": _k(1.0, 0.995, 1.005)},
            "curriculum": dict(_k(1.0, 0.995, 1.005), digest="y"),
        },
        # d: the CPU best never timed by the judge
        {
            "name": "d",
            "kernels": {"z": _k(1.0, 0.99, 1.01)},
            "curriculum": dict(_k(1.0, 0.99, 1.01), digest="z"),
        },
    ]
    loop = [_run(w, "curriculum", 4.0, 1.0) for w in texts]
    cpu = [_run(w, "curriculum", 2.0, 0.5) for w in texts]
    return loop, cpu, {"device": "NVIDIA H200", "date": "2026-12-07", "rows": rows}


def test_verdicts_follow_the_judge_times_and_spreads(tmp_path: Path, capsys: Any) -> None:
    mod = _module()
    loop, cpu, judge = _setup(tmp_path)
    (tmp_path / "judge.json").write_text(json.dumps(judge))
    measured = read_measured([tmp_path / "judge.json"])
    got = {a.workload: a.verdict for a in mod.compare(loop, cpu, tmp_path, judge["rows"], measured)}
    assert got == {"a": "same kernel", "b": "within spread", "c": "loop faster", "d": "unmeasured"}
    (tmp_path / "loop.json").write_text(json.dumps(loop))
    (tmp_path / "bench.json").write_text(json.dumps(cpu))
    args = [
        "--loop",
        str(tmp_path / "loop.json"),
        "--cpu",
        str(tmp_path),
        "--judge",
        str(tmp_path / "judge.json"),
    ]
    assert mod.main(args) == 0
    assert "| curriculum | 2/4 | 4.000 / 1.000 | 2.000 / 0.500 |" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: Any) -> None:
    mod = _module()
    (tmp_path / "loop.json").write_text("[")
    assert mod.main(["--loop", str(tmp_path / "loop.json"), "--cpu", str(tmp_path), "--judge", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("round_agreement:")


def test_the_call_scripts_loop_column_is_read(tmp_path: Path) -> None:
    """The device scripts label the loop's bests `loop_MODE` (beside `cpu_MODE`): the same verdicts."""
    mod = _module()
    loop, cpu, judge = _setup(tmp_path)
    for r in judge["rows"]:
        r["loop_curriculum"] = r.pop("curriculum")
    (tmp_path / "judge.json").write_text(json.dumps(judge))
    measured = read_measured([tmp_path / "judge.json"])
    got = {a.workload: a.verdict for a in mod.compare(loop, cpu, tmp_path, judge["rows"], measured)}
    assert got == {"a": "same kernel", "b": "within spread", "c": "loop faster", "d": "unmeasured"}
