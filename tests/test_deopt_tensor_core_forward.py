"""tensor_core forward: a naive 16-bit GEMM loop (bf16 or half converted to float, float sum) onto
mma.sync m16n8k16 fed by ldmatrix from zero-filled shared tiles; correct on odd shapes and every
operand layout on the emulator, with the alignment the hardware requires."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import DATA, apply_forward, assert_passes, emu_available

from klineage.deopt import wmma_gemm
from klineage.deopt.base import Refused
from klineage.deopt.tensor_core import TensorCore
from klineage.source.model import CudaSource

OP = TensorCore()
ROOT = Path(__file__).resolve().parents[1]
NT_HALF = DATA / "wmma_gemm" / "nt_half"


def _wmma(path: Path) -> CudaSource:
    return _wmma_text(path.read_text())


def _wmma_text(text: str) -> CudaSource:
    return apply_forward(OP, CudaSource.from_text(text, "naive.cu"))


def test_bf16_naive_loop_goes_onto_mma_sync() -> None:
    out = _wmma(ROOT / "expert_kernels" / "gemm_bf16" / "naive.cu")
    assert "<mma.h>" not in out.text and "wmma" not in out.text.split("__global__")[1]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 " in out.text
    # A is M x K, stored as it is; B is K x N, stored along n and read through .trans
    assert out.text.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 1
    assert out.text.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 1
    assert "float kl_acc[4][8][4];" in out.text  # a 64 x 64 warp tile: 4 x 8 tiles of 16 x 8
    # three stages of 64-wide K slices of the 16-bit elements it reads, in dynamic shared memory
    assert "typedef __nv_bfloat16 kl_As_stage[128][72];" in out.text
    assert "kl_As_stage* kl_As = reinterpret_cast<kl_As_stage*>(kl_smem + 0);" in out.text
    assert "typedef __nv_bfloat16 kl_Bs_stage[64][136];" in out.text  # B is K x N: stored along n
    assert (
        "cudaFuncSetAttribute(gemm_bf16_naive, cudaFuncAttributeMaxDynamicSharedMemorySize, 107520);"
        in out.text
    )
    assert (
        "gemm_bf16_naive<<<dim3((N + 127) / 128, (M + 127) / 128), dim3(128), 107520, stream>>>" in out.text
    )
    (site,) = OP.find(out)  # the backward step sees the PTX MMA, whose layout it does not rewrite
    assert site.details["kind"] == "ptx"


def test_transposed_half_operand_on_odd_shapes_passes_the_emu_gate(tmp_path: Path) -> None:
    out = _wmma(NT_HALF / "naive.cu")
    assert "Bt[n * K + k] : __float2half(0.0f)" in out.text  # zero outside the matrix
    # Bt is contiguous in k: its tile is stored n-major and read by ldmatrix without .trans
    assert "typedef __half kl_Bs_stage[128][72];" in out.text and ".trans" not in out.text
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 " in out.text
    assert_passes(out.text, NT_HALF, tmp_path, "nt_half_wmma.cu")


def test_tiles_go_by_16_byte_cp_async_through_a_three_stage_ring(tmp_path: Path) -> None:
    """Slice kt + 2 is copied while slice kt is multiplied, one barrier a slice; outside the fast
    path a chunk takes one 16-byte cp.async only when its 8 elements are in range, consecutive and
    aligned (K = 40: rows of 80 bytes, so the emu shapes run the cp.async path; M and N odd, so the
    element path too)."""
    linear = ROOT / "expert_kernels" / "linear_relu_bf16"
    out = _wmma(linear / "naive.cu")
    body = out.text.split("__global__")[1]
    # A and B, prologue and loop, each a fast path and a per-chunk one
    assert body.count("cp.async.cg.shared.global [%0], [%1], 16;") == 8
    assert "kl_last == kl_first + 7 && (reinterpret_cast<size_t>(kl_first) & 15) == 0" in body
    assert "cp.async.wait_group 1;" in body and "kl_s = kl_kt % 3, kl_k0 = kl_kt * 64;" in body
    assert body.count("__syncthreads();") == 1  # one a slice (the epilogue reads registers only)
    assert "typedef __nv_bfloat16 kl_Bs_stage[128][72];" in body  # W is N x K: stored along k
    assert_passes(out.text, linear, tmp_path, "linear_wmma.cu")


@pytest.mark.parametrize(
    "change",
    [
        {"__half2float(Bt[n * K + k])": "(float)(Bt[n * K + k])"},
        {"const __half* A,": "const float* A,", "__half2float(A[m * K + k])": "A[m * K + k]"},
        {"float s = 0.f;": "double s = 0.0;"},
    ],
    ids=["unconverted_factor", "fp32_factor", "double_sum"],
)
def test_a_site_only_with_two_16_bit_factors_and_a_float_sum(change: dict[str, str]) -> None:
    text = (NT_HALF / "naive.cu").read_text()
    assert len(OP.find_forward(CudaSource.from_text(text, "k.cu"))) == 1
    for a, b in change.items():
        assert a in text
        text = text.replace(a, b)
    assert OP.find_forward(CudaSource.from_text(text, "k.cu")) == []


def test_apply_refuses_a_site_whose_loop_is_gone() -> None:
    src = CudaSource.from_file(NT_HALF / "naive.cu")
    (site,) = OP.find_forward(src)
    other = CudaSource.from_text(src.text.replace("s += __half2float", "s -= __half2float"), "k.cu")
    with pytest.raises(Refused):
        OP.apply(other, site)


def test_an_ldg_read_is_copied_from_its_address(tmp_path: Path) -> None:
    """`__ldg(&A[i])` (ldg's forward step, often applied first) is copied from `&A[i]`."""
    text = (NT_HALF / "naive.cu").read_text()
    text = text.replace("__half2float(A[m * K + k])", "__half2float(__ldg(&A[m * K + k]))")
    out = _wmma_text(text)
    body = out.text.split("__global__")[1]
    assert "kl_first = &A[m * K + k];" in body and "&__ldg" not in body
    assert_passes(out.text, NT_HALF, tmp_path, "nt_half_ldg.cu")


@pytest.mark.parametrize(
    ("raw", "addr"),
    [
        ("A[(size_t)row * K + k]", "&A[(size_t)row * K + k]"),
        ("__ldg(&B[k * N + col])", "&B[k * N + col]"),
        ("A[f(x[1])]", "&A[f(x[1])]"),
        ("A[i] + B[j]", None),  # not one element: no address, element-by-element staging
        ("LOAD(A, i)", None),
    ],
)
def test_the_address_a_chunk_is_copied_from(raw: str, addr: str | None) -> None:
    assert wmma_gemm.address(raw) == addr


NN_TILES = DATA / "wmma_gemm" / "nn_bf16_tiles"


def test_whole_tiles_stage_without_a_test_per_element(tmp_path: Path) -> None:
    """A slice inside M, N and K goes by the block's fast path: one pointer a thread from the
    naive index, a 32-bit multiple of the row stride a chunk. The fixture's shapes take it (whole
    128 x 128 tiles, four slices round the three-stage ring) and leave it (M, N, K tails; a row
    stride of 196 elements, no multiple of 8): a wrong row offset in the fast path alone is caught."""
    out = _wmma(NN_TILES / "naive.cu")
    body = out.text.split("__global__")[1]
    assert "if (kl_a_ok && kl_row0 + 128 <= M && kl_k0 + 64 <= K) {" in body
    assert "if (kl_b_ok && kl_col0 + 128 <= N && kl_k0 + 64 <= K) {" in body
    assert "kl_b_ok = kl_p01 == kl_p00 + 1 && (reinterpret_cast<size_t>(kl_p00) & 15) == 0 &&" in body
    assert '"l"(kl_src + kl_i * 16 * kl_ld32)' in body and '"l"(kl_src + kl_i * 8 * kl_ld32)' in body
    assert_passes(out.text, NN_TILES, tmp_path, "nn_tiles.cu")
    broken = out.text.replace("kl_src + kl_i * 16 * kl_ld32", "kl_src + kl_i * 16 * kl_ld32 + 8")
    assert broken != out.text
    if emu_available():
        from klineage.gates.backend import GateOptions
        from klineage.gates.gate import gate

        r = gate(broken, NN_TILES, GateOptions(backend="emu"), name="nn_tiles_broken.cu")
        assert not r.accepted and r.category == "mismatch", r.message


def test_no_fast_path_where_a_guard_clause_is_no_bound() -> None:
    """`row % 3 == 2` bounds nothing: A's tile keeps the per-chunk tests; B's (col >= N) has the
    fast path."""
    text = (NN_TILES / "naive.cu").read_text()
    text = text.replace(
        "if (row >= M || col >= N) return;", "if (row >= M || row % 3 == 2 || col >= N) return;"
    )
    body = _wmma_text(text).text.split("__global__")[1]
    assert "kl_a_ok" not in body and "kl_b_ok && kl_col0 + 128 <= N" in body


def test_the_ring_fits_and_says_so() -> None:
    src = CudaSource.from_file(NN_TILES / "naive.cu")
    (site,) = OP.find_forward(src)
    fact = next(f for f in OP.preconditions(src, site) if f.name == "smem_fits")
    assert fact.holds and "107520 bytes" in fact.reason


TN = DATA / "wmma_gemm" / "tn_bf16"


def test_a_k_major_first_operand_goes_through_ldmatrix_trans(tmp_path: Path) -> None:
    """At (K, M) is contiguous along the output rows: its tile is stored k by k and read through
    `.trans` (whole tiles and tails on the emu shapes)."""
    out = _wmma(TN / "naive.cu")
    assert "typedef __nv_bfloat16 kl_As_stage[64][136];" in out.text
    assert out.text.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 2
    assert_passes(out.text, TN, tmp_path, "tn_mma.cu")
