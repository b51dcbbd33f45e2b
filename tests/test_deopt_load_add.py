"""load_add: several elements added per thread during the load, before a block's reduction tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture

from klineage.deopt.base import Refused
from klineage.deopt.load_add import LoadAdd
from klineage.source.model import CudaSource

OP = LoadAdd()


def test_template_loop_removed_block_grows_and_roundtrips(tmp_path: Path) -> None:
    """`for (it < ITEMS) acc += in[base + it * THREADS]` with the block offset scaled by ITEMS: one
    element per thread, the block (and THREADS) times ITEMS, ITEMS bound to 1; the forward step
    restores an add during the load at the same index."""
    src, folder = fixture("load_add", "items_chunk")
    (site,) = OP.find(src)
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    simpler = OP.remove(src, site)
    assert "const int base = blockIdx.x * THREADS + threadIdx.x;" in simpler.text
    assert "    acc += in[base];\n" in simpler.text and "#pragma" not in simpler.text
    assert "chunk_totals<512, 1><<<B, 512, 0, stream>>>" in simpler.text
    assert OP.find(simpler) == []
    assert_passes(simpler.text, folder, tmp_path)
    (fwd,) = OP.find_forward(simpler)
    assert all(p.holds for p in OP.preconditions(simpler, fwd)), OP.preconditions(simpler, fwd)
    again = OP.apply(simpler, fwd)
    assert "acc += in[base] + in[base + THREADS];" in again.text
    assert "chunk_totals<256, 1><<<B, 256, 0, stream>>>" in again.text
    assert len(OP.find(again)) == 1
    assert_passes(again.text, folder, tmp_path, "again.cu")


def test_forward_on_one_element_per_thread_block_sum(tmp_path: Path) -> None:
    src, folder = fixture("load_add", "warp_chunk")
    assert OP.find(src) == []
    (fwd,) = OP.find_forward(src)
    assert all(p.holds for p in OP.preconditions(src, fwd))
    out = OP.apply(src, fwd)
    assert "const int idx = blockIdx.x * (blockDim.x * 2) + threadIdx.x;" in out.text
    assert "float v = inp[idx] + inp[idx + blockDim.x];" in out.text
    assert "<<<B, 128, 0, stream>>>" in out.text
    assert_passes(out.text, folder, tmp_path)
    (back,) = OP.find(out)
    assert OP.remove(out, back).text.replace("\n", "") == src.text.replace("\n", "")


_NAIVE = """
__global__ void k(const float* x, float* y, int n) {{
    __shared__ float buf[256];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    {load}
    __syncthreads();
    for (unsigned int s = {start}; s > 0; s >>= 1) {{
        if (t < s) buf[t] {combine};
        __syncthreads();
    }}
    if (t == 0) y[blockIdx.x] = buf[0];
}}
void launch(const float* x, float* y, int n, int b) {{ k<<<b, {block}>>>(x, y, n); }}
"""


@pytest.mark.parametrize(
    ("case", "failing"),
    [
        (dict(load="buf[t] = x[i];", start="blockDim.x / 2", combine="+= buf[t + s]", block="256"), None),
        (
            dict(
                load="buf[t] = x[i];",
                start="blockDim.x / 2",
                combine="= fmaxf(buf[t], buf[t + s])",
                block="256",
            ),
            "sum_combine",
        ),
        (
            dict(
                load="buf[t] = i < n ? x[i] : 0.0f;",
                start="blockDim.x / 2",
                combine="+= buf[t + s]",
                block="256",
            ),
            "index_only_loads",
        ),
        (
            dict(load="buf[t] = x[i];", start="128", combine="+= buf[t + s]", block="256"),
            "extent_follows_block",
        ),
        (
            dict(load="buf[t] = x[i];", start="blockDim.x / 2", combine="+= buf[t + s]", block="32"),
            "block_size",
        ),
    ],
)
def test_forward_preconditions_read_structure(case: dict[str, str], failing: str | None) -> None:
    src = CudaSource.from_text(_NAIVE.format(**case))
    (site,) = OP.find_forward(src)
    bad = {p.name for p in OP.preconditions(src, site) if not p.holds}
    assert bad == ({failing} if failing else set())
    if failing:
        with pytest.raises(Refused):
            OP.apply(src, site)
    else:
        assert "buf[t] = x[i] + x[i + blockDim.x];" in OP.apply(src, site).text


def test_removal_grows_a_fixed_shared_buffer_and_refuses_one_sized_at_launch(tmp_path: Path) -> None:
    """One slot per thread: `buf[128]` written at the thread's slot grows with the block (128 ->
    256); an `extern __shared__` buffer is sized by the launch, which the step does not know."""
    text = _NAIVE.format(
        load="buf[t] = x[i] + x[i + blockDim.x];",
        start="blockDim.x / 2",
        combine="+= buf[t + s]",
        block="128",
    ).replace("blockIdx.x * blockDim.x + threadIdx.x", "blockIdx.x * (blockDim.x * 2) + threadIdx.x")
    src = CudaSource.from_text(text.replace("buf[256]", "buf[128]"))
    (site,) = OP.find(src)
    facts = {p.name: p for p in OP.removal_preconditions(src, site)}
    assert facts["shared_covers_block"].holds and "grow" in facts["shared_covers_block"].reason
    out = OP.remove(src, site).text
    assert "__shared__ float buf[256];" in out and "k<<<b, 256>>>" in out and "buf[t] = x[i];" in out
    ext = CudaSource.from_text(text.replace("__shared__ float buf[256];", "extern __shared__ float buf[];"))
    (site,) = OP.find(ext)
    with pytest.raises(Refused, match="shared_covers_block"):
        OP.remove(ext, site)


def test_canonical_form_template_sizes_as_body_constexprs(tmp_path: Path) -> None:
    """The canonical form fixes the launch's template arguments as constexprs in the kernel's body;
    the removal reads them as the block size and the factor and edits them with the launch."""
    from klineage.source.canon import canonical_form

    raw, folder = fixture("load_add", "items_chunk")
    src = canonical_form(raw).source
    assert "constexpr int THREADS = 128;" in src.text and "constexpr int ITEMS = 4;" in src.text
    (site,) = OP.find(src)
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    simpler = OP.remove(src, site)
    assert "constexpr int THREADS = 512;" in simpler.text and "constexpr int ITEMS = 1;" in simpler.text
    assert "<<<B, 512, 0, stream>>>" in simpler.text and "acc += in[base];" in simpler.text
    assert_passes(simpler.text, folder, tmp_path)
    (fwd,) = OP.find_forward(simpler)
    assert all(p.holds for p in OP.preconditions(simpler, fwd)), OP.preconditions(simpler, fwd)
    again = OP.apply(simpler, fwd)
    assert "constexpr int THREADS = 256;" in again.text and "<<<B, 256, 0, stream>>>" in again.text
    assert_passes(again.text, folder, tmp_path, "again.cu")
