"""Matching, curriculum, judging, prompts, extraction and the offline provider: no gating here."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from klineage.gates.result import GateResult, Timing
from klineage.materialize.curriculum import (
    UNKNOWN_POSITION,
    expected_effect,
    naive_end_position,
    order_curriculum,
    rank,
)
from klineage.materialize.judge import judge
from klineage.materialize.matching import Match, Target, match_skills
from klineage.materialize.prompts import build_prompt
from klineage.materialize.providers import Move, ProposalRequest, make_provider
from klineage.materialize.reply import NoKernel, extract_kernel
from klineage.source.model import CudaSource
from klineage.workload import load_workload
from tests.test_materialize_helpers import SCALE, make_skill, scale_skills

NAIVE = (SCALE / "naive.cu").read_text()
TARGET = Target("scale_test", ("float32",), "cpu-emulator")


def _src(text: str = NAIVE) -> CudaSource:
    return CudaSource.from_text(text, "naive.cu")


def _m(skill) -> Match:  # noqa: ANN001
    return Match(skill, None, [])


# ---- matching ----------------------------------------------------------------------------------
def test_matching_applies_and_explains_skips() -> None:
    report = match_skills(_src(), scale_skills(), TARGET)
    assert sorted(m.skill.operator for m in report.applicable) == ["launch_bounds", "restrict"]
    reasons = report.reasons()
    assert "no forward site for 'pragma_unroll'" in reasons["pragma_unroll-scale_test"]
    for m in report.applicable:
        assert m.sites and m.operator is not None and m.operator.name == m.skill.operator


def test_matching_reports_present_optimization() -> None:
    expert = (SCALE / "expert.cu").read_text()
    report = match_skills(_src(expert), scale_skills(), TARGET)
    assert not report.applicable
    assert "already present" in report.reasons()["restrict-scale_test"]


def test_matching_scope_dtypes_and_platforms() -> None:
    typed = make_skill(
        "restrict",
        dtypes=["float16"],
        skill_id="typed",
        pre=[{"name": "half_inputs", "holds": True, "reason": "fp16", "kind": "Data types"}],
    )
    loose = make_skill("restrict", dtypes=["float16"], skill_id="loose")
    gpu = make_skill(
        "launch_bounds",
        platforms=["NVIDIA A100"],
        skill_id="gpu",
        pre=[{"name": "block_size", "holds": True, "reason": "", "kind": "Hardware"}],
    )
    report = match_skills(_src(), [typed, loose, gpu], Target("scale_test", ("float32",), "NVIDIA H200"))
    reasons = report.reasons()
    assert reasons["typed"].startswith("dtype scope") and "float16" in reasons["typed"]
    assert reasons["gpu"].startswith("platform scope") and "NVIDIA H200" in reasons["gpu"]
    (ok,) = report.applicable
    assert ok.skill.skill_id == "loose" and "may carry over" in ok.notes[0]
    # the emulator validates correctness only: a GPU skill still applies when the target is the emulator
    assert [m.skill.skill_id for m in match_skills(_src(), [gpu], TARGET).applicable] == ["gpu"]


def test_matching_failing_precondition_and_unknown_operator() -> None:
    aliased = NAIVE.replace(
        "scale<<<(n + 127) / 128, 128, 0, stream>>>(x, y, n)",
        "scale<<<(n + 127) / 128, 128, 0, stream>>>(y, y, n)",
    )
    ghost = make_skill("no_such_operator", skill_id="ghost")
    report = match_skills(_src(aliased), [*scale_skills(), ghost], TARGET)
    reasons = report.reasons()
    assert (
        "no_alias_at_launch" in reasons["restrict-scale_test"]
        and "preconditions fail" in reasons["restrict-scale_test"]
    )
    assert "only an LLM provider" in reasons["ghost"]
    llm = match_skills(_src(aliased), [ghost], TARGET, mechanical_only=False)
    assert [m.skill.skill_id for m in llm.applicable] == ["ghost"]


# ---- curriculum --------------------------------------------------------------------------------
def test_curriculum_depth_then_effect() -> None:
    a = make_skill("restrict", 2, skill_id="a")
    b = make_skill("ldg", 1, skill_id="b")
    c = make_skill("fast_math", 2, time_ratio=1.5, skill_id="c")
    d = make_skill("launch_bounds", 2, resources={"registers": -8}, skill_id="d")
    order = [m.skill.skill_id for m in order_curriculum([_m(a), _m(b), _m(c), _m(d)])]
    assert order == ["b", "c", "d", "a"]
    assert expected_effect(c) > expected_effect(d) > expected_effect(a) == 0.0
    assert naive_end_position(make_skill("x", 4)) == pytest.approx(0.04)


def test_curriculum_position_is_the_median_fraction_of_the_lineage() -> None:
    """A skill early in one short lineage but late in two long ones sits late; a skill without
    lineage steps sits after every known one."""
    s = replace(
        make_skill("pragma_unroll", 1, skill_id="u"),
        provenance=[
            {"lineage_depth": 3, "backward_step": 5},  # 3 of 7 steps: 0.43
            {"lineage_depth": 36, "backward_step": 5},  # 36 of 40: 0.90
            {"lineage_depth": 30, "backward_step": 11},
        ],
    )  # 30 of 40: 0.75
    assert naive_end_position(s) == pytest.approx(0.75)
    early = replace(
        make_skill("block_per_row", 1, skill_id="b"), provenance=[{"lineage_depth": 7, "backward_step": 34}]
    )  # 7 of 40
    assert [m.skill.skill_id for m in order_curriculum([_m(s), _m(early)])] == ["b", "u"]
    s = replace(s, provenance=[{"lineage_depth": 2}])
    assert naive_end_position(s) == UNKNOWN_POSITION


def test_curriculum_prior_skills_come_first() -> None:
    late = make_skill("launch_bounds", 1, prior=["restrict"], skill_id="late")
    early = make_skill("restrict", 5, skill_id="early")
    assert [m.skill.skill_id for m in order_curriculum([_m(late), _m(early)])] == ["early", "late"]
    # once restrict is applied, the prerequisite is met and depth decides again
    assert [m.skill.skill_id for m in order_curriculum([_m(late), _m(early)], ["restrict"])] == [
        "late",
        "early",
    ]
    # lineages that disagree (each lists the other) constrain nothing
    x = make_skill("ldg", 1, prior=["fast_math"], skill_id="x")
    y = make_skill("fast_math", 2, prior=["ldg"], skill_id="y")
    assert [m.skill.skill_id for m in order_curriculum([_m(y), _m(x)])] == ["x", "y"]


def test_random_order_is_seeded() -> None:
    ms = [_m(make_skill(f"op{i}", i, skill_id=f"s{i}")) for i in range(8)]
    one = [m.key for m in rank(ms, "random", random.Random(3))]
    two = [m.key for m in rank(list(reversed(ms)), "random", random.Random(3))]
    assert one == two and sorted(one) == sorted(m.key for m in ms)
    assert one != [m.key for m in rank(ms, "random", random.Random(4))]
    with pytest.raises(ValueError, match="unknown order"):
        rank(ms, "alphabetical", random.Random(0))


# ---- judging -----------------------------------------------------------------------------------
def _ok(ms: float | None = None, medians: list[float] | None = None) -> GateResult:
    t = Timing(ms, ms * 0.9, ms * 1.5, 3, 50, extra={"trial_medians_ms": medians or [ms]}) if ms else None
    return GateResult(True, "done", "ok", timing=t)


def test_judge_cpu_static_effect() -> None:
    from klineage.deopt.registry import get_operator

    op = get_operator("restrict")
    with_restrict = NAIVE.replace(
        "const float* x, float* y, int n) {",
        "const float* __restrict__ x, float* __restrict__ y, int n) {",
        1,
    )
    assert judge(NAIVE, with_restrict, _ok(), _ok(), op).kept
    v = judge(NAIVE, NAIVE.replace("2.0f", "2.00f"), _ok(), _ok(), op)
    assert not v.kept and v.verdict == "no_effect"
    bad = GateResult(False, "correctness", "mismatch", "y differs")
    assert judge(NAIVE, with_restrict, _ok(), bad, op).verdict == "rejected"


def test_judge_gpu_needs_more_than_the_spread() -> None:
    cur = _ok(1.0, [0.98, 1.0, 1.02])
    assert judge("a", "b", cur, _ok(0.9, [0.9, 0.91, 0.9]), None).kept
    v = judge("a", "b", cur, _ok(0.97, [0.96, 0.97, 0.99]), None)
    assert not v.kept and v.verdict == "not_faster" and v.detail["spread_ms"] == pytest.approx(0.04)


def test_a_time_of_one_launch_is_not_decided_by_noise() -> None:
    """A kernel timed once (a second or more a launch) has no measured spread: a 0.01% difference
    (two processes' times of one kernel differ by more) is not a gain, a 1% one is."""

    def once(ms: float) -> GateResult:
        return GateResult(
            True, "done", "ok", timing=Timing(ms, ms, ms, 1, 1, extra={"trial_medians_ms": [ms]})
        )

    v = judge("a", "b", once(7415.08), once(7414.37), None)
    assert not v.kept and v.detail["spread_ms"] == pytest.approx(0.005 * 7415.08)
    assert judge("a", "b", once(7415.08), once(7340.0), None).kept
    # a measured spread stays the measured one
    assert judge("a", "b", _ok(1.0, [1.0, 1.0002]), _ok(0.999, [0.999, 0.9991]), None).kept


# ---- prompts and extraction ---------------------------------------------------------------------
def test_prompt_static_parts_first_and_cached() -> None:
    wl = load_workload(SCALE)
    skill = scale_skills()[0]
    req = ProposalRequest(
        wl,
        NAIVE,
        Move(skill.skill_id, skill, None, ()),
        "step-01 was rejected: mismatch",
        2,
        "emu",
        scale_skills(),
    )
    p = build_prompt(req)
    (rules, r_cache), (cards, c_cache) = p.system
    assert r_cache and c_cache
    assert wl.c_signature() in rules and "never allocates" in rules and "CPU emulator" in rules
    assert all(s.skill_id in cards for s in scale_skills()) and "before/after sketch" in cards
    task = p.messages[0]["content"][0]["text"]
    assert NAIVE.strip() in task and "step-01 was rejected: mismatch" in task and skill.skill_id in task
    free = build_prompt(ProposalRequest(wl, NAIVE, Move("free"), "", 1, "cuda", []))
    assert len(free.system) == 1 and "faster by more than the timing spread" in free.system[0][0]


def test_extract_kernel() -> None:
    code = 'extern "C" void launch(const float* x, float* y, int n, cudaStream_t s) {}'
    reply = f"Here.\n```python\nprint(1)\n```\n```cuda\nold();\n```\nFinal:\n```cuda\n{code}\n```\ndone"
    assert extract_kernel(reply) == code + "\n"
    with pytest.raises(NoKernel, match=r"no ```cuda code block \(found only python"):
        extract_kernel("```python\nprint(1)\n```")
    with pytest.raises(NoKernel, match="no ```cuda code block"):
        extract_kernel("I think the kernel is fine as it is.")
    with pytest.raises(NoKernel, match="no extern"):
        extract_kernel("```cuda\n__global__ void k() {}\n```")
    with pytest.raises(NoKernel, match="not closed"):
        extract_kernel(f"```cuda\n{code}\n")


# ---- offline provider ---------------------------------------------------------------------------
def test_offline_provider_is_deterministic() -> None:
    wl = load_workload(SCALE)
    provider = make_provider("offline")
    report = match_skills(_src(), scale_skills(), TARGET)
    for m in report.applicable:
        req = ProposalRequest(wl, NAIVE, Move(m.key, m.skill, m.operator, tuple(m.sites)))
        one, two = provider.propose(req), provider.propose(req)
        assert one.source is not None and one.source == two.source and one.source != NAIVE
        assert len(m.operator.find(_src(one.source))) == 1
    none = provider.propose(ProposalRequest(wl, NAIVE, Move("free")))
    assert none.source is None and "needs an operator" in none.note


def test_generic_platform_names_match_any_gpu() -> None:
    hw = [{"name": "fixed_block_size", "holds": True, "reason": "", "kind": "Hardware"}]
    generic = make_skill("launch_bounds", platforms=["cuda"], pre=hw, skill_id="g")
    named = make_skill("launch_bounds", platforms=["nvidia h200"], pre=hw, skill_id="n")
    report = match_skills(_src(), [generic, named], Target("scale_test", ("float32",), "NVIDIA H200"))
    assert [m.skill.skill_id for m in report.applicable] == ["g", "n"]


def test_operator_bug_skips_its_skills(monkeypatch: pytest.MonkeyPatch) -> None:
    from klineage.deopt.registry import get_operator

    def boom(src):  # noqa: ANN001, ANN202
        raise IndexError("bad node")

    monkeypatch.setattr(get_operator("restrict"), "find_forward", boom)
    report = match_skills(_src(), scale_skills(), TARGET)
    assert "failed on this code: IndexError: bad node" in report.reasons()["restrict-scale_test"]
    assert [m.skill.operator for m in report.applicable] == ["launch_bounds"]


def test_llm_may_take_a_skill_without_a_forward_finder(monkeypatch: pytest.MonkeyPatch) -> None:
    from klineage.deopt.registry import get_operator

    op = get_operator("restrict")
    monkeypatch.setattr(type(op), "mechanical_apply", False)
    monkeypatch.setattr(op, "find_forward", lambda src: [])
    skill = scale_skills()[0]
    assert "no mechanical forward step" in match_skills(_src(), [skill], TARGET).reasons()[skill.skill_id]
    (m,) = match_skills(_src(), [skill], TARGET, mechanical_only=False).applicable
    assert not m.sites and "the model picks sites" in m.notes[-1]
