"""warp_per_row: one thread per row <-> one warp per row (lanes stride the row, shuffle all-reduce).

Forward on the corpus and held-out naive kernels (the gate accepts the result), backward on the
reduce_sum_rows expert's warp kernel, the roundtrip, and the kernels it must refuse: a running
value (cumsum), a pair-carrying argmax, a column walk, a sum with a start value, a local array
filled in the loop, a block that is not whole warps."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator
from klineage.deopt.warp_per_row import WarpPerRow
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import failed_forward
from tests.row_kernels import LOOP_MIXES, row_kernel_body

OP = WarpPerRow()
REPO = Path(__file__).resolve().parent.parent


def _forward(src: CudaSource) -> CudaSource:
    (site,) = OP.find_forward(src)
    return OP.apply(src, site)


def _failed(text: str) -> dict[str, str]:
    return dict(failed_forward(OP, text))


def _kernel(body: str, block: str = "256", params: str = "const float* x, float* y, int M, int N") -> str:
    return f"""
__global__ void k({params}) {{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
{body}
}}
extern "C" void launch({params}, cudaStream_t s) {{
    const int threads = {block};
    k<<<(M + threads - 1) / threads, threads, 0, s>>>(x, y, M, N);
}}
"""


def test_registered_as_tiling() -> None:
    assert get_operator("warp_per_row").category == "tiling" and OP.mechanical_apply


def test_forward_on_softmax_naive() -> None:
    src = CudaSource.from_file(REPO / "expert_kernels" / "softmax" / "naive.cu")
    out = _forward(src)
    t = out.text
    assert "int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;" in t
    assert "const int lane = threadIdx.x & 31;" in t
    assert t.count("for (int j = lane; j < N; j += 32)") == 3
    assert "mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, kl_off));" in t
    assert "sum += __shfl_xor_sync(0xffffffffu, sum, kl_off);" in t
    assert "<<<((M + 255) / 256) * 32, 256, 0, stream>>>" in t
    assert len(OP.find(out)) == 1 and OP.find_forward(out) == []


def test_per_row_stores_go_to_lane_zero_and_local_values_stay() -> None:
    text = _kernel("""    float s = 0.0f;
    float v[2];
    for (int j = 0; j < N; ++j) s += x[base + j];
    v[0] = s;
    if (s > 0.f) y[row] = v[0]; else y[row] = -v[0];""")
    t = _forward(CudaSource.from_text(text, "k.cu")).text
    assert "    v[0] = s;" in t  # every lane's own copy
    assert "if (s > 0.f) { if (lane == 0) y[row] = v[0]; } else { if (lane == 0) y[row] = -v[0]; }" in t


@pytest.mark.parametrize(
    ("body", "fact", "words"),
    [
        (
            """    float run = 0.0f;
    for (int j = 0; j < N; ++j) { run += x[base + j]; y[base + j] = run; }""",
            "rows_independent",
            "running value",
        ),
        (
            """    float best = -INFINITY; int where = 0;
    for (int j = 0; j < N; ++j) if (x[base + j] >= best) { best = x[base + j]; where = j; }
    y[row] = (float)where;""",
            "rows_independent",
            "not a sum/max/min",
        ),
        (
            """    float s = 0.0f;
    for (int j = 0; j < N; ++j) s += x[(size_t)j * M + row];
    y[row] = s;""",
            "rows_independent",
            "does not walk a row",
        ),
        (
            """    float s = 1.0f;
    for (int j = 0; j < N; ++j) s += x[base + j];
    y[row] = s;""",
            "rows_independent",
            "32 times",
        ),
        (
            """    float v[64];
    for (int j = 0; j < N; ++j) v[j & 63] = x[base + j];
    y[row] = v[0];""",
            "rows_independent",
            "not to this iteration's element",
        ),
        (
            """    for (int j = 0; j < N; ++j) { if (x[base + j] < 0.f) break; y[base + j] = x[base + j]; }""",
            "rows_independent",
            "leaves early",
        ),
        (
            """    float s = 0.0f;
    for (int j = 0; j < N; ++j) s += x[base + j];
    atomicAdd(y, s);""",
            "no_block_cooperation",
            "already cooperates",
        ),
    ],
)
def test_forward_refuses(body: str, fact: str, words: str) -> None:
    failed = _failed(_kernel(body))
    assert fact in failed and words in failed[fact], failed
    src = CudaSource.from_text(_kernel(body), "k.cu")
    with pytest.raises(Refused):
        OP.apply(src, OP.find_forward(src)[0])


def test_forward_refuses_a_block_that_is_not_whole_warps() -> None:
    failed = _failed(
        _kernel(
            "    float s = 0.0f;\n    for (int j = 0; j < N; ++j) s += x[base + j];\n    y[row] = s;",
            block="100",
        )
    )
    assert set(failed) == {"block_multiple_of_warp"}


def test_backward_on_the_reduce_sum_rows_expert_and_roundtrip() -> None:
    src = CudaSource.from_file(REPO / "expert_kernels" / "reduce_sum_rows" / "expert.cu")
    (site,) = OP.find(src)
    assert site.details["kernel"] == "row_sum_warp"
    assert all(f.holds for f in OP.removal_preconditions(src, site))
    simpler = OP.remove(src, site)
    t = simpler.text
    assert "const int lane = 0;" in t and "acc = warp_reduce_sum(acc);\n    if (lane" not in t
    assert "for (int i = 0; i < N; ++i) acc +=" in t and t.count("<<<(blocks + 31) / 32,") == 2
    assert OP.find(simpler) == []
    again = _forward(simpler)
    assert len(OP.find(again)) == 1


def test_backward_refuses_rows_cached_in_registers() -> None:
    """softmax's warp kernel keeps ITEMS elements per lane at `(c * 32 + lane) * W`: lane 0 alone
    would see a 32nd of the row."""
    src = CudaSource.from_file(REPO / "tests" / "data" / "deopt" / "softmax_warp_or_block_dispatch.cu")
    site = next(s for s in OP.find(src) if s.details["kernel"] == "softmax_warp_per_row")
    with pytest.raises(Refused, match="lane_only_strides"):
        OP.remove(src, site)


@pytest.mark.parametrize("workload", ["expert_kernels/layernorm", "heldout/logsumexp"])
def test_gate_accepts_forward(tmp_path: Path, workload: str) -> None:
    wl = REPO / workload
    out = _forward(CudaSource.from_file(wl / "naive.cu"))
    r = gate(out.text, wl, GateOptions(backend="emu"), name="warp.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)


def test_gate_accepts_backward(tmp_path: Path) -> None:
    wl = REPO / "expert_kernels" / "reduce_sum_rows"
    src = CudaSource.from_file(wl / "expert.cu")
    out = OP.remove(src, OP.find(src)[0])
    r = gate(out.text, wl, GateOptions(backend="emu"), name="thread.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)


def test_gate_rejects_the_forward_step_without_its_reduction(tmp_path: Path) -> None:
    """Adversarial: the same transform with the shuffle all-reduce left out computes one lane's
    partial; the gate must catch it."""
    wl = REPO / "expert_kernels" / "reduce_sum_rows"
    out = _forward(CudaSource.from_file(wl / "naive.cu")).text
    lines = [ln for ln in out.splitlines() if "__shfl_xor_sync" not in ln]
    r = gate(
        "\n".join(lines),
        wl,
        GateOptions(backend="emu"),
        name="nored.cu",
        use_cache=False,
        cache_root=tmp_path,
    )
    assert not r.accepted and r.category == "mismatch", (r.category, r.message)


@settings(max_examples=40, deadline=None)
@given(LOOP_MIXES)
def test_every_reduction_gets_one_all_reduce(loops: list[list[str]]) -> None:
    """Random thread-per-row kernels: loops carrying 0-3 reductions of any kind (a loop without one
    writes elements). The forward step strides each loop, follows it with one butterfly per
    reduction and finds the kernel warp-per-row again; the backward step undoes it."""
    body, n = row_kernel_body(loops)
    src = CudaSource.from_text(_kernel(body), "k.cu")
    out = _forward(src)
    assert out.text.count("__shfl_xor_sync") == n
    assert out.text.count("j += 32") == len(loops)
    assert "if (lane == 0) y[row] =" in out.text
    (site,) = OP.find(out)
    back = OP.remove(out, site)
    assert "__shfl_xor_sync" not in back.text and "j += 32" not in back.text
    assert OP.find(back) == [] and len(OP.find_forward(back)) == 1


def test_argmax_scan_becomes_a_pair_butterfly_and_back(tmp_path: Path) -> None:
    """An arg-max scan (strict `>`: the first maximum wins) reduces (value, position) pairs: the
    larger value wins, a tie goes to the smaller position. The gate checks it on emu; `>=` (the
    last maximum) is not the same scan and is refused."""
    wl = REPO / "heldout" / "argmax"
    out = _forward(CudaSource.from_file(wl / "naive.cu"))
    assert "if (kl_v > best || (kl_v == best && kl_i < where)) { best = kl_v; where = kl_i; }" in out.text
    r = gate(
        out.text, wl, GateOptions(backend="emu"), name="argmax_warp.cu", use_cache=False, cache_root=tmp_path
    )
    assert r.accepted, (r.category, r.message)
    back = OP.remove(out, OP.find(out)[0])
    assert "__shfl_xor_sync" not in back.text and "for (int j = 1; j < N; ++j)" in back.text
    last = (wl / "naive.cu").read_text().replace("if (v > best)", "if (v >= best)")
    assert "rows_independent" in _failed(last)


ELEMENT_PER_THREAD = """
__global__ void k(const float* in, float* out, int rows, int cols) {
    int e = threadIdx.x + blockDim.x * blockIdx.x;
    if (e >= rows * cols) return;
    int r = e / cols;
    const float* p = in + (size_t)r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; c++) s += p[c] * p[c];
    out[e] = in[e] * rsqrtf(s / cols + 1e-6f);
}
extern "C" void launch(const float* in, float* out, int rows, int cols, cudaStream_t s) {
    k<<<(rows * cols + 127) / 128, 128, 0, s>>>(in, out, rows, cols);
}
"""


@pytest.mark.parametrize("name", ["warp_per_row", "block_per_row"])
def test_a_thread_per_element_of_a_row_does_not_take_a_warp_or_block(name: str) -> None:
    """`e / cols` makes the thread an element of row `e / cols`: the row's `cols` threads each
    re-walk it, and a warp or block per thread would repeat that walk 32 or 256 times over
    (softmax_bf16_short: a warp per element of its 100-element rows, 0.19x naive on the H200)."""
    op = get_operator(name)
    src = CudaSource.from_text(ELEMENT_PER_THREAD, "k.cu")
    (site,) = op.find_forward(src)
    failed = {f.name: f.reason for f in op.preconditions(src, site) if not f.holds}
    assert "thread_owns_its_row" in failed and "e/cols" in failed["thread_owns_its_row"], failed
    owning = {f.name: f.holds for f in op.preconditions(*_owner(op))}
    assert owning.get("thread_owns_its_row") is True


def _owner(op):  # noqa: ANN202 - (source, site) of a thread-per-row kernel
    src = CudaSource.from_text(
        _kernel("    float s = 0.0f;\n    for (int j = 0; j < N; ++j) s += x[base + j];\n    y[row] = s;"),
        "k.cu",
    )
    return src, op.find_forward(src)[0]
