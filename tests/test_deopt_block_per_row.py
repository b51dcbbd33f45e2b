"""block_per_row: one thread per row <-> one block per row (threads stride the row, warp butterfly
plus one shared slot per warp).

Backward on frozen lineage states (the block-per-row kernels the corpus walks stop at: softmax's
online kernel, rmsnorm's streaming kernel, reduce_sum_rows' unrolled block kernel), forward on
naive kernels, the gate on both directions, a gate rejection when the cross-warp step is left
out, the refusals (rows cached in registers, persistent grids, a loop that stores and exchanges,
a grid that is not a row count), and a property over random reduction mixes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings

from klineage.deopt.block_per_row import BlockPerRow
from klineage.deopt.registry import get_operator, operators
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource
from tests.row_kernels import LOOP_MIXES, row_kernel_body

OP = BlockPerRow()
REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "deopt" / "block_per_row"


def _remove_only(src: CudaSource) -> CudaSource:
    (site,) = OP.find(src)
    return OP.remove(src, site)


def _forward(src: CudaSource) -> CudaSource:
    (site,) = OP.find_forward(src)
    return OP.apply(src, site)


def _kernel_text(src: CudaSource, name: str) -> str:
    k = next(k for k in src.kernels if k.name == name)
    return src.text_of(src.node_for(k))


def _removal_failures(text: str) -> dict[str, str]:
    src = CudaSource.from_text(text, "k.cu")
    k = src.kernels[0]
    site = OP.site(src, src.node_for(k), "k", kernel=k.name)
    return {f.name: f.reason for f in OP.removal_preconditions(src, site) if not f.holds}


def _block_kernel(body: str, grid: str = "M", extra: str = "") -> str:
    return f"""
{extra}
__global__ void k(const float* x, float* y, int M, int N) {{
    __shared__ float red[8];
    const int row = blockIdx.x;
    const float* xr = x + (size_t)row * N;
{body}
}}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {{
    k<<<{grid}, 256, 0, s>>>(x, y, M, N);
}}
"""


_SUM_TAIL = """    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    acc = red[0];
    for (int w = 1; w < 8; ++w) acc += red[w];
    if (threadIdx.x == 0) y[row] = acc;"""


def test_registered_as_tiling_after_warp_per_row() -> None:
    names = [o.name for o in operators()]
    assert get_operator("block_per_row").category == "tiling" and OP.mechanical_apply
    assert names.index("warp_per_row") < names.index("block_per_row") < names.index("size_dispatch")


def test_backward_on_softmax_online_kernel() -> None:
    src = CudaSource.from_file(DATA / "softmax_online_block.cu")
    (site,) = OP.find(src)
    assert site.details["kernel"] == "softmax_online"
    out = OP.remove(src, site)
    k = _kernel_text(out, "softmax_online")
    assert "__shared__" not in k and "__sync" not in k and "threadIdx.x" not in k.split("if (kl_row")[1]
    assert "const int kl_row = blockIdx.x * blockDim.x + threadIdx.x;\n    if (kl_row >= M) return;" in k
    assert k.count("for (int col = 0; col < N; col += W)") == 3
    assert "softmax_online<T, VEC><<<(M + 255) / 256, 256, 0, stream>>>(x, y, M, N);" in out.text
    assert OP.find(out) == []


def test_backward_replaces_an_all_reduce_call_by_its_value() -> None:
    """rmsnorm: `ss = block_allreduce_sum<kBlockThreads>(ss0 + ss1, red)` over a group of one is
    `ss0 + ss1`; reduce_sum_rows: unrolled block strides collapse to unit steps."""
    rms = _remove_only(CudaSource.from_file(DATA / "rmsnorm_streaming_block.cu"))
    assert "const float ss = (ss0 + ss1);" in rms.text
    rows = _remove_only(CudaSource.from_file(DATA / "row_sum_block.cu"))
    k = _kernel_text(rows, "row_sum_block")
    assert "double acc = (acc0 + acc1);" in k and "int i = 0;" in k
    assert "for (; i + (kUnroll - 1) < N; i += kUnroll)" in k and "v[u] = xr[i + u];" in k
    assert "if (lane == 0) out[row]" in k and "const int lane = 0;" in k  # thread 0 of a group of one


@pytest.mark.parametrize(
    ("body", "grid", "fact", "words"),
    [
        (
            "    float v[4];\n    for (int c = 0; c < 4; ++c) v[c] = xr[c * 256 + threadIdx.x];\n"
            "    float acc = v[0] + v[1] + v[2] + v[3];\n" + _SUM_TAIL,
            "M",
            "thread_only_strides",
            "register-cached",
        ),
        (
            "    float acc = 0.f;\n    for (int j = threadIdx.x; j < N; j += blockDim.x) acc += xr[j];\n"
            + _SUM_TAIL,
            "(M + 1) / 2",
            "grid_is_row_count",
            "not an argument",
        ),
        (
            "    float acc = 0.f;\n    for (int j = threadIdx.x; j < N; j += blockDim.x) {\n        acc += xr[j];\n"
            "        red[0] = acc;\n        y[row * N + j] = red[1];\n    }\n" + _SUM_TAIL,
            "M",
            "exchange_only_reductions",
            "mixes stores",
        ),
        (
            "    float acc = 0.f;\n    for (int j = threadIdx.x; j < N; j += blockDim.x) acc += xr[j];\n"
            "    red[threadIdx.x >> 5] = acc;\n    __syncthreads();\n    const float total = red[0];\n"
            "    if (threadIdx.x == 0) y[row] = total;",
            "M",
            "exchange_only_reductions",
            "is declared",
        ),
        (
            "    float acc = 0.f;\n    for (int j = threadIdx.x + gridDim.x; j < N; j += blockDim.x) acc += xr[j];\n"
            + _SUM_TAIL,
            "M",
            "one_dimensional_rows",
            "gridDim.x",
        ),
    ],
)
def test_backward_refuses(body: str, grid: str, fact: str, words: str) -> None:
    failed = _removal_failures(_block_kernel(body, grid))
    assert fact in failed and words in failed[fact], failed


def test_backward_accepts_the_plain_block_sum() -> None:
    text = _block_kernel(
        "    float acc = 0.f;\n    for (int j = threadIdx.x; j < N; j += blockDim.x) acc += xr[j];\n"
        + _SUM_TAIL
    )
    assert _removal_failures(text) == {}
    out = _remove_only(CudaSource.from_text(text, "k.cu"))
    assert (
        "for (int j = 0; j < N; j += 1) acc += xr[j];" in out.text
        and "red" not in out.text.split("launch")[0]
    )
    assert "if (0 == 0) y[row] = acc;" in out.text
    assert len(OP.find_forward(out)) == 1  # a thread-per-row kernel again


def test_forward_on_softmax_naive() -> None:
    out = _forward(CudaSource.from_file(REPO / "expert_kernels" / "softmax" / "naive.cu"))
    t = out.text
    assert "int row = blockIdx.x;" in t and t.count("for (int j = threadIdx.x; j < N; j += blockDim.x)") == 3
    assert t.count("__syncthreads();") == 4 and t.count("__shared__ float kl_s[32];") == 2
    assert "mx = fmaxf(mx, kl_s[kl_w]);" in t and "sum += kl_s[kl_w];" in t
    assert "softmax_naive<<<M, 256, 0, stream>>>" in t
    assert len(OP.find(out)) == 1 and OP.find_forward(out) == []


def test_forward_guards_per_row_stores_with_thread_zero() -> None:
    out = _forward(CudaSource.from_file(REPO / "expert_kernels" / "reduce_sum_rows" / "naive.cu"))
    assert re.search(r"if \(threadIdx\.x == 0\) out\[row\] = ", out.text), out.text


def test_forward_refuses_without_a_row_guard() -> None:
    text = """
__global__ void k(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float s = 0.f;
        for (int j = 0; j < N; ++j) s += x[(size_t)row * N + j];
        y[row] = s;
    }
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t st) {
    k<<<(M + 255) / 256, 256, 0, st>>>(x, y, M, N);
}
"""
    src = CudaSource.from_text(text, "k.cu")
    (site,) = OP.find_forward(src)
    failed = {f.name for f in OP.preconditions(src, site) if not f.holds}
    assert "row_count_at_launch" in failed or "one_thread_per_row" in failed


def test_gate_accepts_both_directions(tmp_path: Path) -> None:
    opts = GateOptions(backend="emu")
    back = _remove_only(CudaSource.from_file(DATA / "softmax_online_block.cu"))
    r = gate(
        back.text,
        REPO / "expert_kernels" / "softmax",
        opts,
        name="thread.cu",
        use_cache=False,
        cache_root=tmp_path,
    )
    assert r.accepted, (r.category, r.message)
    wl = REPO / "heldout" / "argmax"  # an (value, position) pair across warps
    fwd = _forward(CudaSource.from_file(wl / "naive.cu"))
    assert "kl_sv[kl_w] > best || (kl_sv[kl_w] == best && kl_si[kl_w] < where)" in fwd.text
    r = gate(fwd.text, wl, opts, name="block.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)


def test_gate_rejects_the_forward_step_without_its_cross_warp_fold(tmp_path: Path) -> None:
    """Each warp's butterfly alone leaves eight different partial sums in a block of 256: the
    shared-memory fold is what makes the row's sum; the gate must see the difference."""
    wl = REPO / "expert_kernels" / "reduce_sum_rows"
    out = _forward(CudaSource.from_file(wl / "naive.cu")).text
    cut = re.sub(r"\{  // across the warps.*?\n\s*\}\n", "", out, flags=re.S)
    assert cut != out and "kl_s" not in cut
    r = gate(cut, wl, GateOptions(backend="emu"), name="nofold.cu", use_cache=False, cache_root=tmp_path)
    assert not r.accepted and r.category == "mismatch", (r.category, r.message)


@settings(max_examples=30, deadline=None)
@given(LOOP_MIXES)
def test_forward_then_backward_on_random_reduction_mixes(loops: list[list[str]]) -> None:
    """Random thread-per-row kernels with 0-3 reductions per loop: forward writes one butterfly and
    one shared fold per reduction and strides every loop by the block; backward takes all of it
    out again and leaves a kernel the forward step accepts."""
    body, n = row_kernel_body(loops)
    text = f"""
__global__ void k(const float* x, float* y, int M, int N) {{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
{body}
}}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {{
    k<<<(M + 255) / 256, 256, 0, s>>>(x, y, M, N);
}}
"""
    out = _forward(CudaSource.from_text(text, "k.cu"))
    assert out.text.count("__shfl_xor_sync") == n and out.text.count("__shared__") == n
    assert out.text.count("j += blockDim.x") == len(loops)
    assert "if (threadIdx.x == 0) y[row] =" in out.text
    back = _remove_only(out)
    assert "__shfl" not in back.text and "__shared__" not in back.text and "__syncthreads" not in back.text
    assert OP.find(back) == [] and len(OP.find_forward(back)) == 1


def test_roundtrip_on_rmsnorm_with_vector_steps() -> None:
    """rmsnorm's thread-per-row state walks its row in packs (`col += W`): the forward step
    starts thread t at `t * W` and steps by `blockDim.x * W`, and re-derives the block kernel."""
    back = _remove_only(CudaSource.from_file(DATA / "rmsnorm_streaming_block.cu"))
    out = _forward(back)
    k = _kernel_text(out, "rmsnorm_streaming")
    assert k.count("for (int col = threadIdx.x * W; col < N; col += blockDim.x * W)") == 2
    assert k.count("__shared__ float kl_s[32];") == 2  # ss0 and ss1, each folded across the warps
    assert "rmsnorm_streaming<VEC><<<M, 256, 0, stream>>>" in out.text
    assert len(OP.find(out)) == 1


def test_a_step_written_in_the_loop_is_not_a_stride() -> None:
    text = """
__global__ void k(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    int w = 1;
    float s = 0.f;
    for (int j = 0; j < N; j += w) { s += x[(size_t)row * N + j]; w = 2; }
    y[row] = s;
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t st) {
    k<<<(M + 255) / 256, 256, 0, st>>>(x, y, M, N);
}
"""
    src = CudaSource.from_text(text, "k.cu")
    (site,) = OP.find_forward(src)
    failed = {f.name: f.reason for f in OP.preconditions(src, site) if not f.holds}
    assert "not a counting loop" in failed.get("rows_independent", ""), failed


def test_rows_shorter_than_the_block_take_no_block() -> None:
    """softmax_bf16_short after row_stats: rows of 100 under blocks of 256 leave most of each
    block idle, so at its bench size the block-per-row step is refused (a warp per row fits);
    a bench size with rows of 4096 keeps it."""
    from klineage.deopt.row_stats import RowStats
    from klineage.source.canon import canonical_form

    naive = REPO / "heldout" / "softmax_bf16_short" / "naive.cu"
    src = canonical_form(CudaSource.from_file(naive)).source
    rows = RowStats()
    src = rows.apply(src, rows.find_forward(src)[0])
    (site,) = OP.find_forward(src)
    short = {f.name: f for f in OP.shape_preconditions(src, site, [(None, None, 2097152, 100)])}
    assert not short["row_fills_the_block"].holds and "100 < 256" in short["row_fills_the_block"].reason
    assert OP.shape_preconditions(src, site, [(None, None, 2048, 4096)]) == []


def test_the_grid_may_be_a_launcher_local_holding_the_row_count() -> None:
    """`const int rows_grid = M; k<<<rows_grid, ...>>>(..., M, ...)`: the grid is the row count
    through a never-reassigned local of the launcher."""
    body = (
        "    float acc = 0.f;\n    for (int j = threadIdx.x; j < N; j += blockDim.x) acc += xr[j];\n"
        + _SUM_TAIL
    )
    text = _block_kernel(body, "rows_grid").replace(
        "    k<<<rows_grid", "    const int rows = M;\n    const int rows_grid = rows;\n    k<<<rows_grid"
    )
    assert _removal_failures(text) == {}
    reassigned = text.replace("k<<<rows_grid", "rows_grid = 2 * M;\n    k<<<rows_grid").replace(
        "const int rows_grid", "int rows_grid"
    )
    assert "grid_is_row_count" in _removal_failures(reassigned)


def test_a_loop_variable_name_reused_by_another_loop_is_another_variable() -> None:
    """llm.c names every loop `i`: the fold's `++i` does not step the block-strided `i`."""
    body = (
        "    float acc = 0.f;\n    for (int i = threadIdx.x; i < N; i += blockDim.x) acc += xr[i];\n"
        "    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;\n    __syncthreads();\n"
        "    acc = red[0];\n    for (int i = 1; i < 8; ++i) acc += red[i];\n"
        "    if (threadIdx.x == 0) y[row] = acc;"
    )
    assert _removal_failures(_block_kernel(body)) == {}


_DECLARED_FOLD = """    float acc = 0.f;
    for (int j = threadIdx.x; j < N; j += blockDim.x) acc += xr[j];
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float v = red[0];
        for (int w = 1; w < 8; ++w) v += red[w];
        red[0] = v;
    }
    __syncthreads();
    acc = red[0];
    if (threadIdx.x == 0) y[row] = acc;"""


def test_a_thread_zero_fold_with_a_declared_accumulator_goes_and_gates(tmp_path: Path) -> None:
    """llm.c's thread-0 fold declares its accumulator from slot 0; it feeds only the fold loop and
    the slot store, so it goes with them and the thread-per-row kernel sums the row itself."""
    text = _block_kernel(_DECLARED_FOLD)
    assert _removal_failures(text) == {}
    out = _remove_only(CudaSource.from_text(text, "k.cu"))
    assert "red[" not in out.text.split("__global__")[1].split("extern")[0]
    wl = REPO / "expert_kernels" / "reduce_sum_rows"
    r = gate(out.text, wl, GateOptions(backend="emu"), name="fold.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)


def test_a_declared_broadcast_reads_the_value_the_warps_stored(tmp_path: Path) -> None:
    """`float total = red[0];` after a thread-0 fold: one thread's total is the value it would have
    stored in its warp's slot."""
    body = _DECLARED_FOLD.replace("    acc = red[0];\n    if (threadIdx.x == 0) y[row] = acc;", "")
    body += "\n    const float total = red[0];\n    if (threadIdx.x == 0) y[row] = total;"
    text = _block_kernel(body)
    assert _removal_failures(text) == {}
    out = _remove_only(CudaSource.from_text(text, "k.cu"))
    assert "const float total = acc;" in out.text
    wl = REPO / "expert_kernels" / "reduce_sum_rows"
    r = gate(out.text, wl, GateOptions(backend="emu"), name="bcast.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)
