"""benchmarks/kernelbench_agreement.py: verdict pairing, the tolerance probe, the stand-in imports
and the schedule (fake steps: no GPU, no compiler)."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location(
    "kernelbench_agreement", REPO / "benchmarks/kernelbench_agreement.py"
)
assert _spec is not None and _spec.loader is not None
ka = importlib.util.module_from_spec(_spec)
sys.modules["kernelbench_agreement"] = ka
_spec.loader.exec_module(ka)

GATE = st.sampled_from(["ok", "mismatch", "compile_error", "crash", "side_stream", "rc 1", "error: x", ""])
THEIRS = st.sampled_from(["correct", "incorrect", "compile_error", "error: lock", ""])


@given(GATE, THEIRS, THEIRS)
def test_a_pair_agrees_when_both_sides_accept_or_both_reject(gate: str, kb: str, v0: str) -> None:
    row = ka.judge(ka.Row("p", gate=gate, kernelbench=kb, kernelbench_v0=v0))
    for theirs, agree in ((kb, row.agree), (v0, row.agree_v0)):
        no_verdict = gate in ("", "rc 1", "error: x") or theirs in ("", "error: lock")
        assert agree is (None if no_verdict else (gate == "ok") == (theirs == "correct"))


def test_the_probe_records_v0_without_changing_the_evaluators_answer() -> None:
    original = torch.allclose
    want = torch.zeros(8)
    got = want + 1e-3  # outside atol = rtol = 1e-4, inside 1e-2
    with ka.ToleranceProbe(torch) as probe:
        assert torch.allclose(want, got, atol=1e-4, rtol=1e-4) is False
        assert torch.allclose(want, want + 0.5, atol=1e-4, rtol=1e-4) is False
        with pytest.raises(RuntimeError):  # the evaluator's own failure is its own, as without the probe
            torch.allclose(torch.zeros(0), torch.zeros(3), atol=1e-4, rtol=1e-4)
    assert torch.allclose is original
    assert probe.at_tol == [True, False, False]
    assert probe.max_abs == pytest.approx(0.5)


def test_stand_in_imports_are_inspect_safe_and_say_what_is_missing() -> None:
    name = "klineage_test_module_that_is_not_installed"
    try:
        assert ka.stub_unused_imports([name, "json"]) == [name]
        mod = sys.modules[name]
        with pytest.raises(AttributeError):
            mod.__file__  # noqa: B018 - inspect.getmodule walks sys.modules asking for it
        assert mod.load_dotenv() is False
        with pytest.raises(RuntimeError, match="not installed"):
            mod.OpenAI()
    finally:
        sys.modules.pop(name, None)


class _Fake(ka.Agreement):
    """The schedule with steps that answer at once, or after a while ("slow"), or not before
    `release` is set ("stuck")."""

    release = threading.Event()

    def _build(self, p):  # type: ignore[no-untyped-def]
        return self._evaluate

    def _evaluate(self, p):  # type: ignore[no-untyped-def]
        v = "incorrect" if p.name == "bad" else "correct"
        return {"kernelbench": v, "kernelbench_v0": "correct"}

    def _import(self, p):  # type: ignore[no-untyped-def]
        if p.name == "slow":
            time.sleep(0.5)
        return {"gate": "refused: x"} if p.name == "refused" else self._gate

    def _gate(self, p):  # type: ignore[no-untyped-def]
        if p.name == "boom":
            raise RuntimeError("worker gone")
        if p.name == "stuck":
            self.release.wait(10)
        return {"gate": "ok"}


def _pairs(*names: str) -> list:
    return [ka.Pair(n, Path(f"{n}.py"), Path(f"{n}_sol.py")) for n in names]


def test_every_pair_gets_both_sides_and_each_row_is_logged_as_it_lands(tmp_path: Path) -> None:
    run = _Fake(_pairs("a", "bad", "refused", "boom"), tmp_path, "", jobs=2, deadline_s=0)
    rows = {r.name: r for r in run.run()}
    assert [rows[n].agree for n in ("a", "bad", "refused", "boom")] == [True, False, False, None]
    assert rows["boom"].gate.startswith("error: RuntimeError")
    assert rows["bad"].agree_v0 is True
    assert set(rows["a"].seconds) == {"build", "evaluate", "import", "gate"}
    logged = [json.loads(ln)["name"] for ln in (tmp_path / "agreement.jsonl").read_text().splitlines()]
    assert sorted(logged) == ["a", "bad", "boom", "refused"]
    assert not run.unfinished and not run.skipped


def test_pairs_not_started_by_the_deadline_are_skipped(tmp_path: Path) -> None:
    run = _Fake(_pairs("slow", "late"), tmp_path, "", jobs=1, deadline_s=0.2)
    rows = run.run()
    assert run.skipped == {"late"}
    assert [(r.name, r.agree) for r in rows] == [("slow", True)]
    assert "not started before the deadline (1): late" in ka.table(rows, run.skipped, run.unfinished)


def test_a_stop_writes_what_finished_and_names_the_rest(tmp_path: Path) -> None:
    _Fake.release.clear()
    run = _Fake(_pairs("a", "stuck"), tmp_path, "", jobs=2, deadline_s=0)
    t0 = time.monotonic()
    rows = run.run(stop_s=0.5)
    assert time.monotonic() - t0 < 5  # the stop does not wait for the stuck gate
    _Fake.release.set()
    assert run.unfinished == ["stuck"]
    assert [(r.name, r.agree) for r in rows] == [("a", True), ("stuck", None)]
    assert "unfinished at --stop (1): stuck" in ka.table(rows, run.skipped, run.unfinished)


def test_bad_pairs_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ka.main(["--pairs", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]


def test_the_gate_workers_phases_come_from_the_archived_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path))
    key = "ab" + "c" * 62
    run = tmp_path / "gate" / key[:2] / key / "run"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"phases": {"load_s": 1.234, "correctness_s": 2.0}}))
    assert ka._worker_phases(key[:16]) == {"worker_load_s": 1.23, "worker_correctness_s": 2.0}
    assert ka._worker_phases("") == {} and ka._worker_phases("ff" * 8) == {}


def test_each_disagreement_names_the_stricter_side() -> None:
    rows = [
        ka.judge(ka.Row("tol", gate="ok", kernelbench="incorrect", kernelbench_v0="correct")),
        ka.judge(
            ka.Row(
                "ours",
                gate="mismatch",
                gate_message="odd shape",
                kernelbench="correct",
                kernelbench_v0="correct",
            )
        ),
        ka.judge(ka.Row("same", gate="ok", kernelbench="correct", kernelbench_v0="correct")),
    ]
    text = ka.table(rows)
    assert "disagreement tol: the gate accepts; KernelBench 423217d's fp32 tolerance" in text
    assert "disagreement ours: KernelBench says correct; our gate is stricter: mismatch: odd shape" in text
    assert "disagreement same" not in text
    assert "agree: 1/3" in text and "agree_v0: 2/3" in text


FAKE_EVAL = '''
import torch


class Result:
    def __init__(self, compiled, correctness, metadata):
        self.compiled, self.correctness, self.metadata = compiled, correctness, metadata


def build_compile_cache(src, verbose=False, build_dir=None):
    return (True, "", None) if "builds" in src else (False, "", "nvcc: boom")


def eval_kernel_against_ref(original, custom, seed_num, num_correct_trials, measure_performance, build_dir, device):
    """Its trial loop, as 423217d writes it: allclose at its fp32 tolerance, every trial."""
    off = float(custom.split("=")[1])
    passed = sum(
        bool(torch.allclose(torch.ones(4), torch.ones(4) + off, atol=1e-4, rtol=1e-4))
        for _ in range(num_correct_trials)
    )
    return Result(True, passed == num_correct_trials, {"hardware": "x", "correctness_trials": passed})
'''


@pytest.mark.parametrize(
    ("offset", "verdict", "v0"),
    [(0.0, "correct", "correct"), (1e-3, "incorrect", "correct"), (0.1, "incorrect", "incorrect")],
)
def test_kernelbench_side_through_a_checkout(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    offset: float,
    verdict: str,
    v0: str,
) -> None:
    """The glue to a KernelBench checkout (its src/kernelbench package, imported with stand-ins):
    its verdict as it gives it, and the v0 verdict from the same trials."""
    pkg = tmp_path / "kb" / "src" / "kernelbench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "eval.py").write_text(FAKE_EVAL)
    monkeypatch.setenv("KLINEAGE_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # restored after: kb_eval sets it
    absent = [m for m in ka.EVAL_UNUSED_IMPORTS if m not in sys.modules]
    request.addfinalizer(lambda: [sys.modules.pop(m, None) for m in absent])  # the stand-ins go
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in [m for m in sys.modules if m.startswith("kernelbench")]:
        monkeypatch.delitem(sys.modules, name)
    problem, sol = tmp_path / "p.py", tmp_path / "s.py"
    problem.write_text("")
    sol.write_text(f"off={offset}")
    res = ka.kb_eval(str(tmp_path / "kb"), problem, sol, tmp_path / "ext")
    assert (res["verdict"], res["v0"]) == (verdict, v0)
    assert '"correctness_trials"' in res["detail"] and '"hardware"' not in res["detail"]
    sol.write_text("builds")
    assert ka.kb_build(str(tmp_path / "kb"), sol, tmp_path / "ext") == {"ok": True, "error": ""}
    sol.write_text("fails")
    assert ka.kb_build(str(tmp_path / "kb"), sol, tmp_path / "ext") == {"ok": False, "error": "nvcc: boom"}
