"""Every held-out naive kernel passes the gate on the CPU emulator (`emu`): all emu shapes, two
seeds, two thread schedules, poisoned outputs, guard zones; nvcc compiles it for sm_90a first.

A gate costs 3-10 s on a shared 2-core machine, so by default a representative subset runs (one
instance per kind of kernel: row reduction, fp16 elementwise, scan, int64 gather, integer
atomics with two launches, 2-D stencil, tiny-matrix transpose); set KLINEAGE_HELDOUT_ALL=1 to
gate all of them (23 kernels: 24 passed in 251 s with -n 2 on the shared 2-core machine,
~85 s of CPU time).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate

HELDOUT = Path(__file__).resolve().parent.parent / "heldout"
ALL = sorted(p.name for p in HELDOUT.iterdir() if (p / "naive.cu").is_file())
REPRESENTATIVE = [
    "logsumexp",
    "gelu_bias",
    "cumsum",
    "embedding",
    "histogram",
    "maxpool2d",
    "transpose_tiny_batched",
]
CASES = ALL if os.environ.get("KLINEAGE_HELDOUT_ALL") else [n for n in REPRESENTATIVE if n in ALL]


def test_representative_subset_exists() -> None:
    assert set(REPRESENTATIVE) <= set(ALL)


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_heldout_naive_passes_the_emu_gate(name: str) -> None:
    result = gate(HELDOUT / name / "naive.cu", HELDOUT / name, GateOptions(backend="emu"), use_cache=False)
    assert result.accepted, f"{result.category}: {result.message}"
    assert result.category == "ok"
