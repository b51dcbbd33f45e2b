"""row_stats: a thread per output element that re-reduces its row <-> a thread per row that
reduces once and writes the row in a column loop.

Forward on the held-out softmax_bf16_short naive kernel and on per-element kernels the project
writes in other authors' idioms (wrapped guard, `row`/`col` locals, a total held in a local, the
index spelled the other way round, sum of squares); backward on thread-per-row kernels; the
kernels it must refuse; the gate on both sides and after warp_per_row; a property test over
spellings, reductions and launch sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator, operators
from klineage.deopt.row_stats import RowStats
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource
from klineage.source.syntax import eval_int

OP = RowStats()
REPO = Path(__file__).resolve().parent.parent
SHORT = REPO / "heldout" / "softmax_bf16_short"


def _src(text: str) -> CudaSource:
    return canonical_form(CudaSource.from_text(text, "k.cu")).source


def _forward(src: CudaSource) -> CudaSource:
    (site,) = OP.find_forward(src)
    return OP.apply(src, site)


def _failed(text: str) -> dict[str, str]:
    src = _src(text)
    (site,) = OP.find_forward(src)
    return {f.name: f.reason for f in OP.preconditions(src, site) if not f.holds}


#: a per-element RMS scaling in another idiom: wrapped guard, row/col locals, total in a local
RMS_WRAPPED = """
__global__ void rms_scale(const float* __restrict__ in, float* __restrict__ out, int rows, int cols, float eps) {
    const long total = (long)rows * cols;
    long t = threadIdx.x + blockIdx.x * blockDim.x;
    if (t < total) {
        int r = t / cols;
        int c = t % cols;
        float ss = 0.f;
        for (int k = 0; k < cols; k++) { float v = in[(long)r * cols + k]; ss += v * v; }
        float scale = rsqrtf(ss / cols + eps);
        out[(long)r * cols + c] = in[t] * scale;
    }
}
void run_rms(const float* in, float* out, int rows, int cols, float eps, cudaStream_t st) {
    int nthreads = 128;
    long n = (long)rows * cols;
    int nblocks = (int)((n + nthreads - 1) / nthreads);
    rms_scale<<<nblocks, nthreads, 0, st>>>(in, out, rows, cols, eps);
}
"""


def _per_element(head: str, tail: str, guard: str = "if (i >= M * N) return;", extra: str = "") -> str:
    return f"""
__global__ void k(const float* x, float* y, int M, int N) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    {extra}
    {guard}
    const float* row = x + (i / N) * N;
{head}
{tail}
}}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {{
    k<<<(M * N + 255) / 256, 256, 0, s>>>(x, y, M, N);
}}
"""


MAX_HEAD = "    float m = -INFINITY;\n    for (int j = 0; j < N; ++j) m = fmaxf(m, row[j]);"


def test_registered_as_tiling() -> None:
    op = get_operator("row_stats")
    assert op.category == "tiling" and op.mechanical_apply
    names = [o.name for o in operators()]  # removed after the row layouts, which leave a thread per row
    assert names.index("warp_per_row") < names.index("block_per_row") < names.index("row_stats")


def test_forward_on_softmax_bf16_short() -> None:
    t = _forward(_src((SHORT / "naive.cu").read_text())).text
    assert "size_t kl_row = (size_t)blockIdx.x * blockDim.x + threadIdx.x;" in t
    assert "if (kl_row >= M) return;" in t
    assert "const __nv_bfloat16* r = x + (kl_row) * N;" in t
    assert "for (int kl_c = 0; kl_c < N; ++kl_c) {" in t
    assert "y[(kl_row * N + kl_c)] =" in t and "x[(kl_row * N + kl_c)]" in t
    assert "<<<(unsigned)((M + threads - 1) / threads), threads, 0, stream>>>" in t
    assert OP.find_forward(_src(t)) == [] and len(OP.find(_src(t))) == 1


def test_forward_on_another_idiom() -> None:
    """Wrapped guard (canonicalized to an early return), `r = t / cols`, `c = t % cols`, the
    bound held in a local, `threadIdx.x + blockIdx.x * blockDim.x`, a host launcher."""
    t = _forward(_src(RMS_WRAPPED)).text
    assert "long kl_row = blockIdx.x * blockDim.x + threadIdx.x;" in t
    assert "if (kl_row >= rows) return;" in t
    assert "int r = kl_row;" in t
    assert "for (int c = 0; c < cols; ++c) {" in t  # the author's column name
    assert "int c = kl_c" not in t and "out[(long)r * cols + c] = in[(kl_row * cols + c)] * scale;" in t
    assert "rms_scale<<<(unsigned)((rows + nthreads - 1) / nthreads), nthreads, 0, st>>>" in t


def test_fresh_names_when_taken() -> None:
    text = _per_element(MAX_HEAD, "    float kl_row = 1.f;\n    y[i] = expf(x[i] - m) * kl_row;")
    t = _forward(_src(text)).text
    assert "int kl_row2 = blockIdx.x * blockDim.x + threadIdx.x;" in t


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        (_per_element("    float m = row[0];", "    y[i] = x[i] - m;"), "row_reduction"),
        (
            _per_element(MAX_HEAD + "\n    y[M * N + (i / N)] = m;", "    y[i] = x[i] - m;"),
            "stats_independent_of_column",
        ),
        (_per_element(MAX_HEAD, "    m = m * x[i];\n    y[i] = x[i] - m;"), "stats_independent_of_column"),
        (_per_element(MAX_HEAD, "    if (x[i] > m) return;\n    y[i] = x[i];"), "element_writes"),
        (_per_element(MAX_HEAD, "    y[i] = x[i] - m + (float)(i / M);"), "row_extent"),
        (_per_element(MAX_HEAD, "    y[i] = x[i] - m;", guard="if (i >= M * 7) return;"), "row_extent"),
        (
            _per_element(MAX_HEAD, "    y[i] = x[i] - m;", extra="__shared__ float s[32]; s[0] = 0.f;"),
            "no_block_cooperation",
        ),
        (_per_element(MAX_HEAD, "    y[i] = x[i] - m + threadIdx.x;"), "one_index"),
    ],
)
def test_refuses(text: str, failed: str) -> None:
    assert failed in _failed(text)


def test_refuses_without_a_guard() -> None:
    text = _per_element(MAX_HEAD, "    y[i] = x[i] - m;", guard="")
    assert "one_thread_per_element" in _failed(text)
    with pytest.raises(Refused, match="one_thread_per_element"):
        OP.apply(_src(text), OP.find_forward(_src(text))[0])


THREAD_PER_ROW = """
__global__ void norm_rows(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float s = 0.f;
    for (int j = 0; j < N; ++j) s += x[base + j];
    const float inv = 1.f / s;
    for (int j = 0; j < N; ++j) y[base + j] = x[base + j] * inv;
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {
    norm_rows<<<(M + 63) / 64, 64, 0, s>>>(x, y, M, N);
}
"""


def test_backward_then_forward() -> None:
    src = _src(THREAD_PER_ROW)
    (site,) = OP.find(src)
    back = OP.remove(src, site)
    t = back.text
    assert "const size_t kl_e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;" in t
    assert "int row = kl_e / N;" in t and "if (kl_e >= (size_t)M * N) return;" in t
    assert "y[base + (int)(kl_e % N)] = x[base + (int)(kl_e % N)] * inv;" in t
    assert "<<<(unsigned)((((size_t)M * N) + 63) / 64), 64, 0, s>>>" in t
    assert OP.find(back) == []
    again = _forward(back)
    assert len(OP.find(again)) == 1 and "for (int kl_c = 0; kl_c < N; ++kl_c)" in again.text


@pytest.mark.parametrize(
    ("last", "failed"),
    [
        (
            "float run = 0.f;\n    for (int j = 0; j < N; ++j) { run += x[base + j]; y[base + j] = run * s; }",
            "element_loop_independent",
        ),
        ("for (int j = 0; j < N; ++j) y[base + j] = y[base + j] * s;", "element_loop_independent"),
    ],
)
def test_backward_refuses(last: str, failed: str) -> None:
    text = THREAD_PER_ROW.replace(
        "const float inv = 1.f / s;\n    for (int j = 0; j < N; ++j) y[base + j] = x[base + j] * inv;", last
    )
    src = _src(text)
    (site,) = OP.find(src)
    assert failed in {f.name for f in OP.removal_preconditions(src, site) if not f.holds}


def test_backward_refuses_a_row_part_that_stores() -> None:
    """layernorm-style: the row's mean stored per row would be stored by each of its elements."""
    text = THREAD_PER_ROW.replace(
        "const float inv = 1.f / s;", "const float inv = 1.f / s;\n    y[row] = inv;"
    )
    src = _src(text)
    (site,) = OP.find(src)
    with pytest.raises(Refused, match="row_reduction"):
        OP.remove(src, site)


def test_gate_accepts_forward_and_warp_per_row_after_it(tmp_path: Path) -> None:
    out = _forward(_src((SHORT / "naive.cu").read_text()))
    r = gate(
        out.text, SHORT, GateOptions(backend="emu"), name="rows.cu", use_cache=False, cache_root=tmp_path
    )
    assert r.accepted, (r.category, r.message)
    warp = get_operator("warp_per_row")
    (site,) = warp.find_forward(out)
    w = warp.apply(out, site)
    r = gate(w.text, SHORT, GateOptions(backend="emu"), name="warp.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)


def test_gate_accepts_backward(tmp_path: Path) -> None:
    wl = REPO / "expert_kernels" / "softmax"
    src = _src((wl / "naive.cu").read_text())
    out = OP.remove(src, OP.find(src)[0])
    r = gate(
        out.text, wl, GateOptions(backend="emu"), name="elements.cu", use_cache=False, cache_root=tmp_path
    )
    assert r.accepted, (r.category, r.message)


_HEADS = {
    "max": ("float a = -INFINITY;", "a = fmaxf(a, row[j]);", "expf(x[i] - a)"),
    "sum": ("float a = 0.f;", "a += row[j];", "x[i] / a"),
    "sumsq": ("float a = 0.f;", "a = fmaf(row[j], row[j], a);", "x[i] * rsqrtf(a + 1e-5f)"),
    "min": ("float a = INFINITY;", "a = fminf(row[j], a);", "x[i] - a"),
}
_GUARDS = {
    "return": "if (i >= M * N) return;",
    "flipped": "if (N * M <= i) return;",
}


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(sorted(_HEADS)),
    st.sampled_from(sorted(_GUARDS)),
    st.booleans(),
    st.integers(1, 5000),
    st.integers(1, 300),
)
def test_any_reduction_and_spelling_covers_the_rows(
    kind: str, guard: str, wrapped: bool, m: int, n: int
) -> None:
    """Random reductions and guard spellings (an early return, or the whole body wrapped in the
    test): the forward step hoists the reduction out of a column loop, and the new grid gives
    every row exactly one thread at any size (at most one block to spare)."""
    decl, update, value = _HEADS[kind]
    head = f"    {decl}\n    for (int j = 0; j < N; ++j) {update}"
    tail = f"    y[i] = {value};"
    text = _per_element(head, tail, guard=_GUARDS[guard])
    if wrapped:
        text = text.replace(_GUARDS[guard], "if (i < M * N) {").replace(tail, tail + "\n    }")
    out = _forward(_src(text))
    assert out.text.count("for (int kl_c = 0; kl_c < N; ++kl_c)") == 1
    assert out.text.index(update) < out.text.index("kl_c = 0")
    grid = out.text.split("<<<")[1].split(",")[0]
    blocks = eval_int(grid.replace("(unsigned)", "").replace("M", str(m)), {})
    assert blocks is not None and blocks * 256 >= m > (blocks - 1) * 256


CHUNKED = """
__device__ __forceinline__ void put(float* p, const float* v) { p[0] = v[0]; p[1] = v[1]; }
__device__ __forceinline__ void get(const float* p, float* v) { v[0] = p[0]; v[1] = p[1]; }
__global__ void scale_rows(const float* x, float* y, int M, int N) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M) return;
    constexpr int W = 2;
    const float* xr = x + (size_t)r * N;
    float* yr = y + (size_t)r * N;
    float peak = 0.f;
    for (int c = 0; c < N; c += W) { float v[W]; get(xr + c, v); peak = fmaxf(peak, fmaxf(v[0], v[1])); }
    for (int c = 0; c < N; c += W) {
        float v[W];
        get(xr + c, v);
        for (int k = 0; k < W; ++k) v[k] = v[k] / peak;
        put(yr + c, v);
    }
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {
    scale_rows<<<(M + 127) / 128, 128, 0, s>>>(x, y, M, N);
}
"""


def test_chunked_rows_through_helpers_roundtrip() -> None:
    """A row walked in chunks of W through load/store helpers and a local array: the element
    form gives each chunk to the thread at its first column, and the forward step restores the
    chunk loop exactly."""
    src = _src(CHUNKED)
    (site,) = OP.find(src)
    back = OP.remove(src, site)
    assert "const int c = (int)(kl_e % N);" in back.text and "if (c % 2 == 0) {" in back.text
    again = _forward(back)
    assert "    for (int c = 0; c < N; c += 2) {\n        float v[W];\n        get(xr + c, v);" in again.text
    assert len(OP.find(again)) == 1


def test_helper_store_of_a_read_buffer_is_refused() -> None:
    src = _src(CHUNKED.replace("get(xr + c, v);\n        for", "get(yr + c, v);\n        for"))
    (site,) = OP.find(src)
    assert "element_loop_independent" in {f.name for f in OP.removal_preconditions(src, site) if not f.holds}
