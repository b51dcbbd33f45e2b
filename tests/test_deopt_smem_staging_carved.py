"""smem_staging on tiles carved out of one dynamic shared buffer (flash-attention-minimal's idiom,
in a kernel written here): `extern __shared__ float buf[]; float* mine = buf; float* rows =
&buf[tile];`, each tile a flat row per thread (`tile[threadIdx.x * D + x]` in a store loop over
x < D). Each tile reads as a shared array of its own; the thread-private tile needs no barrier."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.smem_staging import SmemStaging
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource

OP = SmemStaging()
DATA = Path(__file__).resolve().parent / "data" / "deopt" / "smem_staging" / "carved_gram"
EXPERT = (DATA / "expert.cu").read_text()


def _canon(text: str) -> CudaSource:
    return canonical_form(CudaSource.from_text(text, "gram.cu")).source


def _reasons(src: CudaSource) -> dict[str, str]:
    return {s.details["array"]: s.details["reason"] for s in OP.find(src)}


def test_both_carved_tiles_are_staging_sites() -> None:
    """After canon the first tile is the buffer itself (`mine` read as `buf`), the second the carve."""
    assert _reasons(_canon(EXPERT)) == {"buf": "", "rows": ""}


def test_each_tile_goes_and_both_steps_pass_the_gate(tmp_path: Path) -> None:
    src = _canon(EXPERT)
    opts = GateOptions(backend="emu")
    for array in ("rows", "buf"):
        site = next(s for s in OP.find(src) if s.details["array"] == array)
        assert all(p.holds for p in OP.removal_preconditions(src, site))
        src = OP.remove(src, site)
        r = gate(src.text, DATA, opts, name=f"{array}.cu", use_cache=False, cache_root=tmp_path)
        assert r.accepted, (array, r.category, r.message)
    body = src.text.split('extern "C"')[0]
    assert "rows" not in body and "buf[threadIdx" not in body
    assert "extern __shared__ float buf[];" in body  # the buffer's declaration stays: it is the launch's
    assert "X[base + (u) * D + (x)]" in body  # the shared tile's reads: the row thread u stored


@pytest.mark.parametrize(
    ("change", "array", "reason"),
    [
        # the thread-private tile read by another thread: that needs the barrier it lacks
        ("acc += mine[threadIdx.x * D + x]", "buf", "no __syncthreads()"),
        # a store loop that does not cover the thread's row of D elements
        ("for (int x = 0; x < D; x++) {\n        rows", "rows", "not a thread index"),
    ],
)
def test_a_tile_it_cannot_read_back_is_refused(change: str, array: str, reason: str) -> None:
    repl = {
        "acc += mine[threadIdx.x * D + x]": "acc += mine[u * D + x]",
        "for (int x = 0; x < D; x++) {\n        rows": "for (int x = 1; x < D; x++) {\n        rows",
    }[change]
    assert change in EXPERT
    assert reason in _reasons(_canon(EXPERT.replace(change, repl)))[array]


def test_a_rebound_carve_is_not_a_tile() -> None:
    text = EXPERT.replace("    __syncthreads();\n", "    __syncthreads();\n    rows += 0;\n", 1)
    assert "rows" not in _reasons(_canon(text))
