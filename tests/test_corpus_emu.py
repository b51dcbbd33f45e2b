"""Every kernel of the memory-bound expert corpus passes the gate on the CPU emulator (`emu`):
all emu shapes, two seeds, two thread schedules, poisoned outputs, guard zones."""

from __future__ import annotations

import pytest

from klineage.corpus import MEMORY_BOUND, corpus_dir
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate

CORPUS = corpus_dir()
#: gates that took over 10 s each on a 2-core machine (the emulator build dominates)
SLOW = {
    ("softmax", "expert"),
    ("softmax", "naive"),
    ("softmax_fp16", "expert"),
    ("softmax_fp16", "naive"),
    ("layernorm", "expert"),
    ("layernorm", "naive"),
    ("layernorm_bf16", "expert"),
    ("reduce_sum_rows", "naive"),
}
WORKLOADS = MEMORY_BOUND
CASES = [
    pytest.param(w, v, marks=[pytest.mark.slow] if (w, v) in SLOW else [], id=f"{w}-{v}")
    for w in WORKLOADS
    for v in ("expert", "naive")
]


@pytest.mark.parametrize(("workload", "variant"), CASES)
def test_corpus_kernel_passes_the_emu_gate(workload: str, variant: str) -> None:
    result = gate(
        CORPUS / workload / f"{variant}.cu", CORPUS / workload, GateOptions(backend="emu"), use_cache=False
    )
    assert result.accepted, f"{result.category}: {result.message}"
    assert result.category == "ok"
