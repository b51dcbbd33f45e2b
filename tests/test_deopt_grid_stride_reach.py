"""grid_stride's forward step stays off kernels whose remedy is another layout (a thread per row,
a strided copy) and off sizes where the one-wave cap never binds."""

from __future__ import annotations

import pytest

from klineage.deopt.grid_stride import GridStride
from klineage.source.model import CudaSource

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
    src = CudaSource.from_text(text, "k.cu")
    (site,) = OP.find_forward(src)
    return [f.name for f in OP.preconditions(src, site) if not f.holds]


@pytest.mark.parametrize(
    ("text", "fact"),
    [(_ROW_PER_THREAD, "straight_line_element"), (_TRANSPOSE, "not_a_strided_copy")],
)
def test_other_layouts_are_left_alone(text: str, fact: str) -> None:
    assert _failed(text) == [fact]


@pytest.mark.parametrize(("n", "holds"), [(1 << 16, False), (1 << 28, True)])
def test_the_cap_must_bind_at_some_bench_size(n: int, holds: bool) -> None:
    assert _failed(_ELEMENTWISE) == []  # an elementwise kernel keeps every static fact
    src = CudaSource.from_text(_ELEMENTWISE, "k.cu")
    (site,) = OP.find_forward(src)
    (fact,) = OP.shape_preconditions(src, site, [(None, None, 2.0, n)])
    assert fact.name == "grid_exceeds_one_wave" and fact.holds is holds
    if not holds:
        assert "[256] blocks" in fact.reason
