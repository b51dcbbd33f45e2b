"""wgmma: Hopper warpgroup MMAs back to per-warp mma.sync reading the same descriptors.

The rewrite is read on kernels written here in the common idioms (an SS wgmma with its scale-d set
by `setp.ne.b32` in the block, the RS form, fences/commits/waits in small wrappers), refusals name
their line, and the gemm_bf16 Hopper variant, its wgmmas rewritten and its TMA and mbarriers
replaced by the C++ models of tests/hopper_models.py, computes the right product on the emulator:
the helper's reading of the descriptors (128-byte swizzle, A K-major, B MN-major) agrees with the
descriptors the variant builds, which the cuda gate verified on the GPU."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator
from klineage.deopt.wgmma import Wgmma
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource
from tests.conftest import REPO, define_lines, with_emu_shapes
from tests.hopper_models import (
    GEMM_CLUSTER_MODELS,
    GEMM_NO_MULTICAST,
    SYNC_MODELS,
    copy_models,
    sm90a_ptxas,
)
from tests.test_hopper_attention import ATTN, ATTN_MODELS
from tests.test_hopper_attention import HOST_MODEL as ATTN_HOST_MODEL

#: both masks, a ring walked into its second round, a part key tile
ATTN_SHAPES = (
    '[{"B": 1, "H": 1, "S": 128, "D": 64, "causal": 0}, {"B": 1, "H": 2, "S": 384, "D": 64, "causal": 1}]'
)

GEMM = REPO / "expert_kernels" / "gemm_bf16"
HOPPER_GEMM = GEMM / "variants" / "expert_wgmma.cu"
HOPPER_ATTN = REPO / "expert_kernels" / "attention_fwd" / "variants" / "expert_wgmma.cu"

SS = r"""#include <stdint.h>
__device__ __forceinline__ void mma_n16(float (&acc)[8], uint64_t da, uint64_t db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 1;\n}\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7])
        : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
"""

RS = r"""#include <stdint.h>
__device__ void pv(float& x0, float& x1, float& x2, float& x3, const uint32_t (&p)[4], uint64_t db) {
    asm volatile(
        "{\n.reg .pred q;\nsetp.ne.b32 q, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, q, 1, -1, 1;\n}\n"
        : "+f"(x0), "+f"(x1), "+f"(x2), "+f"(x3)
        : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(db), "r"(1));
}
"""


def _remove(text: str) -> str:
    src = CudaSource.from_text(text)
    op = Wgmma()
    (site,) = op.find(src)
    return op.remove(src, site).text


def test_ss_form_becomes_a_call_and_the_fences_go() -> None:
    out = _remove(SS)
    assert "wgmma." not in out.split("// KLineage wgmma")[0] + out.split("mma_n16", 1)[1]
    assert "kl_wgmma_sync<16, true>(&(acc)[0], (da), nullptr, (db), (accumulate) != 0, 1, 1, 0, 1);" in out
    assert "fence() { }" in out.replace("\n", " ").replace("  ", " ") or "fence() {}" in out.replace("\n", "")
    assert (
        out.count("mma.sync.aligned.m16n8k16") == 3
    )  # the helper's three forms (bf16, f16; f16 accumulators), once
    assert get_operator("wgmma").name == "wgmma"


def test_rs_form_passes_the_registers_and_copies_scattered_accumulators() -> None:
    out = _remove(RS)
    assert (
        "const uint32_t kl_wg_a[4] = {(uint32_t)(p[0]), (uint32_t)(p[1]), (uint32_t)(p[2]), (uint32_t)(p[3])};"
        in out
    )
    assert "float kl_wg_d[4] = {x0, x1, x2, x3};" in out
    assert "kl_wgmma_sync<8, false>(kl_wg_d, 0, kl_wg_a, (db), (1) != 0, 1, -1, 0, 1);" in out
    assert "x0 = kl_wg_d[0]; x1 = kl_wg_d[1]; x2 = kl_wg_d[2]; x3 = kl_wg_d[3];" in out


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (".f32.bf16.bf16 {%0", ".f16.bf16.bf16 {%0", "f16 accumulators"),
        ("setp.ne.b32 p, %10, 0;", "setp.ne.b32 p, %10, 0;\\nadd.u32 %9, %9, 1;", "other instructions"),
        ("setp.ne.b32 p, %10, 0;", "setp.eq.b32 p, %10, 0;", "other instructions"),
        ("%9, p, 1, 1, 0, 1;", "%9, %10, 1, 1, 0, 1;", "scale-d `%10`"),
        ("p, 1, 1, 0, 1;", "p, 1, 1, 0;", "operands after B"),
    ],
)
def test_forms_it_does_not_know_are_refused_with_their_line(old: str, new: str, why: str) -> None:
    assert SS.count(old) == 1
    src = CudaSource.from_text(SS.replace(old, new))
    op = Wgmma()
    (site,) = op.find(src)
    with pytest.raises(Refused, match=f"line 3: .*{why}"):
        op.remove(src, site)


def test_an_unknown_wgmma_instruction_refuses_the_step() -> None:
    text = (
        SS
        + '__device__ void f(uint64_t a) { asm volatile("wgmma.mma_async.sp.sync.aligned.m64n8k32 ..." :: "l"(a)); }\n'
    )
    src = CudaSource.from_text(text)
    (site,) = Wgmma().find(src)
    with pytest.raises(Refused, match="wgmma.mma_async.sp"):
        Wgmma().remove(src, site)


def test_no_site_without_wgmma() -> None:
    assert Wgmma().find(CudaSource.from_text((GEMM / "expert.cu").read_text())) == []


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("variant", [HOPPER_GEMM, HOPPER_ATTN], ids=["gemm_bf16", "attention_fwd"])
def test_rewritten_hopper_variants_compile_for_sm90a(tmp_path: Path, variant: Path) -> None:
    out = _remove(variant.read_text())
    (tmp_path / "k.cu").write_text(out)
    report = sm90a_ptxas(tmp_path / "k.cu", tmp_path)
    assert not re.search(r"\berror\b|warning", report.lower()), report


# ---- the gemm_bf16 Hopper variant on the emulator: its wgmmas rewritten, TMA and mbarriers modelled


HOST_MODEL = r"""
int resident_clusters() { return 2; }
void launch_clusters(int clusters, const KlTensorMap& a, const KlTensorMap& b, __nv_bfloat16* C, int M, int N, int K,
                     cudaStream_t stream) {
    gemm_bf16_wgmma<<<clusters, kThreads, kSmemBytes, stream>>>(a, b, C, M, N, K);
}
bool tensor_map(KlTensorMap* map, const void* ptr, int rows, int cols, int box_rows, int box_cols) {
    *map = KlTensorMap{static_cast<const __nv_bfloat16*>(ptr), rows, cols, box_rows, box_cols};
    return true;
}

"""

#: partial tiles in M and N, a ring walked past its stages, 4 tiles on 2 blocks
SHAPES = '[{"M": 64, "N": 64, "K": 64}, {"M": 192, "N": 320, "K": 384}]'


def _with_models(rewritten: str, wrappers: str, models: str, host_model: str, host_end: str) -> str:
    """The rewritten variant with its PTX helpers other than the (rewritten) wgmma wrappers, which
    start at the line `wrappers`, replaced by `models`, and its host tensor-map code by `host_model`."""
    start, end = rewritten.index("// ---- PTX helpers"), rewritten.index("// ---- end of the PTX helpers")
    kept = rewritten[rewritten.index(wrappers, start) : end]
    text = rewritten[:start] + SYNC_MODELS + models + kept + rewritten[end:]
    host = text.index("using EncodeTiled")
    text = text[:host] + host_model + text[text.index(host_end, host) :]
    text = text.replace("CUtensorMap", "KlTensorMap").replace("#include <cuda.h>", "")
    return text.replace("#include <stdio.h>", "#include <stdio.h>\n#define __grid_constant__\n", 1)


def _gemm_with_models(rewritten: str) -> str:
    models = copy_models("bf16") + GEMM_CLUSTER_MODELS + GEMM_NO_MULTICAST
    return _with_models(rewritten, "// D (64 x 128", models, HOST_MODEL, "}  // namespace")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new", "passes"),
    [("", "", True), ("(1) != 0, 1, 1, 0, 1);", "(1) != 0, 1, 1, 0, 0);", False)],
    ids=["as-rewritten", "B-read-K-major"],
)
def test_rewritten_gemm_variant_computes_the_product_on_the_emulator(
    tmp_path: Path, old: str, new: str, passes: bool
) -> None:
    rewritten = _remove(HOPPER_GEMM.read_text())
    if old:
        assert rewritten.count(old) == 2
        rewritten = rewritten.replace(old, new)
    (tmp_path / "k.cu").write_text(_gemm_with_models(rewritten))
    wl = with_emu_shapes(GEMM, SHAPES, tmp_path / "wl")
    r = gate(tmp_path / "k.cu", wl, GateOptions(backend="emu"), use_cache=False)
    assert r.accepted == passes, f"{r.category}: {r.message}"
    if not passes:
        assert r.category in ("mismatch", "nan", "nondeterministic"), f"{r.category}: {r.message}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new", "passes"),
    [("", "", True), ("(scale_d) != 0, 1, 1, 0, 1);", "(scale_d) != 0, 1, 1, 0, 0);", False)],
    ids=["as-rewritten", "V-read-K-major"],
)
def test_rewritten_attention_variant_on_the_emulator(
    tmp_path: Path, old: str, new: str, passes: bool
) -> None:
    """Both forms: S = Q K^T (SS, both K-major) and O += P V (RS: P from registers, V MN-major)."""
    rewritten = _remove(HOPPER_ATTN.read_text())
    if old:
        assert rewritten.count(old) == 2  # the RS wrappers' calls
        rewritten = rewritten.replace(old, new)
    models = (
        copy_models("f16")
        + ATTN_MODELS[: ATTN_MODELS.index("template <int kN>\n__device__ __forceinline__ void kl_wgmma_ss")]
    )
    text = _with_models(
        rewritten, "#if KL_BN == 64", models, ATTN_HOST_MODEL, "// ---- end of the tensor maps"
    )
    (tmp_path / "k.cu").write_text(text)
    wl = with_emu_shapes(ATTN, ATTN_SHAPES, tmp_path / "wl")
    r = gate(tmp_path / "k.cu", wl, GateOptions(backend="emu", timeout_s=120), use_cache=False)
    assert r.accepted == passes, f"{r.category}: {r.message}"
    if not passes:
        assert r.category in ("mismatch", "nan", "nondeterministic"), f"{r.category}: {r.message}"


# ---- a Hopper GEMM written here in another idiom: threads copy the tiles, every layout mode ----------

PLAIN = REPO / "tests" / "data" / "deopt" / "wgmma" / "plain_loads"
LAYOUTS = [
    "KL_SWIZZLE=128",
    "KL_SWIZZLE=64",
    "KL_SWIZZLE=32",
    "KL_SWIZZLE=0,KL_B_MN=0",
    "KL_SWIZZLE=64,KL_B_MN=0",
    "KL_ACC_F16=1",
    "KL_ACC_F16=1,KL_SWIZZLE=32,KL_B_MN=0",
]


def _plain_workload(tmp_path: Path, defines: str) -> Path:
    """The fixture's workload; with f16 accumulators a copy whose tolerance allows their rounding."""
    if "KL_ACC_F16=1" not in defines:
        return PLAIN
    folder = tmp_path / "wl"
    shutil.copytree(PLAIN, folder)
    text = (folder / "workload.py").read_text()
    assert text.count("Tolerance(1e-3, 1e-3)") == 1
    (folder / "workload.py").write_text(text.replace("Tolerance(1e-3, 1e-3)", "Tolerance(3e-2, 3e-2)"))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("defines", LAYOUTS)
def test_plain_loads_gemm_rewritten_runs_on_the_emulator_in_every_layout(
    tmp_path: Path, defines: str
) -> None:
    """The original runs on the emulator (its wgmmas read through the descriptors by the runtime);
    rewritten, its fence.proxy.async gone with the last async-proxy reader, it computes A B in each
    swizzle mode with B MN- or K-major: the operator's helper and the emulator read each layout alike."""
    workload = _plain_workload(tmp_path, defines)
    original = define_lines(defines) + (PLAIN / "expert.cu").read_text()
    (tmp_path / "orig.cu").write_text(original)
    r = gate(tmp_path / "orig.cu", workload, GateOptions(backend="emu"), use_cache=False)
    assert r.accepted, f"{r.category}: {r.message}"
    rewritten = _remove(original)
    assert "fence.proxy.async" not in rewritten
    (tmp_path / "k.cu").write_text(rewritten)
    r = gate(tmp_path / "k.cu", workload, GateOptions(backend="emu"), use_cache=False)
    assert r.accepted, f"{r.category}: {r.message}"


@pytest.mark.slow
def test_plain_loads_with_the_wrong_majorness_is_caught(tmp_path: Path) -> None:
    rewritten = _remove(define_lines("KL_SWIZZLE=64") + (PLAIN / "expert.cu").read_text())
    old = "kl_wgmma_sync<64, false>(&(d)[0], (da), nullptr, (db), (1) != 0, 1, 1, 0, (KL_B_MN));"
    assert rewritten.count(old) == 1, rewritten[rewritten.index("kl_wgmma_sync<64") :][:200]
    (tmp_path / "k.cu").write_text(rewritten.replace(old, old.replace("(KL_B_MN));", "0);")))
    r = gate(tmp_path / "k.cu", PLAIN, GateOptions(backend="emu"), use_cache=False)
    assert not r.accepted and r.category in ("mismatch", "nan"), f"{r.category}: {r.message}"
