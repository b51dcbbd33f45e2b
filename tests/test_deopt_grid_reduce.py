"""grid_reduce: a single-output reduction spread over a grid (grid-stride partials, a block
all-reduce, one partial per block, one block folding the partials) <-> one thread walking the data.

Backward on reduce_sum's frozen lineage root (the two-pass kernel pair every other operator has
already stripped), forward on the naive kernel and on the backward result (the roundtrip), the emu
gate on each, a gate rejection when the forward all-reduce is left out, the refusals (atomics into
the output, a running store, two values per block, partials not indexed by the block, a final pass
of several blocks, an early return in the loop) and a property over random sum/max/min loops."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.grid_reduce import GridReduce
from klineage.deopt.registry import get_operator, operators
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource
from klineage.source.text import normalize
from tests.row_kernels import UPDATES

OP = GridReduce()
REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "deopt" / "grid_reduce"
WL = REPO / "expert_kernels" / "reduce_sum"


def _back() -> CudaSource:
    src = CudaSource.from_file(DATA / "reduce_sum_root.cu")
    (site,) = OP.find(src)
    return OP.remove(src, site)


def _forward(src: CudaSource, kernel: str | None = None) -> CudaSource:
    (site,) = [s for s in OP.find_forward(src) if kernel is None or s.details["kernel"] == kernel]
    return OP.apply(src, site)


def _kernel_text(src: CudaSource, name: str) -> str:
    k = next(k for k in src.kernels if k.name == name)
    return src.text_of(src.node_for(k))


def _gate(text: str, tmp_path: Path, name: str):
    return gate(text, WL, GateOptions(backend="emu"), name=name, use_cache=False, cache_root=tmp_path)


def test_registered_as_tiling_after_size_dispatch() -> None:
    names = [o.name for o in operators()]
    assert get_operator("grid_reduce").category == "tiling" and OP.mechanical_apply
    assert names.index("block_per_row") < names.index("size_dispatch") < names.index("grid_reduce")


def test_backward_on_the_reduce_sum_root_leaves_one_thread() -> None:
    src = CudaSource.from_file(DATA / "reduce_sum_root.cu")
    (site,) = OP.find(src)
    assert site.details["kernel"] == "block_partial_sums" and "final_sum" in site.summary
    facts = {f.name: f for f in OP.removal_preconditions(src, site)}
    assert all(f.holds for f in facts.values()), [f.reason for f in facts.values() if not f.holds]
    assert {
        "thread_only_strides",
        "one_value_per_block",
        "final_single_block",
        "no_atomics",
        "launched_branch_only",
    } <= set(facts)
    out = OP.remove(src, site)
    assert "block_partial_sums<false><<<1, 1, 0, stream>>>(x, partials, N);" in out.text
    assert "final_sum<<<1, 1, 0, stream>>>(partials, 1, out);" in out.text
    for name, loop in (
        ("block_partial_sums", "for (int i = 0; i < n; ++i) acc0 += static_cast<double>(x[i]);"),
        ("final_sum", "for (int i = 0; i < count; ++i) v += partials[i];"),
    ):
        k = _kernel_text(out, name)
        assert loop in k
        assert not re.search(
            r"threadIdx|blockIdx|blockDim|gridDim|__shared__|__sync|__shfl|block_reduce_sum", k
        ), k
    assert "partials[0] = s;" in out.text and "out[0] = __double2float_rn(v);" in out.text
    assert "if constexpr" not in _kernel_text(out, "block_partial_sums")  # the launched branch only
    assert "kThreads, 0)" in out.text  # the launcher keeps its constants
    assert OP.find(out) == []


def test_gate_accepts_the_backward_result(tmp_path: Path) -> None:
    r = _gate(_back().text, tmp_path, "one_thread.cu")
    assert r.accepted, (r.category, r.message)


def test_forward_on_naive_reduce_sum(tmp_path: Path) -> None:
    """One data loop: a grid of blocks accumulates grid-strided slices (several elements per thread
    at large N), each block all-reduces and stores one partial, one block folds the partials in a
    fixed order and then runs what followed the loop."""
    naive = CudaSource.from_file(WL / "naive.cu")
    (site,) = OP.find_forward(naive)
    assert site.summary == "kernel sum_naive: one thread reduces (forward: a grid and a final pass)"
    out = OP.apply(naive, site)
    first = _kernel_text(out, "sum_naive_partials")
    assert (
        "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += x[i];"
        in first
    )
    assert "__shfl_xor_sync(0xffffffffu, acc, kl_off)" in first and "__shared__ double kl_s[32];" in first
    assert "if (threadIdx.x == 0) kl_part_sum_naive_acc[blockIdx.x] = acc;" in first and "out[0]" not in first
    final = _kernel_text(out, "sum_naive")
    assert "kl_b < kl_blocks_sum_naive; kl_b += blockDim.x) { acc += kl_part_sum_naive_acc[kl_b]; }" in final
    assert "if (threadIdx.x == 0) out[0] = (float)acc;" in final
    assert "__device__ double kl_part_sum_naive_acc[1024];" in out.text
    assert "sum_naive_partials<<<kl_grid_blocks(N), 256, 0, stream>>>(x, out, N);" in out.text
    assert "sum_naive<<<1, 256, 0, stream>>>(x, out, N);" in out.text
    assert "kernel sum_naive: one-block reduction" in [s.summary for s in OP.find(out)]
    r = _gate(out.text, tmp_path, "grid.cu")
    assert r.accepted, (r.category, r.message)


def test_forward_keeps_one_block_when_a_second_loop_reads_the_first() -> None:
    """Mean, then the squared deviations from it: one pass of partials cannot compute the second
    loop, so the forward writes the one-block form (every loop block-strided)."""
    text = """
__global__ void mv(const float* x, float* y, int n) {
    float s = 0.f;
    for (int i = 0; i < n; ++i) s += x[i];
    const float mu = s / n;
    float q = 0.f;
    for (int i = 0; i < n; ++i) q += (x[i] - mu) * (x[i] - mu);
    y[0] = q / n;
}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t st) { mv<<<1, 1, 0, st>>>(x, y, n); }
"""
    src = CudaSource.from_text(text, "k.cu")
    (site,) = OP.find_forward(src)
    assert site.summary.endswith("(forward: one block)")
    out = OP.apply(src, site)
    assert "_partials" not in out.text and out.text.count("i += blockDim.x") == 2
    assert "mv<<<1, 256, 0, st>>>" in out.text


def test_forward_grid_form_on_another_idiom(tmp_path: Path) -> None:
    """An unsigned counter, a per-element temporary, a sum and a max in one loop, stores through
    `*result` and `result[1]`: one partial array per reduction, both folded in the final pass."""
    folder = DATA / "sumsq_abs"
    src = CudaSource.from_file(folder / "naive.cu")
    (site,) = OP.find_forward(src)
    out = OP.apply(src, site)
    assert "__device__ float kl_part_stats_serial_peak[1024];" in out.text
    assert "__device__ double kl_part_stats_serial_ss[1024];" in out.text
    assert (
        "peak = fmaxf(peak, kl_part_stats_serial_peak[kl_b]); ss += kl_part_stats_serial_ss[kl_b];"
        in out.text
    )
    assert "if (threadIdx.x == 0) *result = (float)sqrt(ss);" in out.text
    assert "stats_serial_partials<<<kl_grid_blocks(((unsigned)n)), 256, 0, stream>>>" in out.text
    r = gate(
        out.text, folder, GateOptions(backend="emu"), name="grid.cu", use_cache=False, cache_root=tmp_path
    )
    assert r.accepted, (r.category, r.message)


def test_forward_declares_the_wider_block_in_launch_bounds(tmp_path: Path) -> None:
    """A one-thread kernel may declare `__launch_bounds__(1)` (the materializer's `none` mode adds it
    before it widens the block): kept, the 256-thread launch fails on a GPU (cudaErrorInvalidValue)
    and the emu gate refuses it; the forward declares the block it launches instead."""
    text = (
        (WL / "naive.cu")
        .read_text()
        .replace("__global__ void sum_naive", "__global__ void __launch_bounds__(1) sum_naive")
    )
    out = _forward(CudaSource.from_text(text, "naive_lb.cu"))
    assert "__launch_bounds__(256) sum_naive(" in out.text and "__launch_bounds__(1)" not in out.text
    assert "__launch_bounds__(256) sum_naive_partials(" in out.text
    assert _gate(out.text, tmp_path, "block_lb.cu").accepted
    stale = out.text.replace("__launch_bounds__(256)", "__launch_bounds__(1)")
    r = _gate(stale, tmp_path, "block_stale_lb.cu")
    assert r.category == "crash" and "exceeds __launch_bounds__(1)" in r.message, r.message


@pytest.mark.parametrize("kernel", ["block_partial_sums", "final_sum"])
def test_roundtrip_on_each_kernel_of_the_backward_result(kernel: str, tmp_path: Path) -> None:
    """The walker's roundtrip: apply on the simpler state passes the gate and `find` sees more
    of the optimization than before (a one-block reduction)."""
    back = _back()
    again = _forward(back, kernel)
    assert f"{kernel}<" in again.text and ("<<<1, 256, 0, stream>>>" in again.text)
    assert len(OP.find(again)) > len(OP.find(back))
    r = _gate(again.text, tmp_path, f"rt_{kernel}.cu")
    assert r.accepted, (r.category, r.message)


def test_gate_rejects_the_forward_step_without_its_all_reduce(tmp_path: Path) -> None:
    """Without the butterfly and the fold of the warps' slots, thread 0 stores only its own
    partial (1/256 of the sum): the gate must see the difference."""
    out = _forward(CudaSource.from_file(WL / "naive.cu")).text
    cut = re.sub(r"\n\s*for \(int kl_off.*?\n", "\n", out)
    cut = re.sub(r"\{  // across the warps.*?\n\s*\}\n", "", cut, flags=re.S)
    assert cut != out and "kl_s" not in cut and "__shfl" not in cut
    r = _gate(cut, tmp_path, "noreduce.cu")
    assert not r.accepted and r.category == "mismatch", (r.category, r.message)


_HELPER = """
__device__ float block_sum(float v) {
    __shared__ float s[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += s[w];
    __syncthreads();
    return t;
}
"""


def _pair(store: str, final_grid: str = "1", loop: str = "acc += x[i];") -> str:
    return (
        _HELPER
        + f"""
__global__ void partial(const float* x, float* partials, float* out, int n) {{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = gridDim.x * blockDim.x;
    float acc = 0.f;
    for (int i = tid; i < n; i += stride) {{ {loop} }}
    const float s = block_sum(acc);
{store}
}}
__global__ void fold(const float* partials, int count, float* out) {{
    float v = 0.f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) v += partials[i];
    v = block_sum(v);
    if (threadIdx.x == 0) out[0] = v;
}}
extern "C" void launch(const float* x, float* out, float* partials, int n, cudaStream_t st) {{
    int blocks = (n + 255) / 256;
    partial<<<blocks, 256, 0, st>>>(x, partials, out, n);
    fold<<<{final_grid}, 256, 0, st>>>(partials, blocks, out);
}}
"""
    )


def _removal_failures(text: str) -> dict[str, str]:
    src = CudaSource.from_text(text, "k.cu")
    sites = [s for s in OP.find(src) if s.details["kernel"] == "partial"]
    assert len(sites) == 1, [s.summary for s in OP.find(src)]
    return {f.name: f.reason for f in OP.removal_preconditions(src, sites[0]) if not f.holds}


def test_backward_accepts_the_plain_pair() -> None:
    src = CudaSource.from_text(_pair("    if (threadIdx.x == 0) partials[blockIdx.x] = s;"), "k.cu")
    assert _removal_failures(src.text) == {}
    (site,) = OP.find(src)
    out = OP.remove(src, site)
    assert "partial<<<1, 1, 0, st>>>(x, partials, out, n);" in out.text
    assert "fold<<<1, 1, 0, st>>>(partials, 1, out);" in out.text
    assert "for (int i = 0; i < n; ++i) { acc += x[i]; }" in out.text
    assert "const float s = acc;" in out.text and "partials[0] = s;" in out.text


@pytest.mark.parametrize(
    ("store", "final_grid", "loop", "fact", "words"),
    [
        ("    if (threadIdx.x == 0) atomicAdd(out, s);", "1", "acc += x[i];", "no_atomics", "atomicAdd"),
        (
            "    if (threadIdx.x == 0) { partials[blockIdx.x] = s; partials[gridDim.x + blockIdx.x] = acc; }",
            "1",
            "acc += x[i];",
            "one_value_per_block",
            "stores 2 values",
        ),
        (
            "    if (threadIdx.x == 0) partials[2 * blockIdx.x] = s;",
            "1",
            "acc += x[i];",
            "one_value_per_block",
            "indexed by 2*blockIdx.x",
        ),
        ("    partials[blockIdx.x] = s;", "1", "acc += x[i];", "one_value_per_block", "not done by thread 0"),
        (
            "    if (threadIdx.x == 0) partials[blockIdx.x] = s;",
            "2",
            "acc += x[i];",
            "final_single_block",
            "not a single block",
        ),
        (
            "    if (threadIdx.x == 0) partials[blockIdx.x] = s;",
            "1",
            "if (x[i] != x[i]) return; acc += x[i];",
            "thread_only_strides",
            "leaves early",
        ),
        (
            "    if (threadIdx.x == 0) partials[blockIdx.x] = s;",
            "1",
            "acc = acc * x[i];",
            "thread_only_strides",
            "not a sum/max/min reduction",
        ),
    ],
)
def test_backward_refuses(store: str, final_grid: str, loop: str, fact: str, words: str) -> None:
    failed = _removal_failures(_pair(store, final_grid, loop))
    assert fact in failed and words in failed[fact], failed


def _one_thread(loop_body: str) -> str:
    return f"""
__global__ void k(const float* x, float* y, int n) {{
    float acc = 0.f;
    for (int i = 0; i < n; ++i) {{ {loop_body} }}
    y[0] = acc;
}}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t st) {{
    k<<<1, 1, 0, st>>>(x, y, n);
}}
"""


@pytest.mark.parametrize(
    ("loop_body", "fact", "words"),
    [
        ("acc += x[i]; y[i + 1] = acc;", "sum_max_min_reductions", "running value"),
        ("if (x[i] < 0.f) return; acc += x[i];", "sum_max_min_reductions", "leaves early"),
        ("atomicAdd(y, x[i]);", "no_block_cooperation", "atomics"),
    ],
)
def test_forward_refuses(loop_body: str, fact: str, words: str) -> None:
    src = CudaSource.from_text(_one_thread(loop_body), "k.cu")
    (site,) = OP.find_forward(src)
    failed = {f.name: f.reason for f in OP.preconditions(src, site) if not f.holds}
    assert fact in failed and words in failed[fact], failed


def test_forward_needs_a_one_thread_launch() -> None:
    text = _one_thread("acc += x[i];").replace("k<<<1, 1, 0, st>>>", "k<<<1, 32, 0, st>>>")
    assert OP.find_forward(CudaSource.from_text(text, "k.cu")) == []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from(sorted(UPDATES)), min_size=1, max_size=3), min_size=1, max_size=3))
def test_forward_then_backward_on_random_reductions(loops: list[list[str]]) -> None:
    """One thread, 1-3 loops of 1-3 sum/max/min reductions each, one output. One loop: the two-pass
    form (a partial array per reduction). Several: one butterfly and one shared fold per reduction,
    every loop strided by the block, the store left to thread 0; the result is a one-block
    reduction, and backward gives the kernel back."""
    body, n = [], 0
    for li, kinds in enumerate(loops):
        ups = []
        for kind in kinds:
            d, u = UPDATES[kind]
            body.append("    " + d.format(v=f"r{n}"))
            ups.append(u.format(v=f"r{n}", c=f"{li + 1}.0f"))
            n += 1
        body.append("    for (int j = 0; j < N; ++j) { " + " ".join(ups) + " }")
    body.append("    y[0] = " + " + ".join(f"r{i}" for i in range(n)) + ";")
    nl = "\n"
    text = f"""
__global__ void k(const float* x, float* y, int N) {{
    const size_t base = 0;
{nl.join(body)}
}}
extern "C" void launch(const float* x, float* y, int N, cudaStream_t s) {{
    k<<<1, 1, 0, s>>>(x, y, N);
}}
"""
    src = CudaSource.from_text(text, "k.cu")
    out = _forward(src)
    if len(loops) == 1:  # one data loop: the two-pass form, each reduction all-reduced in both passes
        assert out.text.count("__shfl_xor_sync") == 2 * n and out.text.count("__device__") == n + 1
        assert (
            "k_partials<<<kl_grid_blocks(N), 256, 0, s>>>" in out.text and "k<<<1, 256, 0, s>>>" in out.text
        )
        assert "if (threadIdx.x == 0) y[0] =" in out.text
        return
    assert out.text.count("__shfl_xor_sync") == n and out.text.count("__shared__") == n
    assert out.text.count("j += blockDim.x") == len(loops)
    assert "if (threadIdx.x == 0) y[0] =" in out.text and "k<<<1, 256, 0, s>>>" in out.text
    (site,) = OP.find(out)
    back = OP.remove(out, site)
    assert normalize(back.text) == normalize(text)
