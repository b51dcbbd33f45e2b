"""smem_staging: shared-memory tiles (GEMM A/B tiles, transpose tile) -> direct global loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.smem_staging import SmemStaging
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import load, one_site, passes_gate

OP = SmemStaging()


def test_gemm_tiles_become_global_loads(tmp_path: Path) -> None:
    src, wl = load("smem_staging", "sgemm_tiled")
    a_site = one_site(OP, src, array="As")
    assert all(f.holds for f in OP.removal_preconditions(src, a_site))
    no_a = OP.remove(src, a_site)
    assert "As" not in no_a.text and no_a.text.count("__syncthreads();") == 2  # Bs still needs them
    no_ab = OP.remove(no_a, one_site(OP, no_a, array="Bs"))
    assert "__shared__" not in no_ab.text and "__syncthreads" not in no_ab.text
    assert "A[(size_t)(blockIdx.y * T + (ty)) * K + k0 + (k)]" in no_ab.text
    assert "B[(size_t)(k0 + (k)) * N + (blockIdx.x * T + (tx))]" in no_ab.text
    passes_gate(no_ab.text, wl, tmp_path)


@pytest.mark.slow
def test_gemm_half_way_state_passes_gate(tmp_path: Path) -> None:
    src, wl = load("smem_staging", "sgemm_tiled")
    passes_gate(OP.remove(src, one_site(OP, src, array="As")).text, wl, tmp_path)


@pytest.mark.slow
def test_transpose_tile_becomes_a_strided_read(tmp_path: Path) -> None:
    src, wl = load("smem_padding", "transpose_pad")
    out = OP.remove(src, one_site(OP, src, array="tile"))
    assert "tile[" not in out.text and "x[(size_t)(row0 + (tx) + 0) * N + (col0 + (ty + k))]" in out.text
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.parametrize(
    "body, reason",
    [
        (
            "t[threadIdx.x] = x[threadIdx.x]; __syncthreads(); t[threadIdx.x] += 1.0f; y[0] = t[5];",
            "updated in place",
        ),
        ("t[threadIdx.x] = x[threadIdx.x]; y[threadIdx.x] = t[31 - threadIdx.x];", "no __syncthreads"),
        (
            "t[threadIdx.x / 2] = x[threadIdx.x]; __syncthreads(); y[threadIdx.x] = t[0];",
            "not a thread index",
        ),
        (
            "t[threadIdx.x] = x[threadIdx.x]; t[threadIdx.x + 32] = x[threadIdx.x + 32]; __syncthreads(); y[0] = t[1];",
            "written 2 times",
        ),
    ],
)
def test_refusals(body: str, reason: str) -> None:
    src = CudaSource.from_text(
        f"__global__ void k(const float* x, float* y) {{\n  __shared__ float t[64];\n  {body}\n}}\n"
    )
    site = one_site(OP, src, array="t")
    assert reason in site.details["reason"]
    with pytest.raises(Refused, match=reason):
        OP.remove(src, site)


def test_reduction_scratch_is_not_a_staging_site() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y) {\n  __shared__ float part[32];\n  float v = x[threadIdx.x] * 2.0f;\n"
        "  part[threadIdx.x % 32] = v;\n  __syncthreads();\n  if (threadIdx.x == 0) y[0] = part[0] + part[1];\n}\n"
    )
    assert OP.find(src) == []
