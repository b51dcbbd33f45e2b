"""pipeline: cp.async (__pipeline_memcpy_async) -> synchronous copies; ping-pong buffers -> one buffer."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.pipeline import Pipeline
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import all_pass, compiles, load, one_site

OP = Pipeline()


def test_async_then_double_buffer_removal(tmp_path: Path) -> None:
    src, wl = load("pipeline", "gemv_pingpong")
    compiles(src.text, tmp_path / "expert")  # emu cannot run cuda_pipeline.h: the expert is nvcc-checked
    sync = OP.remove(src, one_site(OP, src, kind="async_copy"))
    assert (
        "__pipeline_"
        not in sync.text.split("*/")[-1]
        .split("#include <cuda_runtime.h>")[-1]
        .replace("__pipeline_memcpy_async) of chunk", "")
        and "cuda_pipeline.h" not in sync.text
    )
    assert "kl_copy_sync(&xs[cur ^ 1][threadIdx.x], &x[k], sizeof(float));" in sync.text
    site = one_site(OP, sync, kind="double_buffer")
    assert all(f.holds for f in OP.removal_preconditions(sync, site))
    single = OP.remove(sync, site)
    assert (
        "__shared__ float xs[TK];" in single.text
        and "xs[cur" not in single.text
        and "xs[0]" not in single.text
    )
    assert "const int k = t * TK + threadIdx.x;" in single.text and not OP.find(single)
    all_pass([sync.text, single.text], wl, tmp_path)


def test_refusals() -> None:
    ring3 = CudaSource.from_text(
        "__global__ void k(const float* x, float* y, int n) {\n  __shared__ float b[3][64];\n"
        "  for (int t = 0; t < n; ++t) { const int s = t % 3; b[s][threadIdx.x] = x[t]; __syncthreads();"
        " y[t] = b[(t + 2) % 3][0]; }\n}\n"
    )
    site = one_site(OP, ring3, kind="double_buffer")
    with pytest.raises(Refused, match="ring of 3 stages"):
        OP.remove(ring3, site)
    bulk = CudaSource.from_text(
        "#include <cuda/pipeline>\n__global__ void k(const float* x, float* y) {\n  __shared__ float s[32];\n"
        "  auto block = cooperative_groups::this_thread_block();\n"
        "  cuda::memcpy_async(block, s, x, sizeof(float) * 32, cuda::pipeline<cuda::thread_scope_thread>());\n"
        "  y[threadIdx.x] = s[threadIdx.x];\n}\n"
    )
    with pytest.raises(Refused, match="memcpy_async"):
        OP.remove(bulk, one_site(OP, bulk, kind="async_copy"))


def test_inline_ptx_cp_async_wrappers_become_synchronous(tmp_path: Path) -> None:
    src = CudaSource.from_text(
        "#include <cuda_runtime.h>\n#include <stdint.h>\n"
        "__device__ __forceinline__ void cp16(uint32_t dst, const void* src, int n) {\n"
        '  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" ::"r"(dst), "l"(src), "r"(n));\n}\n'
        '__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\\n" ::); }\n'
        '__device__ __forceinline__ void wait0() { asm volatile("cp.async.wait_group 0;\\n" ::); }\n'
        "__global__ void k(const float4* x, float4* y) {\n  __shared__ float4 s[64];\n"
        "  cp16(static_cast<uint32_t>(__cvta_generic_to_shared(&s[threadIdx.x])), x + threadIdx.x, 16);\n"
        "  commit(); wait0(); __syncthreads();\n  y[threadIdx.x] = s[63 - threadIdx.x];\n}\n"
    )
    site = one_site(OP, src, kind="async_copy")
    assert site.details["functions"] == "cp16,commit,wait0"
    out = OP.remove(src, site)
    assert (
        "kl_copy_sync(__cvta_shared_to_generic(dst), src, 16, 16 - (n));" in out.text
        and "cp.async" not in out.text
    )
    compiles(out.text, tmp_path / "ptx")
