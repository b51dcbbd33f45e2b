"""The compute-bound expert corpus (expert_kernels/, issue 10): sgemm, gemm_bf16, attention_fwd.

Specs keep the corpus rules; launchers take the workload's arguments in order; the scalar-CUDA
kernels (sgemm expert and naive, the naive tensor-core workloads) pass the CPU emulator gate;
the inline-PTX experts (mma.sync, ldmatrix, cp.async) are reported `unsupported` by the emulator
until tensor-core emulation lands (issue 11), and must pass once it does. Meanwhile their tiling, pipeline
indexing, masking and online softmax are checked on the emulator with the PTX helpers replaced
by warp-level C++ models of the same instructions (PTX_MODELS below: fragments element for
element as the PTX ISA defines them, built on __shfl_sync; cp.async as a copy at issue time).
The models test the kernels' logic, not the instructions: the GPU run (benchmarks/RESULTS.md)
is what verifies the real thing.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from klineage import Tensor, load_workload
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate

CORPUS = Path(__file__).resolve().parent.parent / "expert_kernels"
WORKLOADS = ("sgemm", "gemm_bf16", "attention_fwd", "attention_gqa")
PTX_EXPERTS = ("gemm_bf16", "attention_fwd")
EMU_MAX_ELEMENTS = 1 << 16
_LAUNCH = re.compile(r'extern\s+"C"\s+void\s+launch\s*\(([^)]*)\)', re.S)


def _params(source: str) -> list[str]:
    m = _LAUNCH.search(source)
    assert m, 'no extern "C" void launch(...)'
    return [re.split(r"[\s*&]+", p.strip())[-1] for p in m.group(1).split(",")]


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_spec(name: str) -> None:
    wl = load_workload(CORPUS / name)
    assert wl.name == name
    assert wl.vendor is not None and wl.flops is not None
    assert len(wl.shape_set("test")) >= 3
    for b in wl.shape_set("emu"):
        for t in wl.tensors:
            assert math.prod(wl.tensor_shape(t, b)) <= 2 * EMU_MAX_ELEMENTS, (t.name, b)
    bench = wl.shape_set("bench")
    assert len(bench) >= 2
    assert all(wl.flops(b) >= 1e11 for b in bench)
    for t in wl.outputs:  # long dot products: relative Frobenius error
        assert wl.tolerance_for(t).metric == "frobenius"


def test_tolerances() -> None:
    assert load_workload(CORPUS / "sgemm").tolerances["float32"].rtol <= 1e-5
    assert load_workload(CORPUS / "gemm_bf16").tolerances["bfloat16"].rtol <= 1e-2
    assert load_workload(CORPUS / "attention_fwd").tolerances["float16"].rtol <= 2e-3


def test_sgemm_test_shapes_have_odd_m_n_k() -> None:
    wl = load_workload(CORPUS / "sgemm")
    assert any(all(b[k] % 2 == 1 for k in "MNK") for b in wl.shape_set("test"))
    assert {"M": 4096, "N": 4096, "K": 4096} in wl.shape_set("bench")


def test_gemm_bf16_precondition_and_non_square_shapes() -> None:
    wl = load_workload(CORPUS / "gemm_bf16")
    assert dict(wl.divisible_by) == {"M": 64, "N": 64, "K": 64}
    assert any(len({b["M"], b["N"], b["K"]}) == 3 for b in wl.shape_set("test"))


def test_attention_shapes_cover_both_masks_and_head_dims() -> None:
    wl = load_workload(CORPUS / "attention_fwd")
    seen = {(b["causal"], b["D"]) for b in wl.shape_set("test")}
    assert seen == {(0, 64), (1, 64), (0, 128), (1, 128)}
    assert {(b["B"], b["H"], b["S"], b["D"]) for b in wl.shape_set("bench")} == {(8, 16, 2048, 128)}
    assert wl.flops(dict(B=1, H=1, S=128, D=64, causal=1)) * 2 == wl.flops(
        dict(B=1, H=1, S=128, D=64, causal=0)
    )


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize("variant", ["expert", "naive"])
def test_launcher_arguments_follow_the_workload(name: str, variant: str) -> None:
    wl = load_workload(CORPUS / name)
    params = _params((CORPUS / name / f"{variant}.cu").read_text())
    assert params == [a.name for a in wl.args] + ["stream"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_reference_runs_on_the_smallest_test_shape(name: str) -> None:
    wl = load_workload(CORPUS / name)
    b = min(wl.shape_set("test"), key=lambda s: math.prod(s.values()))
    out = wl.run_reference(wl.make_inputs(b, 0))
    for t in wl.outputs:
        assert isinstance(t, Tensor)
        assert tuple(out[t.name].shape) == wl.tensor_shape(t, b)
        assert not out[t.name].isnan().any()


def _gate_emu(kernel: Path, workload: Path):
    return gate(kernel, workload, GateOptions(backend="emu", timeout_s=300.0), use_cache=False)


EMU_OK = [
    ("sgemm", "expert"),
    ("sgemm", "naive"),
    ("gemm_bf16", "naive"),
    ("attention_fwd", "naive"),
    ("attention_gqa", "naive"),
    ("attention_gqa", "expert"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), EMU_OK, ids=[f"{n}-{v}" for n, v in EMU_OK])
def test_scalar_kernels_pass_the_emu_gate(name: str, variant: str) -> None:
    result = _gate_emu(CORPUS / name / f"{variant}.cu", CORPUS / name)
    assert result.accepted, f"{result.category}: {result.message}"
    assert result.category == "ok"


@pytest.mark.slow
def test_sgemm_large_tile_config_passes_the_emu_gate(tmp_path: Path) -> None:
    """The 128 x 128 configuration (picked when it fills the GPU: never at emu shapes) forced on."""
    src = (CORPUS / "sgemm" / "expert.cu").read_text()
    assert src.count("if (big_tiles >= 2LL * sms)") == 1
    (tmp_path / "expert.cu").write_text(src.replace("if (big_tiles >= 2LL * sms)", "if (true)"))
    result = _gate_emu(tmp_path / "expert.cu", CORPUS / "sgemm")
    assert result.accepted, f"{result.category}: {result.message}"


@pytest.mark.parametrize("name", PTX_EXPERTS)
def test_ptx_experts_on_emu_are_unsupported_or_pass(name: str) -> None:
    """Today: `unsupported`, naming the inline PTX. Once tensor-core emulation lands (issue 11),
    the only other acceptable verdict is a pass: never a mismatch, crash or race."""
    result = _gate_emu(CORPUS / name / "expert.cu", CORPUS / name)
    if result.category == "unsupported":
        assert not result.accepted
        assert "inline PTX" in result.message, result.message
    else:
        assert result.accepted, f"{result.category}: {result.message}"


PTX_MODELS = r"""
// ---- C++ models of the inline-PTX helpers, for the CPU emulator (test harness only) ----------
// cp.async: a synchronous 16-byte copy at issue time (the earliest a real copy can land, so a
// write into a buffer other warps still read shows as a race); ldmatrix and mma.sync: warp-level
// models built on __shfl_sync, element for element as the PTX ISA defines the fragments.
__device__ __forceinline__ uintptr_t smem_addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
__device__ __noinline__ void cp_async16(uintptr_t dst, const void* src, int src_bytes = 16) {
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (src_bytes == 16) v = *reinterpret_cast<const uint4*>(src);
    *reinterpret_cast<uint4*>(dst) = v;
}
__device__ __forceinline__ void cp_async_commit() {}
template <int N>
__device__ __forceinline__ void cp_async_wait() {}
__device__ __forceinline__ void cp_async_wait_all() {}
__device__ __forceinline__ uintptr_t model_shfl_addr(uintptr_t a, int src) {
    const unsigned lo = __shfl_sync(0xffffffffu, (unsigned)(a & 0xffffffffu), src);
    const unsigned hi = __shfl_sync(0xffffffffu, (unsigned)(a >> 32), src);
    return ((uintptr_t)hi << 32) | lo;
}
__device__ __noinline__ void ldmatrix_x4(uint32_t (&r)[4], uintptr_t addr) {
    const int lane = threadIdx.x % 32;
    for (int j = 0; j < 4; ++j) {
        const uintptr_t row = model_shfl_addr(addr, 8 * j + lane / 4);
        r[j] = reinterpret_cast<const uint32_t*>(row)[lane % 4];
    }
}
__device__ __noinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uintptr_t addr) {
    const int lane = threadIdx.x % 32;
    for (int j = 0; j < 4; ++j) {
        const uintptr_t r0 = model_shfl_addr(addr, 8 * j + 2 * (lane % 4));
        const uintptr_t r1 = model_shfl_addr(addr, 8 * j + 2 * (lane % 4) + 1);
        const uint32_t lo = reinterpret_cast<const uint16_t*>(r0)[lane / 4];
        const uint32_t hi = reinterpret_cast<const uint16_t*>(r1)[lane / 4];
        r[j] = lo | (hi << 16);
    }
}
__device__ __forceinline__ float model_bf16(uint32_t w, int half) {
    return __uint_as_float(half ? (w & 0xffff0000u) : (w << 16));  // bf16 is the top half of a float
}
__device__ __forceinline__ float model_f16(uint32_t w, int half) {
    return __half2float(__ushort_as_half((unsigned short)(half ? (w >> 16) : (w & 0xffffu))));
}
template <bool BF16>
__device__ __noinline__ void model_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int k = 0; k < 16; ++k) {
        const int hi = k >= 8 ? 1 : 0, h = k % 2, q = (k % 8) / 2;
        const uint32_t wa0 = __shfl_sync(0xffffffffu, a[hi * 2 + 0], g * 4 + q);
        const uint32_t wa1 = __shfl_sync(0xffffffffu, a[hi * 2 + 1], g * 4 + q);
        const uint32_t wb0 = __shfl_sync(0xffffffffu, hi ? b1 : b0, (2 * t) * 4 + q);
        const uint32_t wb1 = __shfl_sync(0xffffffffu, hi ? b1 : b0, (2 * t + 1) * 4 + q);
        const float ag = BF16 ? model_bf16(wa0, h) : model_f16(wa0, h);
        const float ag8 = BF16 ? model_bf16(wa1, h) : model_f16(wa1, h);
        const float bc0 = BF16 ? model_bf16(wb0, h) : model_f16(wb0, h);
        const float bc1 = BF16 ? model_bf16(wb1, h) : model_f16(wb1, h);
        d[0] = fmaf(ag, bc0, d[0]); d[1] = fmaf(ag, bc1, d[1]);
        d[2] = fmaf(ag8, bc0, d[2]); d[3] = fmaf(ag8, bc1, d[3]);
    }
}
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    model_mma<true>(d, a, b0, b1);
}
__device__ __forceinline__ void mma_f16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    model_mma<false>(d, a, b0, b1);
}
__device__ __forceinline__ float fast_exp2(float x) { return exp2f(x); }
"""


def with_ptx_models(src: str) -> str:
    """The expert's source with its inline-PTX helpers (smem_addr .. the kernel's template line)
    replaced by PTX_MODELS; pack_half2 (no PTX) is kept; shared addresses become pointers."""
    start = src.index("__device__ __forceinline__ uint32_t smem_addr(")
    end = src.rindex("template <", 0, src.index("__global__"))
    keep = re.search(r"__device__ __forceinline__ uint32_t pack_half2\(.*?\n}\n", src[start:end], re.S)
    out = src[:start] + PTX_MODELS + (keep.group(0) if keep else "") + src[end:]
    out = re.sub(r"const uint32_t (\w+) = smem_addr", r"const uintptr_t \1 = smem_addr", out)
    assert "asm" not in out
    return out


MODEL_CASES = [
    ("gemm_bf16", "expert.cu", ""),
    ("gemm_bf16", "expert.cu", "if (big_tiles >= 8LL * sms)"),
    ("attention_fwd", "expert.cu", ""),
    ("attention_fwd", "variants/expert_mi1.cu", ""),  # 16 query rows per warp, Q in registers
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "file", "force"),
    MODEL_CASES,
    ids=["gemm_bf16", "gemm_bf16-128x256", "attention_fwd", "attention_fwd-mi1"],
)
def test_ptx_experts_pass_the_emu_gate_with_ptx_models(
    tmp_path: Path, name: str, file: str, force: str
) -> None:
    src = with_ptx_models((CORPUS / name / file).read_text())
    if force:  # the large-tile configuration, which only GPU-filling shapes select
        assert src.count(force) == 1
        src = src.replace(force, "if (true)")
    (tmp_path / "expert.cu").write_text(src)
    result = _gate_emu(tmp_path / "expert.cu", CORPUS / name)
    assert result.accepted, f"{result.category}: {result.message}"
