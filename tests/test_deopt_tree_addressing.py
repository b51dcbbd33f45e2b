"""tree_addressing: sequential <-> strided-index addressing of a shared-memory reduction tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.base import Refused
from klineage.deopt.tree_addressing import TreeAddressing
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource
from klineage.source.text import normalize

CANON = Path(__file__).parent / "data" / "canon" / "block_sum"

KERNEL = """
constexpr int THREADS = {n};
__global__ void tree(const float* x, float* out) {{
    __shared__ float v[THREADS];
    unsigned int tid = threadIdx.x;
    v[tid] = x[blockIdx.x * THREADS + tid];
    __syncthreads();
{loop}
    if (tid == 0) out[blockIdx.x] = v[0];
}}
"""
SEQ = """    for (unsigned int s = THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) v[tid] = fmaxf(v[tid], v[tid + s]);
        __syncthreads();
    }"""
STRIDED = """    for (unsigned int s = 1; s < THREADS; s *= 2) {
        int index = 2 * s * tid;
        if (index < THREADS) {
            v[index] += v[index + s];
        }
        __syncthreads();
    }"""


def test_roundtrip_on_a_canonical_kernel_passes_the_gate(tmp_path: Path) -> None:
    """The block barrier of the fixture is spelled cg::sync: only its canonical form shows the tree."""
    op = TreeAddressing()
    src = CudaSource.from_file(CANON / "expert.cu")
    assert op.find(src) == []
    canon = canonical_form(src).source
    (site,) = op.find(canon)
    simpler = op.remove(canon, site)
    assert (
        "unsigned int index = 2 * s * threadIdx.x;" in simpler.text  # canon reads the `t` alias through
        and "if (index < kBlock) buf[index] += buf[index + s];" in simpler.text
    )
    assert op.find(simpler) == []
    assert_passes(simpler.text, CANON, tmp_path)
    (fwd,) = op.find_forward(simpler)
    assert normalize(op.apply(simpler, fwd).text) == normalize(canon.text)


def test_max_tree_and_strided_variant() -> None:
    op = TreeAddressing()
    src = CudaSource.from_text(KERNEL.format(n=256, loop=SEQ))
    (site,) = op.find(src)
    assert "fmaxf" in site.summary
    assert "if (index < THREADS) v[index] = fmaxf(v[index], v[index + s]);" in op.remove(src, site).text
    strided = CudaSource.from_text(KERNEL.format(n=256, loop=STRIDED))
    (fwd,) = op.find_forward(strided)
    assert fwd.details["form"] == "strided"
    out = op.apply(strided, fwd).text
    assert (
        "for (unsigned int s = THREADS / 2; s > 0; s >>= 1)" in out
        and "if (tid < s) v[tid] += v[tid + s];" in out
    )


def test_refuses_a_tree_that_is_not_a_power_of_two() -> None:
    op = TreeAddressing()
    src = CudaSource.from_text(KERNEL.format(n=96, loop=SEQ))
    (site,) = op.find(src)
    with pytest.raises(Refused, match="power_of_two_tree"):
        op.remove(src, site)


def test_the_strided_index_takes_a_name_the_function_does_not_use() -> None:
    """A kernel that already has an `index` gets another name: the tree must not shadow it."""
    op = TreeAddressing()
    src = CudaSource.from_text(
        KERNEL.format(n=256, loop=SEQ).replace("unsigned int tid", "int index = 0; unsigned int tid")
    )
    (site,) = op.find(src)
    out = op.remove(src, site).text
    assert "unsigned int kl_index = 2 * s * tid;" in out
    (fwd,) = op.find_forward(CudaSource.from_text(out))
    assert fwd.details["form"] == "strided"
