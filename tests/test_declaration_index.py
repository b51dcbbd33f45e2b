"""The declaration index behind `declared_type` and the cached `written_names`: the same answers as
walking the tree for each question (the materializer asks thousands of them per run)."""

from __future__ import annotations

from klineage.deopt import _cexpr as X
from klineage.source.model import CudaSource
from klineage.source.syntax import walk, written_names

KERNELS = """
#include <cuda_fp16.h>
__device__ float scale_of(const float* w, int r) { double acc = w[r]; return (float)acc; }
__global__ void k1(const __half2* __restrict__ x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int r = 0; r < 4; ++r) acc += __low2float(x[i * 4 + r]);
    out[i] = acc;
}
__global__ void k2(const float* x, double* out, int n) {
    long long i = blockIdx.x;
    __shared__ float tile[32];
    unsigned mask;
    tile[threadIdx.x] = x[i];
    out[i] = tile[0];
}
"""


def _fn(src: CudaSource, name: str):
    return next(
        n for n in walk(src.tree.root_node) if n.type == "function_definition" and name in src.text_of(n)[:80]
    )


def test_local_declaration_wins_over_other_functions() -> None:
    src = CudaSource.from_text(KERNELS)
    k1, k2 = _fn(src, "k1"), _fn(src, "k2")
    assert X.declared_type(src, k1, "i") == ("int", False)
    assert X.declared_type(src, k2, "i") == ("long long", False)
    assert X.declared_type(src, k1, "x") == ("const __half2", True)
    assert X.declared_type(src, k2, "tile") == ("__shared__ float", True)
    # a name k2 does not declare: the last declaration anywhere in the file (k1's loop counter)
    assert X.declared_type(src, k2, "r") == ("int", False)
    assert X.declared_type(src, k1, "nothing") is None


def test_a_node_inside_the_function_finds_the_same_as_the_function() -> None:
    src = CudaSource.from_text(KERNELS)
    k1 = _fn(src, "k1")
    inner = next(n for n in walk(k1) if n.type == "for_statement")
    assert X.declared_type(src, inner, "acc") == ("float", False)
    helper = _fn(src, "scale_of")
    assert X.declared_type(src, helper, "acc") == ("double", False)


def test_a_second_parse_of_the_text_answers_alike() -> None:
    a, b = CudaSource.from_text(KERNELS), CudaSource.from_text(KERNELS)
    assert (
        X.declared_type(b, _fn(b, "k2"), "out") == X.declared_type(a, _fn(a, "k2"), "out") == ("double", True)
    )


def test_written_names_is_a_fresh_set_each_call() -> None:
    src = CudaSource.from_text(KERNELS)
    k1 = _fn(src, "k1")
    first = written_names(k1)
    assert first == {"acc", "r"}
    first.add("poisoned")
    assert written_names(k1) == {"acc", "r"}
    assert written_names(_fn(src, "k2"), through_access=True) == {"tile", "out"}
