"""The Hopper attention variant (expert_kernels/attention_fwd/variants/expert_wgmma.cu, issue 25
item 3): the emulator runs it as written, every knob build the GPU script times compiles for
sm_90a without spills, and its logic (the TMA ring, the phases, the
online softmax on wgmma fragments, P as the register operand of the second product, the masks and
the descriptor arithmetic) runs on the emulator with its PTX helpers replaced by C++ models
(tests/hopper_models.py). The GPU verdict is the cuda gate's, on the device."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from tests.conftest import REPO, define_lines, with_emu_shapes
from tests.hopper_models import (
    SYNC_MODELS,
    assert_emu_runs_hopper_kernel,
    copy_models,
    sm90a_ptxas,
    with_models,
)

ATTN = REPO / "expert_kernels" / "attention_fwd"
HOPPER = ATTN / "variants" / "expert_wgmma.cu"


def test_emu_gate_runs_the_hopper_variant() -> None:
    """Warp-specialized producer and consumers, TMA ring, named barriers, register-A wgmmas: run as written."""
    assert_emu_runs_hopper_kernel(HOPPER, ATTN)


#: the knob builds .devwork/s16-attnwgmma/run_gpu.sh timed (the default is now its fastest, three
#: consumers; the others were timed beside two consumers. 176-key tiles with three consumers, 128
#: registers a thread, spill: not among them)
TWO = "KL_CONSUMERS=2"
BUILDS = [
    "",
    TWO,
    f"{TWO},KL_PINGPONG=1",
    f"{TWO},KL_BN=176",
    f"{TWO},KL_OVERLAP=0",
    f"{TWO},KL_STAGES=3",
    f"{TWO},KL_SETMAXNREG=0",
    "KL_CONSUMERS=1",
]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("defines", BUILDS)
def test_every_timed_build_compiles_for_sm90a_without_spills(tmp_path: Path, defines: str) -> None:
    report = sm90a_ptxas(HOPPER, tmp_path, defines)
    assert report.count("0 bytes spill stores, 0 bytes spill loads") == 4, report  # D x mask
    assert "warning" not in report.lower(), report
    assert "C7513" not in report, report  # ptxas serializing the wgmmas (a register they read written early)


# ---- the kernel's logic on the emulator, its PTX replaced by models -------------------------------

#: the attention variant's own PTX helpers beside the shared models: named barriers count threads
#: (a turn that never opens hangs); S = Q K^T reads both operands K-major through their descriptors; O += P V takes P from the registers of the warp's lanes
#: (a[q] of lane L holds row L / 4 (+ 8 when q is odd), columns 2 (L % 4) (+ 8 when q > 1) and
#: + 1: the m64k16 register A layout) and V MN-major.
ATTN_MODELS = r"""
template <int kN> __device__ __forceinline__ void fence_registers(uint32_t (&)[kN]) {}
struct KlNamed { int count, gen; };
__device__ KlNamed g_named[16];  // a named barrier completes when kThreadsAt threads have arrived or synced
template <int kId, int kThreadsAt> __device__ __forceinline__ void named_arrive() {
    KlNamed& b = g_named[kId];
    if (++b.count == kThreadsAt) { b.count = 0; b.gen += 1; }
}
template <int kId, int kThreadsAt> __device__ __forceinline__ void named_sync() {
    KlNamed& b = g_named[kId];
    const int gen = b.gen;
    if (++b.count == kThreadsAt) { b.count = 0; b.gen += 1; return; }
    while (b.gen == gen) __syncwarp(1u << (threadIdx.x % 32));
}
__device__ __forceinline__ float fast_exp2(float x) { return exp2f(x); }
template <int kN>
__device__ __forceinline__ void kl_wgmma_ss(float (&d)[kN / 2], uint64_t da, uint64_t db, int scale_d) {
    for (int i = 0; i < kN / 2; ++i) {
        float s = scale_d ? d[i] : 0.f;
        for (int k = 0; k < 16; ++k) s = fmaf(kl_operand(da, kl_row(i), k), kl_operand(db, kl_col(i), k), s);
        d[i] = s;
    }
}
template <int kN>
__device__ __forceinline__ void kl_wgmma_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t db, int scale_d) {
    const int lane = threadIdx.x % 32;
    float rows[2][16];
    for (int q = 0; q < 4; ++q)
        for (int t = 0; t < 4; ++t) {
            const uint32_t v = __shfl_sync(0xffffffffu, a[q], (lane / 4) * 4 + t);
            const __half2 h = *reinterpret_cast<const __half2*>(&v);
            rows[q & 1][8 * (q >> 1) + 2 * t] = __low2float(h);
            rows[q & 1][8 * (q >> 1) + 2 * t + 1] = __high2float(h);
        }
    for (int i = 0; i < kN / 2; ++i) {
        float s = scale_d ? d[i] : 0.f;
        for (int k = 0; k < 16; ++k) s = fmaf(rows[(i >> 1) & 1][k], kl_operand(db, k, kl_col(i)), s);
        d[i] = s;
    }
}
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t a, uint64_t b, int z) { kl_wgmma_ss<64>(d, a, b, z); }
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t a, uint64_t b, int z) { kl_wgmma_ss<128>(d, a, b, z); }
__device__ __forceinline__ void wgmma_ss_n176(float (&d)[88], uint64_t a, uint64_t b, int z) { kl_wgmma_ss<176>(d, a, b, z); }
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int z) { kl_wgmma_rs<64>(d, a, b, z); }
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int z) { kl_wgmma_rs<128>(d, a, b, z); }
"""

HOST_MODEL = r"""
bool tensor_map(KlTensorMap* map, const void* ptr, int rows, int cols, int box_rows) {
    *map = KlTensorMap{static_cast<const __half*>(ptr), rows, cols, box_rows, 64};
    return true;
}

"""


def _with_models(src: str) -> str:
    """The variant with its PTX helpers and its tensor-map encoding replaced by the models."""
    models = SYNC_MODELS + copy_models("f16") + ATTN_MODELS
    return with_models(src, models, HOST_MODEL, "// ---- end of the tensor maps")


#: both head dims and masks; 3 key tiles walk the 2-stage ring into its second round (6 tiles of 64
#: keys the 3-stage one), 384 keys leave a part tile of 176, 64-key tiles give a causal tile wholly
#: above the first warpgroup's rows, 192-row blocks a part query tile at S = 256
MODEL_SHAPES = (
    '[{"B": 1, "H": 1, "S": 128, "D": 64, "causal": 0}, {"B": 1, "H": 2, "S": 384, "D": 64, "causal": 1},'
    ' {"B": 1, "H": 1, "S": 256, "D": 128, "causal": 0}, {"B": 1, "H": 1, "S": 384, "D": 128, "causal": 1}]'
)


def _model_workload(tmp_path: Path) -> Path:
    return with_emu_shapes(ATTN, MODEL_SHAPES, tmp_path / "wl")


def _run(tmp_path: Path, src: str, defines: str = "", timeout_s: float | None = None) -> tuple[bool, str]:
    (tmp_path / "k.cu").write_text(define_lines(defines) + _with_models(src))
    opts = (
        GateOptions(backend="emu") if timeout_s is None else GateOptions(backend="emu", timeout_s=timeout_s)
    )
    r = gate(tmp_path / "k.cu", _model_workload(tmp_path), opts, use_cache=False)
    return r.accepted, f"{r.category}: {r.message}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "defines",
    [
        "",
        f"{TWO},KL_OVERLAP=0",
        "KL_BN=64,KL_STAGES=3",
        f"{TWO},KL_BN=176",
        "KL_CONSUMERS=1",
        TWO,
        f"{TWO},KL_PINGPONG=1,KL_BN=64",
    ],
    ids=["default", "no-overlap", "bn64-3-stages", "bn176", "one-consumer", "two-consumers", "pingpong"],
)
def test_variant_logic_on_the_emulator_with_ptx_models(tmp_path: Path, defines: str) -> None:
    accepted, why = _run(tmp_path, HOPPER.read_text(), defines)
    assert accepted, why


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new", "defines"),
    [
        ("", "", "KL_V_SWAP_OFFSETS=1"),
        ("            o[4 * g + 2 * h] *= alpha[h];\n", "", TWO),
        (
            "issue_weighted_sum<D>(c.o, p, sm.v((j - 1) % kStages));",
            "issue_weighted_sum<D>(c.o, p, sm.v(j % kStages));",
            TWO,
        ),
        ("if (k0 + kBN > S || (kCausal && k0 + kBN - 1 > first))", "if (k0 + kBN > S)", TWO),
        ("if (j >= kStages) mbar_wait(sm.empty(s), ((j / kStages) - 1) & 1);", "", TWO),
        ("        turns.open();\n", "", f"{TWO},KL_PINGPONG=1"),
    ],
    ids=[
        "v-offsets-swapped",
        "o-not-rescaled",
        "overlap-takes-the-wrong-v",
        "diagonal-not-masked",
        "producer-never-waits",
        "pingpong-never-opens",
    ],
)
def test_the_models_catch_bugs(tmp_path: Path, old: str, new: str, defines: str) -> None:
    src = HOPPER.read_text()
    assert src.count(old) == 1 or not old
    accepted, why = _run(tmp_path, src.replace(old, new) if old else src, defines, timeout_s=60)
    assert not accepted and why.split(":")[0] in ("mismatch", "nondeterministic", "nan", "timeout"), why
