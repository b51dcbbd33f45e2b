"""vectorize's elementwise-loop step does not take its own scalar tail again (a grid-stride loop
from `k * (n / k)` holds fewer than k elements: the materializer's apply-everywhere re-found it
without end, the file growing each time)."""

from __future__ import annotations

from klineage.deopt.vectorize import Vectorize
from klineage.source.model import CudaSource

OP = Vectorize()

_GRID_STRIDE = """
__global__ void saxpy(const float* x, const float* y, float* z, int n, float a) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) z[i] = a * x[i] + y[i];
}
extern "C" void launch(const float* x, const float* y, float* z, int n, float a, cudaStream_t s) {
    saxpy<<<(n + 255) / 256 < 1056 ? (n + 255) / 256 : 1056, 256, 0, s>>>(x, y, z, n, a);
}
"""


def _loops(src: CudaSource) -> list[str]:
    return [s.summary for s in OP.find_forward(src) if s.details.get("kind") == "loop_with_tail"]


def test_the_tail_of_a_packed_grid_stride_loop_is_not_packed_again() -> None:
    src = CudaSource.from_text(_GRID_STRIDE, "k.cu")
    (site,) = [s for s in OP.find_forward(src) if s.details.get("kind") == "loop_with_tail"]
    once = OP.apply(src, site)
    assert "float4" in once.text and "4 * n4 + (blockIdx.x * blockDim.x + threadIdx.x)" in once.text
    assert _loops(once) == []


def test_a_tail_written_out_is_recognised_too() -> None:
    text = _GRID_STRIDE.replace(
        "int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "int i = n / 4 * 4 + (blockIdx.x * blockDim.x + threadIdx.x);",
    )
    assert _loops(CudaSource.from_text(text, "k.cu")) == []


_FLUSH = """
__global__ void flush(const int* in, int* out, int n) {
    __shared__ int part[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) part[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) atomicAdd(&part[in[i] & 255], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        const int v = part[b];
        if (v != 0) atomicAdd(&out[b], v);
    }
}
extern "C" void launch(const int* in, int* out, int n, cudaStream_t s) { flush<<<132, 256, 0, s>>>(in, out, n); }
"""


def test_an_array_whose_elements_an_atomic_targets_is_not_packed() -> None:
    src = CudaSource.from_text(_FLUSH, "k.cu")
    sites = [s for s in OP.find_forward(src) if "(out)" in s.summary]
    assert sites, [s.summary for s in OP.find_forward(src)]
    facts = {f.name: f for f in OP.preconditions(src, sites[0])}
    assert not facts["independent_lanes"].holds
    assert "address of out's element is taken" in facts["independent_lanes"].reason
