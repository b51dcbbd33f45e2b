"""unrolled_tree: a hand-unrolled, template-guarded halving tree <-> the loop it unrolls."""

from __future__ import annotations

from pathlib import Path

from deopt_parallel_checks import assert_passes, fixture

from klineage.deopt.unrolled_tree import UnrolledTree
from klineage.source.model import CudaSource
from klineage.source.text import normalize


def test_roundtrip_and_gate(tmp_path: Path) -> None:
    op = UnrolledTree()
    src, folder = fixture("unrolled_tree", "warp_sum")
    (site,) = op.find(src)
    assert site.summary == "5 unrolled levels (16 .. 1) guarded by kWidth"
    simpler = op.remove(src, site)
    assert "if (kWidth >= 2 * kl_off) v += __shfl_down_sync(0xffffffffu, v, kl_off);" in simpler.text
    assert op.find(simpler) == []
    assert_passes(simpler.text, folder, tmp_path)
    (fwd,) = op.find_forward(simpler)
    assert all(f.holds for f in op.preconditions(simpler, fwd))
    assert normalize(op.apply(simpler, fwd).text) == normalize(src.text)


def test_unguarded_run_and_what_is_not_a_tree() -> None:
    op = UnrolledTree()
    k = "__global__ void k(float* x) {{ float v = x[0]; {} x[0] = v; }}"
    run = "v += x[8]; v += x[4]; v += x[2]; v += x[1];"
    src = CudaSource.from_text(k.format(run))
    (site,) = op.find(src)
    assert "for (int kl_off = 8; kl_off > 0; kl_off >>= 1)" in op.remove(src, site).text
    assert op.find(CudaSource.from_text(k.format("v += x[8]; v += x[4]; v += x[3]; v += x[1];"))) == []
    assert op.find(CudaSource.from_text(k.format("v += x[4]; v += x[2];"))) == []  # too few levels
