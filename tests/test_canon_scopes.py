"""canon `loop_local_temporary`: a temporary declared ahead of a loop and written first in every
iteration is declared in the loop body, so online_softmax reads the running-max update of a kernel
written with an outer temporary; temporaries that may carry a value across iterations stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.online_softmax import OnlineSoftmax
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.canon import canonical_form
from klineage.source.canon.scopes import LoopLocalTemporary
from klineage.source.model import CudaSource
from klineage.source.text import normalize

REPO = Path(__file__).resolve().parent.parent
K = "__global__ void k(const float* x, float* y, int n) {{ {} }}"

#: one thread per row, online max and sum through a temporary declared with the running pair
ONLINE_ROWS = """#include <cuda_runtime.h>
#include <math.h>
__global__ void rows(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float* xr = x + (size_t)row * N;
    float run_max = -INFINITY, run_sum = 0.0f, grown;
    for (int j = 0; j < N; ++j) {
        grown = fmaxf(run_max, xr[j]);
        run_sum = run_sum * expf(run_max - grown) + expf(xr[j] - grown);
        run_max = grown;
    }
    for (int j = 0; j < N; ++j) y[(size_t)row * N + j] = expf(xr[j] - run_max) / run_sum;
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {
    rows<<<(M + 127) / 128, 128, 0, s>>>(x, y, M, N);
}
"""


def _rw(text: str) -> str:
    out = LoopLocalTemporary().rewrite(CudaSource.from_text(text))
    return normalize(out.text) if out is not None else "UNCHANGED"


def test_a_temporary_written_first_is_declared_in_the_body() -> None:
    before = K.format("float a = 0.f, t; for (int i = 0; i < n; ++i) { t = x[i] * 2.f; a += t; } y[0] = a;")
    after = K.format("float a = 0.f; for (int i = 0; i < n; ++i) { float t = x[i] * 2.f; a += t; } y[0] = a;")
    assert _rw(before) == normalize(after)


def test_a_lone_declaration_goes_and_its_line_stays() -> None:
    text = K.format("float t;\n for (int i = 0; i < n; ++i) {\n t = x[i];\n y[i] = t * t;\n }")
    out = LoopLocalTemporary().rewrite(CudaSource.from_text(text))
    assert out is not None
    assert out.text.count("\n") == text.count("\n")
    assert "float t = x[i];" in out.text and "float t;" not in out.text


@pytest.mark.parametrize(
    "body",
    [
        "float t; for (int i = 0; i < n; ++i) { y[i] = t; t = x[i]; }",  # read before the write: carried
        "float t; for (int i = 0; i < n; ++i) { t = x[i]; } y[0] = t;",  # read after the loop
        "float t; for (int i = 0; i < n; ++i) { if (x[i] > 0) t = x[i]; y[i] = t; }",  # written under a branch
        "float t; for (int i = 0; i < n; ++i) { t += x[i]; y[i] = t; }",  # compound assignment
        "float t; for (int i = 0; i < n; ++i) { t = t * x[i]; y[i] = t; }",  # reads itself
        "float t = 1.f; for (int i = 0; i < n; ++i) { t = x[i]; y[i] = t; }",  # initialised
        "float t; for (int i = 0; i < n; ++i) { t = x[i]; float* p = &t; y[i] = *p; }",  # address taken
        "float t; for (int i = 0; i < n; ++i) { t = x[i]; y[i] = t; } for (int i = 0; i < n; ++i) { t = 1.f; y[i] += t; }",
    ],
)
def test_a_temporary_that_may_carry_a_value_stays(body: str) -> None:
    assert _rw(K.format(body)) == "UNCHANGED"


def test_online_softmax_reads_the_update_only_in_canonical_form(tmp_path: Path) -> None:
    """The outer `grown` hid the running-max update from online_softmax; the canonical form shows
    it, and the two-pass kernel its removal writes passes the emu gate on the softmax workload."""
    op = OnlineSoftmax()
    src = CudaSource.from_text(ONLINE_ROWS, "rows.cu")
    assert op.find(src) == []
    canon = canonical_form(src)
    assert "loop_local_temporary" in canon.applied
    wl = REPO / "expert_kernels" / "softmax"
    r = gate(
        canon.source.text, wl, GateOptions(backend="emu"), name="c.cu", use_cache=False, cache_root=tmp_path
    )
    assert r.accepted, (r.category, r.message)
    (site,) = op.find(canon.source)
    assert all(p.holds for p in op.removal_preconditions(canon.source, site))
    out = op.remove(canon.source, site)
    r = gate(out.text, wl, GateOptions(backend="emu"), name="two.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)
