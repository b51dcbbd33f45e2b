"""grid_stride's forward step stays off kernels whose remedy is another layout (a thread per row,
a strided copy), off kernels with nothing to amortize over many elements per thread (a plain map)
and off sizes where the one-wave cap never binds."""

from __future__ import annotations

import pytest

from klineage.deopt.grid_stride import GridStride
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import failed_forward

OP = GridStride()

_ELEMENTWISE = """
__global__ void scale(const float* x, float* y, float a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = a * x[i];
}
extern "C" void launch(const float* x, float* y, float a, int n, cudaStream_t s) {
    const int threads = 256;
    scale<<<(n + threads - 1) / threads, threads, 0, s>>>(x, y, a, n);
}
"""

_SCATTER = """
__global__ void bincount(const int* x, int* counts, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&counts[x[i]], 1);
}
extern "C" void launch(const int* x, int* counts, int n, cudaStream_t s) {
    const int threads = 256;
    bincount<<<(n + threads - 1) / threads, threads, 0, s>>>(x, counts, n);
}
"""

_TABLE = """
__global__ void lookup(const int* x, const float* table, float* y, int n) {
    __shared__ float t[16];
    if (threadIdx.x < 16) t[threadIdx.x] = table[threadIdx.x];
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = t[x[i] & 15];
}
extern "C" void launch(const int* x, const float* table, float* y, int n, cudaStream_t s) {
    lookup<<<(n + 255) / 256, 256, 0, s>>>(x, table, y, n);
}
"""

_SETUP = """
__global__ void scale_by(const float* x, const float* a, float* y, int n) {
    const float s = a[0] * a[1];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}
extern "C" void launch(const float* x, const float* a, float* y, int n, cudaStream_t s) {
    scale_by<<<(n + 255) / 256, 256, 0, s>>>(x, a, y, n);
}
"""

_MAP_WITH_ARITHMETIC = """
__global__ void gelu(const float* x, float* y, int m, int n) {
    size_t total = (size_t)m * n;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
}
extern "C" void launch(const float* x, float* y, int m, int n, cudaStream_t s) {
    size_t total = (size_t)m * n;
    gelu<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(x, y, m, n);
}
"""

_ROW_PER_THREAD = """
__global__ void row_sum(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float s = 0.f;
        for (int c = 0; c < cols; ++c) s += x[(size_t)r * cols + c];
        y[r] = s;
    }
}
extern "C" void launch(const float* x, float* y, int rows, int cols, cudaStream_t s) {
    row_sum<<<(rows + 127) / 128, 128, 0, s>>>(x, y, rows, cols);
}
"""

_TRANSPOSE = """
__global__ void flip(const float* in, float* out, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    int r = i / cols;
    int c = i % cols;
    out[c * rows + r] = in[r * cols + c];
}
extern "C" void launch(const float* in, float* out, int rows, int cols, cudaStream_t s) {
    flip<<<(rows * cols + 255) / 256, 256, 0, s>>>(in, out, rows, cols);
}
"""


def _failed(text: str) -> list[str]:
    return [name for name, _ in failed_forward(OP, text)]


@pytest.mark.parametrize(
    ("text", "fact"),
    [(_ROW_PER_THREAD, "straight_line_element"), (_TRANSPOSE, "not_a_strided_copy")],
)
def test_other_layouts_are_left_alone(text: str, fact: str) -> None:
    assert fact in _failed(text)


@pytest.mark.parametrize("text", [_ELEMENTWISE, _MAP_WITH_ARITHMETIC])
def test_a_plain_map_has_nothing_to_amortize(text: str) -> None:
    """One element per thread, nothing shared: the launch covers the problem and the loop would
    only add its index math (about 5% on five held-out maps on the H200)."""
    assert _failed(text) == ["work_to_amortize"]


@pytest.mark.parametrize(
    ("text", "why"),
    [(_SCATTER, "atomicAdd"), (_TABLE, "shared memory"), (_SETUP, "setup before the element")],
)
def test_shared_or_per_thread_work_is_amortized(text: str, why: str) -> None:
    assert _failed(text) == []
    src = CudaSource.from_text(text, "k.cu")
    (site,) = OP.find_forward(src)
    (fact,) = [f for f in OP.preconditions(src, site) if f.name == "work_to_amortize"]
    assert why in fact.reason


@pytest.mark.parametrize(("n", "holds"), [(1 << 16, False), (1 << 28, True)])
def test_the_cap_must_bind_at_some_bench_size(n: int, holds: bool) -> None:
    assert _failed(_SCATTER) == []  # a scatter keeps every static fact
    src = CudaSource.from_text(_SCATTER, "k.cu")
    (site,) = OP.find_forward(src)
    (fact,) = OP.shape_preconditions(src, site, [(None, None, n)])
    assert fact.name == "grid_exceeds_one_wave" and fact.holds is holds
    if not holds:
        assert "[256] blocks" in fact.reason
