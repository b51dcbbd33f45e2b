"""An operator's edit inside a function nothing runs (a device helper no one calls, a kernel no
host code launches or names) changes no measured kernel: the walker refuses it as a step."""

from __future__ import annotations

from pathlib import Path

from klineage.deopt.pragma_unroll import PragmaUnroll
from klineage.source.model import CudaSource
from klineage.source.reach import dead_edit, live_functions

_FILE = """
__device__ float kept_sum(const float* v, int n) {
    float s = 0.f;
#pragma unroll 4
    for (int i = 0; i < n; ++i) s += v[i];
    return s;
}
__device__ float twice(float a) { return 2.f * a; }
__device__ float via_dead(float a) { return twice(a) + 1.f; }
__global__ void spare(const float* x, float* y, int n) {
#pragma unroll 2
    for (int i = 0; i < n; ++i) y[i] = via_dead(x[i]);
}
__global__ void k(const float* x, float* y, int n) {
    float acc = 0.f;
#pragma unroll 4
    for (int i = 0; i < n; ++i) acc += x[i];
    y[threadIdx.x] = twice(acc);
}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t s) { k<<<1, 32, 0, s>>>(x, y, n); }
"""


def _src() -> CudaSource:
    return CudaSource.from_text(_FILE, "dead.cu")


def test_live_functions_follow_launches_and_calls() -> None:
    assert live_functions(_src()) == {"launch", "k", "twice"}


def test_edits_are_dead_only_inside_functions_nothing_runs() -> None:
    src, op = _src(), PragmaUnroll()
    verdicts = {s.anchor.function: dead_edit(src, op.remove(src, s)) for s in op.find(src)}
    assert verdicts == {"kept_sum": ["kept_sum"], "spare": ["spare"], "k": []}
    # an edit outside functions is never dead, even when a dead function changes with it
    other = CudaSource.from_text(
        _FILE.replace("#pragma unroll 2", "").replace("float s = 0.f;", "float s = 1.f;") + "int g;", "o.cu"
    )
    assert dead_edit(src, other) == []


def test_walker_refuses_the_dead_steps(tmp_path: Path) -> None:
    from klineage.store.db import Store
    from klineage.walker import WalkConfig, Walker

    class _Wl:
        name = "dead"

    with Store(tmp_path / "s.duckdb") as store:
        walker = Walker(store, WalkConfig(operators=[PragmaUnroll()], roundtrip=False))
        try:
            attempts = walker._candidates(_Wl(), _src(), "state")  # type: ignore[arg-type]
        finally:
            walker.executor.close()
    by_fn = {a.site.anchor.function: (a.category, a.message) for a in attempts}
    assert by_fn["k"][0] == "pending"
    assert by_fn["kept_sum"] == (
        "refused",
        "pragma_unroll: the edit changes only kept_sum, which nothing calls",
    )
    assert by_fn["spare"][0] == "refused"
