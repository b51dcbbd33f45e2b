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


def test_apply_takes_the_loops_unroll_pragma_along() -> None:
    """A `#pragma unroll` left before the first unrolled statement must precede a loop (nvcc warns
    and ignores it); the forward step removes it with the loop it annotated."""
    op = UnrolledTree()
    text = (
        "__global__ void k(float* x) { float v = x[threadIdx.x];\n"
        "    #pragma unroll\n"
        "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
        "    x[threadIdx.x] = v; }"
    )
    src = CudaSource.from_text(text)
    (site,) = op.find_forward(src)
    out = op.apply(src, site).text
    assert "#pragma" not in out
    assert (
        "    v += __shfl_xor_sync(0xffffffffu, v, 16);\n    v += __shfl_xor_sync(0xffffffffu, v, 8);" in out
    )
