"""ldg's forward step stays off window reads (a pooling or stencil window with a halo): the plain
load path's L1 already serves the overlap, and the held-out maxpool2d ran at 0.90x its naive with
restrict, ldg, pragma_unroll on the H200. Runs and tiles that start at the thread's own element
keep the step."""

from __future__ import annotations

import pytest

from klineage.deopt.ldg import Ldg
from tests.deopt_kernel_checks import failed_forward

OP = Ldg()

_STENCIL = """
__global__ void blur3(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.f;
    for (int d = 0; d < 3; ++d) {
        int j = i - 1 + d;
        if (j < 0 || j >= n) continue;
        s += x[j];
    }
    y[i] = s;
}
"""

_POOL = """
__global__ void min_filter(const float* __restrict__ img, float* __restrict__ out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    const float* plane = img;
    float lo = 3.4e38f;
    for (int a = 0; a < 5; ++a)
        for (int b = 0; b < 5; ++b) {
            int rr = r + a - 2, cc = c + b - 2;
            if (rr >= 0 && rr < rows && cc >= 0 && cc < cols) lo = fminf(lo, plane[rr * cols + cc]);
        }
    if (c < cols) out[r * cols + c] = lo;
}
"""

_COARSENED = """
__global__ void scale4(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    for (int k = 0; k < 4; ++k) {
        int j = i + k;
        if (j >= n) continue;
        y[j] = 2.f * x[j];
    }
}
"""

_MIXED = """
__global__ void blur_plus(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = x[i];
    for (int d = 0; d < 3; ++d) {
        int j = i - 1 + d;
        if (j < 0 || j >= n) continue;
        s += x[j];
    }
    y[i] = s;
}
"""


def _failed(text: str) -> list[str]:
    return [name for name, _ in failed_forward(OP, text)]


@pytest.mark.parametrize(("text", "pointer"), [(_STENCIL, "x"), (_POOL, "plane")])
def test_window_reads_keep_the_plain_path(text: str, pointer: str) -> None:
    assert _failed(text) == [f"not_window_reads:{pointer}"]


@pytest.mark.parametrize("text", [_COARSENED, _MIXED])
def test_runs_and_reads_outside_a_window_take_ldg(text: str) -> None:
    assert _failed(text) == []
