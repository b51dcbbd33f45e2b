"""The memorization check: disguised copies of every expert kernel are flagged, different operators
and the held-out naive kernels are not, the thresholds sit between the two with margin, renaming
never lowers the AST measure, and carriers stay a small fraction of their source kernel."""

from __future__ import annotations

import keyword
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from klineage.memorization import (
    AST_THRESHOLD,
    CARRIER_MAX_FRACTION,
    CARRIER_MIN_TOKENS,
    JACCARD_THRESHOLD,
    RUN_FRACTION,
    RUN_THRESHOLD,
    Calibration,
    calibrate,
    carrier_after_text,
    check_carriers,
    check_kernel,
    disguise,
    expert_sources,
    longest_common_run,
    normalized_tokens,
    rename_identifiers,
    similarity,
    tokens,
)
from klineage.skills import Skill
from klineage.source.parser import error_nodes, parse
from klineage.walker import carrier_diff

REPO = Path(__file__).resolve().parent.parent
EXPERTS = expert_sources(REPO)


@pytest.fixture(scope="module")
def cal() -> Calibration:
    return calibrate(REPO, seeds=(0, 1, 2))


def test_the_corpus_is_all_there() -> None:
    assert len(EXPERTS) >= 12
    assert {"softmax", "topk", "row_sum", "vector_add"} <= set(EXPERTS)


def test_tokens_drop_comments_and_keep_literals_whole() -> None:
    text = '// a comment\n__global__ void k(float* y) { /* x */ y[0] = 1.5f; printf("a b"); }\n'
    toks = tokens(text)
    assert "comment" not in " ".join(toks) and "x" not in toks
    assert "1.5f" in toks and '"a b"' in toks
    norm = normalized_tokens(text)
    assert norm.count("ID") == 3 and norm.count("LIT") == 3 and "printf" in norm and "float" in norm


def test_identical_and_plain_copies_are_copies() -> None:
    src = EXPERTS["softmax"]
    s = similarity(src, src)
    assert (s.jaccard5, s.ast, s.is_copy) == (1.0, 1.0, True)
    assert s.longest_run == len(normalized_tokens(src))


def test_disguise_renames_and_still_parses() -> None:
    for name, src in EXPERTS.items():
        d = disguise(src, seed=3)
        # no new parse errors (a file may already hold constructs the grammar does not know)
        assert len(error_nodes(parse(d))) <= len(error_nodes(parse(src))), name
        assert d != src
        # renaming wrecks raw tokens: the raw 5-gram Jaccard alone could not catch this copy
        assert similarity(src, d).jaccard5 < 0.5, name


def test_every_disguised_expert_is_flagged(cal: Calibration) -> None:
    assert len(cal.copies) == 3 * len(EXPERTS)
    missed = [(n, s) for n, s in cal.copies if not s.is_copy]
    assert not missed
    # the AST measure alone catches every one of them, with margin
    assert min(s.ast for _, s in cal.copies) >= AST_THRESHOLD + 0.1


def test_different_operators_are_not_flagged(cal: Calibration) -> None:
    assert len(cal.different_ops) >= 50
    flagged = [(a, b, s) for a, b, s in cal.different_ops if s.is_copy]
    assert not flagged
    assert max(s.ast for *_, s in cal.different_ops) <= AST_THRESHOLD - 0.1
    assert max(s.jaccard5 for *_, s in cal.different_ops) <= JACCARD_THRESHOLD - 0.1
    # a long shared run between two different operators (one author's helper) stays a small share
    long_runs = [s.run_fraction for *_, s in cal.different_ops if s.longest_run >= RUN_THRESHOLD]
    assert max(long_runs, default=0.0) <= RUN_FRACTION - 0.05


def test_heldout_naive_kernels_are_not_copies(cal: Calibration) -> None:
    assert len(cal.heldout_vs_expert) >= 22 * len(EXPERTS)
    assert not [(a, b) for a, b, s in cal.heldout_vs_expert if s.is_copy]


def test_check_kernel_reports_the_closest_source() -> None:
    report = check_kernel(disguise(EXPERTS["topk"], seed=7), EXPERTS)
    assert report.is_copy and report.copies == ["topk"]
    assert report.closest is not None and report.closest[0] == "topk"
    d = report.to_dict()
    assert d["is_copy"] and set(d["per_source"]) == set(EXPERTS)
    naive = (REPO / "heldout" / "logsumexp" / "naive.cu").read_text()
    assert not check_kernel(naive, EXPERTS).is_copy


def test_a_pasted_chunk_inside_other_code_is_caught_by_the_run() -> None:
    # half of the topk expert pasted after an unrelated kernel: the run flags it
    src = EXPERTS["topk"]
    lines = src.splitlines()
    chunk = "\n".join(lines[: len(lines) // 2])
    other = (REPO / "heldout" / "cumsum" / "naive.cu").read_text()
    s = similarity(other + "\n" + chunk, src)
    assert s.ast < AST_THRESHOLD and s.longest_run >= RUN_THRESHOLD and s.run_fraction >= RUN_FRACTION
    assert s.is_copy


_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: (
        not keyword.iskeyword(n)
        and n
        not in {
            "int",
            "float",
            "if",
            "for",
            "do",
            "return",
            "const",
            "void",
            "char",
            "long",
            "short",
            "auto",
            "case",
            "else",
            "while",
        }
    )
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(EXPERTS)), prefix=_NAME, seed=st.integers(0, 2**16))
def test_renaming_never_lowers_the_ast_measure_below_the_threshold(name: str, prefix: str, seed: int) -> None:
    rng = random.Random(seed)
    fresh = iter(range(1 << 30))
    renamed = rename_identifiers(EXPERTS[name], lambda _: f"{prefix}_{rng.randrange(10**6)}_{next(fresh)}")
    s = similarity(EXPERTS[name], renamed)
    assert s.ast >= AST_THRESHOLD and s.is_copy


@settings(max_examples=200, deadline=None)
@given(a=st.lists(st.sampled_from("abc"), max_size=14), b=st.lists(st.sampled_from("abc"), max_size=14))
def test_longest_common_run_is_exact(a: list[str], b: list[str]) -> None:
    best = 0
    for i in range(len(a)):
        for j in range(len(b)):
            k = 0
            while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
                k += 1
            best = max(best, k)
    assert longest_common_run(a, b) == best


# ---- carriers -----------------------------------------------------------------------------


def _skill(carrier: str, *workloads: str) -> Skill:
    return Skill(
        skill_id="s-1",
        operator="op",
        intent="",
        carrier=carrier,
        provenance=[{"workload": w} for w in workloads],
    )


def test_carrier_after_side() -> None:
    diff = "--- before.cu\n+++ after.cu\n@@ -1,3 +1,3 @@\n int a;\n-int b;\n+int c;\n"
    assert carrier_after_text(diff).splitlines() == ["int a;", "int c;"]


def test_a_small_carrier_passes_and_a_whole_kernel_fails() -> None:
    src = EXPERTS["softmax"]
    small = carrier_diff(src.replace("__restrict__", ""), src)
    whole = carrier_diff(
        (REPO / "expert_kernels" / "softmax" / "naive.cu").read_text(), src, max_lines=10**6, max_run=None
    )
    checks = check_carriers([_skill(small, "softmax"), _skill(whole, "softmax")], EXPERTS)
    assert [c.ok for c in checks] == [True, False]
    assert checks[0].fraction <= CARRIER_MAX_FRACTION < 0.9 <= checks[1].fraction


def test_long_runs_of_added_lines_are_elided_on_the_card() -> None:
    """A step that brings back a whole code path (grid_reduce on reduce_sum restores the vectorized
    branch with the grid) shows the run's ends, not the path: the whole naive -> expert diff of
    softmax, elided, falls from ~1.0 of the kernel to under the bar."""
    src = EXPERTS["softmax"]
    naive = (REPO / "expert_kernels" / "softmax" / "naive.cu").read_text()
    full = carrier_diff(naive, src, max_lines=10**6, max_run=None)
    elided = carrier_diff(naive, src, max_lines=10**6)
    runs = re.findall(r"// \.\.\. \((\d+) more added lines\)", elided)
    assert runs and all(int(n) > 12 - 8 for n in runs)
    assert len(elided.splitlines()) + sum(int(n) - 1 for n in runs) == len(full.splitlines())
    (c_full, c_elided) = check_carriers([_skill(full, "softmax"), _skill(elided, "softmax")], EXPERTS)
    assert c_elided.fraction < CARRIER_MAX_FRACTION < c_full.fraction
    short = "--- before.cu\n+++ after.cu\n@@ -1 +1,3 @@\n int a;\n+int b;\n+int c;"
    assert carrier_diff("int a;", "int a;\nint b;\nint c;") == short  # short runs stay whole


def test_a_merged_skill_is_charged_against_its_own_source_only() -> None:
    src = EXPERTS["row_sum"]
    carrier = carrier_diff(src.replace("#pragma unroll", ""), src)
    checks = {
        c.workload: c for c in check_carriers([_skill(carrier, "row_sum", "vector_add", "nope")], EXPERTS)
    }
    assert set(checks) == {"row_sum", "vector_add"}
    assert checks["row_sum"].carrier_tokens > 0 and checks["vector_add"].carrier_tokens == 0
    # two #pragma unroll sites with context are half of this 26-line kernel, but fewer tokens
    # than a flagged copy's run: too few to carry a copy
    assert checks["row_sum"].fraction > CARRIER_MAX_FRACTION
    assert checks["row_sum"].carrier_tokens < CARRIER_MIN_TOKENS
    assert all(c.ok for c in checks.values())
