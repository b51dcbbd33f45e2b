"""tma and setmaxnreg: Hopper's bulk tensor copies made synchronous, register reallocation removed.

The rewrites are read on snippets written here in the common idioms (a 2-D tiled load with its
barrier, a multicast load, a tensor store with its bulk group, a plain bulk load, prefetches;
maps encoded through the runtime's driver entry point or directly), refusals say why, and the
gemm_bf16 Hopper variant with its TMA rewritten computes the right product on the emulator, its
mbarriers and wgmmas replaced by the C++ models of tests/hopper_models.py (whose reading of the
descriptors the GPU verified): the synchronous copy lands the boxes where the swizzle puts them,
and counts their bytes on the stage's barrier. (Its zero fill is not observable there: rows past M
are never stored and K is a multiple of 64: no test here checks it.)"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator
from klineage.deopt.setmaxnreg import SetMaxNReg
from klineage.deopt.tma import Tma
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource
from tests.conftest import REPO, with_emu_shapes
from tests.hopper_models import sm90a_ptxas
from tests.test_deopt_wgmma import ATTN_SHAPES
from tests.test_hopper_attention import ATTN

GEMM = REPO / "expert_kernels" / "gemm_bf16"
HOPPER_GEMM = GEMM / "variants" / "expert_wgmma.cu"
HOPPER_ATTN = REPO / "expert_kernels" / "attention_fwd" / "variants" / "expert_wgmma.cu"

COPIES = r"""#include <cuda.h>
#include <stdint.h>
__device__ void load(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}
__device__ void load_mc(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar, uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;" :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar), "h"(mask) : "memory");
}
__device__ void store(const CUtensorMap* map, int x, int y, int z, uint32_t src) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];"
                 :: "l"(map), "r"(x), "r"(y), "r"(z), "r"(src) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
__device__ void bulk(uint32_t dst, const void* src, uint32_t n, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(n), "r"(bar) : "memory");
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];" :: "l"(src), "r"(n), "r"(n));
}
"""
ENTRY = r"""
CUresult encode(CUtensorMap* m, void* p, const cuuint64_t* d, const cuuint64_t* s, const cuuint32_t* b, const cuuint32_t* e) {
    void* fn = nullptr;
    cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault);
    return CUDA_SUCCESS;
}
"""
DIRECT = r"""
CUresult encode(CUtensorMap* m, void* p, const cuuint64_t* d, const cuuint64_t* s, const cuuint32_t* b, const cuuint32_t* e) {
    return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, p, d, s, b, e, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}
"""


def _remove(op_name: str, text: str) -> str:
    src = CudaSource.from_text(text)
    op = get_operator(op_name)
    (site,) = op.find(src)
    return op.remove(src, site).text


@pytest.mark.parametrize("host", [ENTRY, DIRECT], ids=["entry-point", "direct-call"])
def test_every_bulk_form_becomes_a_synchronous_copy(host: str) -> None:
    out = _remove("tma", COPIES + host)
    body = out[out.index("__device__ void load(") :]
    assert "cp.async.bulk" not in body
    assert (
        "{ const int kl_c[2] = {(int)(x), (int)(y)}; kl_tma_load((uint32_t)(dst), (const void*)(uintptr_t)(map), "
        "kl_c, (uint32_t)(bar), 0u); }" in body
    )
    assert "kl_c, (uint32_t)(bar), (uint32_t)(mask)); }" in body
    assert (
        "{ const int kl_c[3] = {(int)(x), (int)(y), (int)(z)}; kl_tma_store((const void*)(uintptr_t)(map), kl_c, (uint32_t)(src)); }"
        in body
    )
    assert "kl_bulk_load((uint32_t)(dst), (const void*)(src), (uint32_t)(n), (uint32_t)(bar));" in body
    assert "commit_group" not in body and "wait_group" not in body and "prefetch" not in body
    encoder = "kl_tma_entry_point_by_version(" if host is ENTRY else "kl_tma_encode_tiled("
    assert encoder in body and "cuTensorMapEncodeTiled(" not in body


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (
            '__device__ void r(uint64_t m, uint32_t s) { asm volatile("cp.reduce.async.bulk.tensor.1d.global.shared::cta.add.tile.bulk_group [%0, {%1}], [%1];" :: "l"(m), "r"(s)); }\n',
            "bulk form",
        ),
        (
            'void h() { void* f; cuGetProcAddress("cuTensorMapEncodeTiled", &f, 12000, 0, nullptr); }\n',
            "cuGetProcAddress",
        ),
        ("void h() { cuTensorMapEncodeIm2col(nullptr); }\n", "cuTensorMapEncodeIm2col"),
    ],
)
def test_forms_it_does_not_rewrite_are_refused(extra: str, why: str) -> None:
    src = CudaSource.from_text(COPIES + ENTRY + extra)
    (site,) = Tma().find(src)
    with pytest.raises(Refused, match=why):
        Tma().remove(src, site)


def test_maps_encoded_elsewhere_refuse_the_step() -> None:
    src = CudaSource.from_text(COPIES)
    (site,) = Tma().find(src)
    with pytest.raises(Refused, match="maps_encoded_here"):
        Tma().remove(src, site)


def test_setmaxnreg_statements_go_together() -> None:
    text = (
        'template <int R> __device__ void up() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(R)); }\n'
        '__device__ void down() { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); }\n'
    )
    src = CudaSource.from_text(text)
    (site,) = SetMaxNReg().find(src)
    assert site.details["count"] == "2"
    out = SetMaxNReg().remove(src, site).text
    assert "setmaxnreg" not in out.replace("void up", "").replace("void down", "")
    assert SetMaxNReg().find(CudaSource.from_text(out)) == []


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(
    ("variant", "steps"),
    [(HOPPER_GEMM, "setmaxnreg,wgmma,tma"), (HOPPER_ATTN, "wgmma,setmaxnreg,tma"), (HOPPER_GEMM, "tma")],
    ids=["gemm_bf16-lineage", "attention_fwd-lineage", "gemm_bf16-tma-alone"],
)
def test_the_hopper_variants_walked_down_compile_for_sm90a(tmp_path: Path, variant: Path, steps: str) -> None:
    text = variant.read_text()
    for step in steps.split(","):
        text = _remove(step, text)
    assert not re.search(
        r"wgmma\.mma_async|cp\.async\.bulk|setmaxnreg\.", text.split("// ---- the kernel")[1]
    )
    (tmp_path / "k.cu").write_text(text)
    report = sm90a_ptxas(tmp_path / "k.cu", tmp_path)
    assert not re.search(r"\berror\b|warning", report.lower()), report


KERNEL = r"""
__global__ void k(const CUtensorMap* m, const void* g, uint32_t n) {
    __shared__ __align__(1024) unsigned char buf[4096];
    __shared__ __align__(8) unsigned long long bar;
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(buf), b = (uint32_t)__cvta_generic_to_shared(&bar);
    load(s, m, 0, 0, b);
    load_mc(s, m, 0, 0, b, 3);
    store(m, 0, 0, 0, s);
    bulk(s, g, n, b);
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_rewritten_form_compiles_for_sm90a(tmp_path: Path) -> None:
    """The helper's load (with and without multicast), store and plain bulk load, and the encoder."""
    (tmp_path / "k.cu").write_text(_remove("tma", COPIES + ENTRY + KERNEL))
    report = sm90a_ptxas(tmp_path / "k.cu", tmp_path)
    assert not re.search(r"\berror\b|warning", report.lower()), report


# ---- the Hopper variants on the emulator with their TMA rewritten (the rest runs as written) -------

SHAPES = '[{"M": 64, "N": 64, "K": 64}, {"M": 192, "N": 320, "K": 384}]'


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new", "passes"),
    [
        ("", "", True),
        ("a ^ (((a >> 7) & (swizzle / 16 - 1)) << 4)", "a ^ (((a >> 8) & (swizzle / 16 - 1)) << 4)", False),
        (
            "off += x * (d == 0 ? (long long)m.elem : (long long)m.strides[d - 1]);",
            "off += x * (long long)m.elem;",
            False,
        ),
    ],
    ids=["as-rewritten", "wrong-swizzle", "row-stride-ignored"],
)
def test_rewritten_tma_feeds_the_gemm_on_the_emulator(
    tmp_path: Path, old: str, new: str, passes: bool
) -> None:
    """A and B boxes (bf16, 128-byte swizzle, zero past the tensor) copied at issue by the inserted
    helper into the ring the variant's wgmmas read through their descriptors; a helper that swizzles
    on the wrong address bits, or walks rows with the element size, computes something else."""
    text = _remove("tma", HOPPER_GEMM.read_text())
    if old:
        assert text.count(old) == 1
        text = text.replace(old, new)
    (tmp_path / "k.cu").write_text(text)
    wl = with_emu_shapes(GEMM, SHAPES, tmp_path / "wl")
    r = gate(tmp_path / "k.cu", wl, GateOptions(backend="emu", timeout_s=120), use_cache=False)
    assert r.accepted == passes, f"{r.category}: {r.message}"
    if not passes:
        assert r.category in ("mismatch", "nan", "nondeterministic", "out_of_bounds", "crash"), (
            f"{r.category}: {r.message}"
        )


@pytest.mark.slow
def test_rewritten_tma_feeds_the_attention_on_the_emulator(tmp_path: Path) -> None:
    """Q, K and V boxes (f16, 128-byte swizzle) copied at issue into the ring the attention's wgmmas
    read, both masks."""
    (tmp_path / "k.cu").write_text(_remove("tma", HOPPER_ATTN.read_text()))
    wl = with_emu_shapes(ATTN, ATTN_SHAPES, tmp_path / "wl")
    r = gate(tmp_path / "k.cu", wl, GateOptions(backend="emu", timeout_s=120), use_cache=False)
    assert r.accepted, f"{r.category}: {r.message}"
