"""The loop end to end on the CPU emulator, on the tiny scale workload (tests/data/mining/scale).

Gating is the cost here (seconds per candidate), so the tests share the session's gate cache: the
offline curriculum run gates the start kernel and two candidates; the other runs reuse them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from klineage.llm.record import full_prompt
from klineage.llm.stub import Reply, StubServer, not_json, overloaded, prompt_tokens
from klineage.materialize import MaterializeOptions, make_provider, materialize
from klineage.materialize.prompts import DEFAULT_BUDGET
from klineage.skills import Skill, load_skills, upsert
from klineage.store.db import Store
from klineage.workload import load_workload
from tests.test_materialize_helpers import SCALE, make_skill, scale_skills

NAIVE = (SCALE / "naive.cu").read_text()
KEY = "sk-test-loop-key-7"


@pytest.fixture(scope="module")
def wl():  # noqa: ANN201
    return load_workload(SCALE)


@pytest.fixture(scope="module")
def curriculum_run(wl, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN001, ANN201
    tmp = tmp_path_factory.mktemp("curriculum")
    store = Store(tmp / "runs.duckdb")
    seen = []
    res = materialize(
        wl,
        NAIVE,
        scale_skills(),
        make_provider("offline"),
        3,
        MaterializeOptions(store=store, out_dir=tmp / "out", progress=seen.append),
    )
    yield res, store, tmp / "out", seen
    store.close()


def test_curriculum_run_keeps_each_skill(curriculum_run) -> None:  # noqa: ANN001
    res, _, out, seen = curriculum_run
    assert res.status == "improved" and res.start_gate["accepted"]
    assert [s.move for s in res.steps] == [
        "restrict-scale_test",
        "launch_bounds-scale_test",
    ]  # depth 1, then 3
    assert all(s.kept and s.verdict == "kept" and "static effect present" in s.reason for s in res.steps)
    assert res.applied == ["restrict-scale_test", "launch_bounds-scale_test"] and res.gated == 2
    assert res.stop_reason == "no applicable skill left to try"
    assert (
        "pragma_unroll-scale_test",
        "no forward site for 'pragma_unroll' (nothing in the code it fits)",
    ) in res.skipped_at_start
    best = (out / "best.cu").read_text()
    assert "__restrict__" in best and "__launch_bounds__(128)" in best and best == res.best_source
    assert sorted(p.name for p in out.glob("step-*.cu")) == [
        "step-01-restrict-scale_test.cu",
        "step-02-launch_bounds-scale_test.cu",
    ]
    assert [s.index for s in seen] == [1, 2]  # the progress callback saw every step


def test_trace_and_store(curriculum_run) -> None:  # noqa: ANN001
    res, store, out, _ = curriculum_run
    trace = json.loads((out / "trace.json").read_text())
    assert trace["run_id"] == res.run_id and trace["status"] == "improved" and len(trace["steps"]) == 2
    assert trace["steps"][0]["detail"]["static_after"]["restrict"] == 1
    run = store.rows("SELECT * FROM materialization_runs WHERE run_id = ?", [res.run_id])[0]
    assert run["status"] == "improved" and run["provider"] == "offline" and run["budget"] == 3
    steps = store.rows(
        "SELECT * FROM materialization_steps WHERE run_id = ? ORDER BY step_index", [res.run_id]
    )
    assert [(s["skill_id"], s["kept"], s["verdict"]) for s in steps] == [
        ("restrict-scale_test", True, "kept"),
        ("launch_bounds-scale_test", True, "kept"),
    ]
    assert store.scalar("SELECT count(*) FROM kernels WHERE role = 'candidate'") == 2
    assert store.scalar("SELECT count(*) FROM gate_runs") == 3


def test_budget_and_random_order(wl, curriculum_run, tmp_path: Path) -> None:  # noqa: ANN001
    one = materialize(
        wl,
        NAIVE,
        scale_skills(),
        make_provider("offline"),
        1,
        MaterializeOptions(order="random", seed=1, out_dir=tmp_path / "a"),
    )
    two = materialize(
        wl,
        NAIVE,
        scale_skills(),
        make_provider("offline"),
        1,
        MaterializeOptions(order="random", seed=1, out_dir=tmp_path / "b"),
    )
    assert one.gated == 1 and "budget of 1" in one.stop_reason
    assert [s.move for s in one.steps] == [s.move for s in two.steps]


def test_skills_none_tries_operators_in_registry_order(wl, curriculum_run, tmp_path: Path) -> None:  # noqa: ANN001
    from klineage.deopt.registry import operators

    res = materialize(
        wl,
        NAIVE,
        scale_skills(),
        make_provider("offline"),
        2,
        MaterializeOptions(skills_mode="none", out_dir=tmp_path),
    )
    moves = [s.move for s in res.steps]
    assert all(m.startswith("op:") for m in moves) and res.gated == 2 and not res.applied
    names = [o.name for o in operators()]
    assert [names.index(m[3:]) for m in moves] == sorted(names.index(m[3:]) for m in moves)


def test_start_kernel_failing_its_gate(wl, tmp_path: Path) -> None:  # noqa: ANN001
    broken = NAIVE.replace('extern "C" void launch', "void launch_renamed")
    res = materialize(
        wl, broken, scale_skills(), make_provider("offline"), 3, MaterializeOptions(out_dir=tmp_path)
    )
    assert res.status == "start_rejected" and res.gated == 0 and not res.steps
    assert (
        "fails its own gate (parse_error" in res.stop_reason and "nothing to improve from" in res.stop_reason
    )
    assert json.loads((tmp_path / "trace.json").read_text())["status"] == "start_rejected"


def _llm_provider(stub: StubServer, **kw):  # noqa: ANN202
    p = make_provider("anthropic", api_key=KEY, base_url=stub.base_url, backoff_s=0.0, **kw)
    p.llm.sleep = lambda s: None
    return p


def test_anthropic_provider_in_the_loop(wl, curriculum_run, tmp_path: Path) -> None:  # noqa: ANN001
    _, _, out, _ = curriculum_run
    restricted = (out / "step-01-restrict-scale_test.cu").read_text()  # gated already: a cache hit
    script = [
        overloaded(),
        Reply("Sorry, I cannot see a way to do that."),
        Reply(f"Done.\n```cuda\n{restricted}```\n"),
    ]
    store = Store(tmp_path / "runs.duckdb")
    with StubServer(script) as stub:
        res = materialize(
            wl,
            NAIVE,
            scale_skills(),
            _llm_provider(stub),
            1,
            MaterializeOptions(store=store, out_dir=tmp_path / "out"),
        )
        prompts = list(stub.requests)
    first, second = res.steps
    assert first.verdict == "no_candidate" and "no ```cuda code block" in first.reason and not first.gated
    assert (
        second.move == first.move == "restrict-scale_test" and second.kept
    )  # a second try on the same skill
    assert "not kept" not in prompts[-1]["messages"][0]["content"][0]["text"]
    assert (
        "rejected reply: the reply has no ```cuda code block"
        in prompts[-1]["messages"][0]["content"][0]["text"]
    )
    assert res.cost["calls"] == 2 and res.cost["failed_calls"] == 1 and res.cost["spent_usd"] > 0
    rows = store.rows("SELECT * FROM llm_exchanges WHERE run_id = ? ORDER BY created_at", [res.run_id])
    assert len(rows) == 3 and sum(r["error"] is not None for r in rows) == 1
    assert {r["step_index"] for r in rows} == {1, 2}
    assert (
        rows[-1]["cache_read_tokens"] > 0
        and full_prompt(store, rows[-1]["exchange_id"])["system"][0]["cache_control"]
    )
    store.close()
    assert KEY.encode() not in (tmp_path / "runs.duckdb").read_bytes()
    assert KEY not in (tmp_path / "out" / "trace.json").read_text()


def test_anthropic_cost_limit_stops_the_run(wl, curriculum_run, tmp_path: Path) -> None:  # noqa: ANN001
    with StubServer([Reply("no code here " * 200)]) as stub:
        res = materialize(
            wl,
            NAIVE,
            scale_skills(),
            _llm_provider(stub, max_cost_usd=0.001),
            5,
            MaterializeOptions(out_dir=tmp_path),
        )
    assert "cost limit reached" in res.stop_reason and res.status == "no_improvement"
    assert res.steps and res.cost["spent_usd"] >= 0.001
    assert json.loads((tmp_path / "trace.json").read_text())["stop_reason"] == res.stop_reason


def synthetic_skills(tmp_path: Path, n: int = 200) -> list[Skill]:
    """`n` skills that all match the naive scale kernel (restrict and launch_bounds variants), each
    with a long carrier, many risks and a heavy evidence record, stored and loaded back."""
    made = []
    for i in range(n):
        op, pre = ("restrict", "no_alias_at_launch") if i % 2 == 0 else ("launch_bounds", "fixed_block_size")
        s = make_skill(
            op,
            1 + i % 7,
            skill_id=f"{op}-syn{i:03d}",
            pre=[{"name": pre, "holds": True, "reason": f"held in lineage {i} " * 4, "kind": ""}],
        )
        made.append(
            dataclasses.replace(
                s,
                carrier="\n".join(
                    f"-    float acc{j} = x[i * {j}];  // skill {i}\n+    float acc{j} = __ldg(&x[i * {j}]);"
                    for j in range(40)
                ),
                risks=[
                    {"category": "incorrect", "message": f"output mismatch {k} at row {i} " * 8}
                    for k in range(12)
                ],
                evidence={"gate_runs": [f"{i:04d}{k:060d}" for k in range(80)]},
            )
        )
    with Store(tmp_path / "synthetic.duckdb") as store:
        upsert(store, made)
        return load_skills(store)


def test_prompts_stay_under_the_budget_with_200_skills(wl, curriculum_run, tmp_path: Path) -> None:  # noqa: ANN001
    skills = synthetic_skills(tmp_path)
    with StubServer([Reply("no code this time")]) as stub:
        res = materialize(
            wl, NAIVE, skills, _llm_provider(stub), 1, MaterializeOptions(out_dir=tmp_path / "out")
        )
        sent = list(stub.requests)
    assert len(sent) == 3 and all(s.verdict == "no_candidate" for s in res.steps)
    sizes = [prompt_tokens(r) for r in sent]
    assert max(sizes) <= DEFAULT_BUDGET and stub.state.counted >= 3  # counted by the API's count_tokens
    first = res.steps[0]
    cards = sent[0]["system"][1]["text"]
    shown = [c.split(" ", 1)[0] for c in cards.split("\n## ")[1:]]
    assert 10 < len(shown) < 200 and first.move == shown[0]  # cut, the skill being applied kept
    assert shown == first.ranked[: len(shown)]  # the matching skills in curriculum order
    assert "gate_runs" not in cards and "output mismatch" in cards and "... and 9 more" in cards
    assert (
        sent[0]["system"] == sent[1]["system"] and sent[0]["system"][0]["cache_control"]
    )  # one cached prefix
    assert all(s.usage["prompt_tokens"] <= DEFAULT_BUDGET for s in res.steps)


def test_prompt_too_long_for_the_model_is_cut_and_sent_again(wl, curriculum_run, tmp_path: Path) -> None:  # noqa: ANN001
    skills = synthetic_skills(tmp_path)
    store = Store(tmp_path / "runs.duckdb")
    with StubServer([Reply("no code")], context_tokens=30_000) as stub:
        res = materialize(
            wl,
            NAIVE,
            skills,
            _llm_provider(stub),
            1,
            MaterializeOptions(store=store, out_dir=tmp_path / "out", max_proposals=1),
        )
        sizes = [prompt_tokens(r) for r in stub.requests]
    assert res.status == "no_improvement" and res.steps[0].verdict == "no_candidate"
    assert sizes[0] > 30_000 >= sizes[1] and len(sizes) == 2  # refused once, then half the budget
    errors = [r["error"] for r in store.rows("SELECT error FROM llm_exchanges ORDER BY created_at")]
    assert "prompt is too long" in errors[0] and errors[1] is None
    with StubServer(
        [Reply("no code")], context_tokens=500
    ) as stub:  # too long even cut: the run ends cleanly
        res = materialize(
            wl,
            NAIVE,
            skills,
            _llm_provider(stub),
            1,
            MaterializeOptions(store=store, out_dir=tmp_path / "o2"),
        )
    assert res.status == "provider_failed" and "longer than" in res.stop_reason and len(stub.requests) == 2
    row = store.rows("SELECT status, finished_at FROM materialization_runs WHERE run_id = ?", [res.run_id])[0]
    store.close()
    assert row["status"] == "provider_failed" and row["finished_at"] is not None


def test_non_json_reply_ends_the_run_cleanly(wl, curriculum_run, tmp_path: Path) -> None:  # noqa: ANN001
    store = Store(tmp_path / "runs.duckdb")
    with StubServer([not_json()]) as stub:
        res = materialize(
            wl,
            NAIVE,
            scale_skills(),
            _llm_provider(stub, max_attempts=2),
            3,
            MaterializeOptions(store=store, out_dir=tmp_path / "out"),
        )
    assert res.status == "provider_failed" and "failed after 2 attempts" in res.stop_reason
    assert "malformed reply" in res.stop_reason and res.gated == 0 and res.cost["failed_calls"] == 2
    row = store.rows("SELECT status, summary FROM materialization_runs WHERE run_id = ?", [res.run_id])[0]
    store.close()
    assert row["status"] == "provider_failed" and "malformed reply" in row["summary"]["stop_reason"]
    assert json.loads((tmp_path / "out" / "trace.json").read_text())["status"] == "provider_failed"


def restrict_timed_gate(text: str, reference_ms: float | None):  # noqa: ANN201
    """A stand-in cuda gate result: `__restrict__` kernels 20% faster, torch at `reference_ms`."""
    from klineage.gates.result import GateResult, Timing

    ms = 0.8 if "__restrict__" in text else 1.0
    t = Timing(
        ms,
        ms * 0.99,
        ms * 1.01,
        3,
        50,
        reference_median_ms=reference_ms,
        extra={"trial_medians_ms": [ms * 0.999, ms, ms * 1.001], "device": "NVIDIA H200"},
    )
    return GateResult(True, "done", "ok", backend="cuda", timing=t, artifact_id=f"fake{len(text)}")


def test_gpu_branch_keeps_only_faster_candidates(wl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The timing path without a GPU: a stand-in gate times `__restrict__` kernels 20% faster. The
    start kernel's gate times torch; the candidates' gates skip it (`skip_reference`), and the
    run's speedup over torch comes from the start gate's torch time."""
    from klineage.gates.result import GateResult
    from klineage.materialize import loop

    seen: list[tuple[str, bool]] = []

    def fake_gate(text: str, workload, options, name: str = "") -> GateResult:  # noqa: ANN001
        skip = bool(options.extra.get("skip_reference"))
        seen.append((name, skip))
        return restrict_timed_gate(text, reference_ms=None if skip else 0.5)

    monkeypatch.setattr(loop, "gate", fake_gate)
    res = materialize(
        wl,
        NAIVE,
        scale_skills(),
        make_provider("offline"),
        4,
        MaterializeOptions(backend="cuda", out_dir=tmp_path),
    )
    verdicts = {s.move: s.verdict for s in res.steps}
    assert verdicts == {"restrict-scale_test": "kept", "launch_bounds-scale_test": "not_faster"}
    assert res.speedup == pytest.approx(1.25) and res.speedup_vs_torch == pytest.approx(0.625)
    assert res.best_time_ms == pytest.approx(0.8) and res.applied == ["restrict-scale_test"]
    assert "not faster by more than the spread" in res.steps[1].reason
    assert seen[0] == ("start.cu", False) and len(seen) == 3
    assert all(skip for _, skip in seen[1:]), seen


def test_candidate_gate_options_leave_the_cpu_gate_alone() -> None:
    from klineage.gates.backend import GateOptions
    from klineage.materialize.loop import candidate_gate_options

    emu = GateOptions(backend="emu")
    assert candidate_gate_options(emu) is emu
    untimed = GateOptions(backend="cuda", time_kernel=False)
    assert candidate_gate_options(untimed) is untimed
    cuda = GateOptions(backend="cuda", extra={"reps": 5})
    budgets = {"timing_budget_s": 1.0, "slow_budget_s": 1.0}
    assert candidate_gate_options(cuda).extra == {"reps": 5, "skip_reference": True, **budgets}
    assert cuda.extra == {"reps": 5}
    # a head of seconds a launch: its candidates' one timed launch is also their CUPTI trace
    assert candidate_gate_options(cuda, head_ms=1200.0).extra == {
        "reps": 5,
        "skip_reference": True,
        "expect_very_slow": True,
        **budgets,
    }
    # the caller's own budget wins
    own = GateOptions(backend="cuda", extra={"timing_budget_s": 30.0})
    assert candidate_gate_options(own).extra["timing_budget_s"] == 30.0
    assert "expect_very_slow" not in candidate_gate_options(cuda, head_ms=40.0).extra
    assert candidate_gate_options(emu, head_ms=1200.0) is emu


def test_candidate_timing_budgets_cut_only_multi_millisecond_kernels() -> None:
    """Under the loop's budgets a kernel of a millisecond keeps 3 x 50 repetitions, one of 10 ms
    gets 3 x 16 (not 3 x 50: 1.5 s of launches), one of 100 ms 3 x 1 (not 3 x 3)."""
    from klineage.gates.cuda.stats import plan_timing
    from klineage.materialize.loop import CANDIDATE_TIMING

    def plan(ms: float) -> tuple[int, int]:
        p = plan_timing(
            ms, 50, 3, 5, CANDIDATE_TIMING["timing_budget_s"], slow_budget_s=CANDIDATE_TIMING["slow_budget_s"]
        )
        return p.reps, p.trials

    assert plan(1.0) == (50, 3) and plan(10.0) == (16, 3) and plan(100.0) == (1, 3)
    assert plan_timing(100.0, 50, 3, 5, 30.0).reps == 3  # the gate's own rule, for comparison


def enum_block_start() -> str:
    """NAIVE with its block size spelled as an enum: a start kernel the canonicalizer rewrites."""
    return NAIVE.replace(
        "#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\nenum { kBlock = 128 };\n"
    ).replace("<<<(n + 127) / 128, 128, 0, stream>>>", "<<<(n + kBlock - 1) / kBlock, kBlock, 0, stream>>>")


def test_start_kernel_is_read_in_canonical_form(wl, tmp_path: Path) -> None:  # noqa: ANN001
    """A block size spelled as an enum is a compile-time constant only once canonicalized (the
    skills were mined on canonical forms): the run starts from the canonical form, gated but not
    counted in the budget, and launch_bounds' forward site is found there."""
    start = enum_block_start()
    res = materialize(
        wl, start, scale_skills(), make_provider("offline"), 3, MaterializeOptions(out_dir=tmp_path)
    )
    assert res.canonical == ["enum_to_constexpr"] and (tmp_path / "start.canonical.cu").is_file()
    assert "launch_bounds-scale_test" in res.applied and res.gated == len(res.steps) <= 3
    assert "constexpr int kBlock = 128;" in res.best_source and "__launch_bounds__(128)" in res.best_source


@pytest.mark.parametrize(("restrict_ms", "reverted"), [(0.995, True), (0.98, False)])
def test_a_timed_run_never_answers_slower_than_its_start(
    wl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restrict_ms: float, reverted: bool
) -> None:  # noqa: ANN001
    """The start measures 0.99 ms, its canonical form (the first line's head) 1.0 ms: a candidate
    of 0.995 ms is kept against the head but is no faster than the start, so the run answers with
    the start kernel; one of 0.98 ms stays the answer."""
    from klineage.gates.result import GateResult, Timing
    from klineage.materialize import loop

    def fake_gate(text: str, workload, options, name: str = "") -> GateResult:  # noqa: ANN001
        ms = 0.99 if name == "start.cu" else restrict_ms if "__restrict__" in text else 1.0
        t = Timing(
            ms, ms * 0.999, ms * 1.001, 3, 50, extra={"trial_medians_ms": [ms * 0.9995, ms, ms * 1.0005]}
        )
        return GateResult(True, "done", "ok", backend="cuda", timing=t, artifact_id=f"fake{len(text)}")

    monkeypatch.setattr(loop, "gate", fake_gate)
    start = enum_block_start()
    res = materialize(
        wl,
        start,
        scale_skills(),
        make_provider("offline"),
        4,
        MaterializeOptions(backend="cuda", out_dir=tmp_path),
    )
    assert res.canonical and any(s.move == "restrict-scale_test" and s.kept for s in res.steps)
    if reverted:
        assert res.status == "no_improvement" and res.best_source == start and res.applied == []
        assert res.speedup == pytest.approx(1.0) and "the start kernel is the answer" in res.stop_reason
        assert (tmp_path / "best.cu").read_text() == start
    else:
        assert res.status == "improved" and "__restrict__" in res.best_source
        assert res.speedup == pytest.approx(0.99 / 0.98)
