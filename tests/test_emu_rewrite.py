"""The emu source rewrite: unsupported constructs with file:line, line mapping, launch forms."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from klineage.gates.backend import GateOptions
from klineage.gates.emu import backend
from klineage.gates.emu.rewrite import Unsupported, translate

KERNEL_HEAD = "#include <cuda_runtime.h>\n"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            '  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0}, {%1}, {%2}, {%3};" :: "r"(x));',
            "mma.sync",
        ),
        (
            '  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global [%0], [%1];" :: "r"(x), "r"(x));',
            "TMA",
        ),
        ('  asm("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0};" : "=r"(x));', "wgmma"),
        ('  asm("mov.u32 %0, %%smid;" : "=r"(x));', 'inline PTX asm ("mov.u32")'),
        ("  cooperative_groups::this_grid().sync();", "grid-wide"),
        ("  __nanosleep(100);", "__nanosleep"),
        ("  auto c = cooperative_groups::this_cluster();", "clusters"),
    ],
)
def test_unsupported_constructs_name_construct_and_line(body: str, words: str) -> None:
    src = KERNEL_HEAD + "__global__ void k(int x) {\n  int y = 0;\n" + body + "\n}\n"
    with pytest.raises(Unsupported) as e:
        translate(src, "cand.cu")
    assert e.value.line == 4
    assert str(e.value).startswith("cand.cu:4: ")
    assert words in str(e.value)


def test_unsupported_cluster_dims_and_cooperative_launch_and_includes() -> None:
    with pytest.raises(Unsupported, match=r"k\.cu:2: thread-block clusters"):
        translate(KERNEL_HEAD + "__global__ void __cluster_dims__(2, 1, 1) k() {}\n", "k.cu")
    src = (
        KERNEL_HEAD
        + "__global__ void k() {}\nvoid h() {\n  void* a[1];\n  cudaLaunchCooperativeKernel((void*)k, 1, 1, a);\n}\n"
    )
    with pytest.raises(Unsupported, match=r"k\.cu:5: cooperative launch"):
        translate(src, "k.cu")
    with pytest.raises(Unsupported, match=r"k\.cu:2: cuda::barrier"):  # mma.h is emulated (issue 11)
        translate(KERNEL_HEAD + "#include <cuda/barrier>\n", "k.cu")


def test_dynamic_parallelism_is_unsupported() -> None:
    src = KERNEL_HEAD + "__global__ void c() {}\n__global__ void p() {\n  c<<<1, 1>>>();\n}\n"
    with pytest.raises(Unsupported, match="dynamic parallelism") as e:
        translate(src)
    assert e.value.line == 4


def test_comments_and_strings_do_not_trigger_unsupported() -> None:
    src = (
        KERNEL_HEAD
        + '// uses this_grid() in a comment\n__global__ void k(const char* s) {}\nconst char* m = "asm wgmma";\n'
    )
    translate(src)


def test_build_refuses_unsupported_before_compiling(tmp_path: Path) -> None:
    src = (
        KERNEL_HEAD
        + '__global__ void k(int* p) {\n  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0}, [%1];" : "=r"(p[0]) : "r"(0));\n}\n'
    )
    out = backend.build(src, tmp_path, GateOptions())
    assert not out.ok and out.category == "unsupported"
    assert out.message.startswith("kernel.cu:3:") and "ldmatrix" in out.message
    assert not list(tmp_path.glob("*.so"))


def test_compile_error_points_at_original_line(tmp_path: Path) -> None:
    src = (
        KERNEL_HEAD
        + "template <int B>\n__global__ void k(float* y) {\n  __shared__ __align__(16) float s[B];\n"
        + "  s[threadIdx.x] = 1.f;\n  __syncthreads();\n  y[0] = s[0] + undefined_name;\n}\n"
        + 'extern "C" void launch(float* y, cudaStream_t st) {\n  k<32><<<1,\n    32, 0, st>>>(\n    y);\n}\n'
    )
    out = backend.build(src, tmp_path, GateOptions())
    assert out.category == "compile_error"
    assert out.message.startswith("kernel.cu:7:"), out.message
    assert "undefined_name" in out.message


def test_needs_fibers_analysis_follows_calls_and_functors() -> None:
    src = (
        KERNEL_HEAD
        + """
__device__ float warp_sum(float v) { return v + __shfl_xor_sync(0xffffffff, v, 1); }
__device__ float twice(float v) { return warp_sum(v) * 2; }
struct Sync { __device__ void operator()() const { __syncthreads(); } };
__global__ void plain(float* y) { y[threadIdx.x] = 1.f; }
__global__ void indirect(float* y) { y[threadIdx.x] = twice(y[threadIdx.x]); }
template <class F> __global__ void functor(F f) { f(); }
#define BARRIER() __syncthreads()
#define STEP(x) do { x += 1; BARRIER(); } while (0)
__global__ void via_macro(float* y) { float v = 0; STEP(v); y[0] = v; }
"""
    )
    tr = translate(src)
    assert tr.kernels == {"plain": False, "indirect": True, "functor": True, "via_macro": True}


LAUNCH_FORMS = (
    KERNEL_HEAD
    + """
extern __shared__ float gdyn[];
__shared__ int gstatic[4];
__device__ int launches = 0;

template <typename T, int K>
__global__ void __launch_bounds__(64, 2) scale(T* __restrict__ y, T a, int n) {
  __shared__ __align__(16) float tile[64], other[2];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = (float)i;
  gdyn[threadIdx.x] = 2.f * i;
  if (threadIdx.x == 0) gstatic[0] = 7;
  __syncthreads();
  if (i < n) y[i] = (T)(a * K) + (T)tile[threadIdx.x] + (T)gdyn[threadIdx.x] + (T)gstatic[0] + other[0] * 0;
}

template <typename T>
void helper(T* y, int n, int& counter, cudaStream_t s) {
  scale<T, 3>
      <<<(n + 63) / 64,
         64, 64 * sizeof(float), s>>>(y,
                                     (T)(counter++),
                                     n);
}

extern "C" int run(float* y, int n) {
  int counter = 1;
  helper<float>(y, n, counter, 0);
  return counter;
}
"""
)


def test_launch_forms_compile_and_run(tmp_path: Path) -> None:
    out = backend.build(LAUNCH_FORMS, tmp_path, GateOptions())
    assert out.ok, out.message
    lib = ctypes.CDLL(str(out.library))
    y = torch.zeros(100)
    counter = lib.run(ctypes.c_void_p(y.data_ptr()), 100)
    assert counter == 2  # launch arguments are evaluated exactly once
    i = torch.arange(100, dtype=torch.float32)
    assert torch.equal(y, 1 * 3 + i + 2 * i + 7)
