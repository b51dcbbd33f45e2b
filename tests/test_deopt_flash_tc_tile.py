"""flash_fusion's tensor-core kernel on its larger tile: 64 query rows on 4 warps (16 rows each)
sharing one stage of 64 keys, the stage read through one pointer per row (16-byte vectors when it
can), the shared-memory budget of that tile, and the per-element fallback for a key row that is not
one contiguous run (keys stored transposed) beside value rows that are not 16-byte aligned."""

from __future__ import annotations

from pathlib import Path

from deopt_parallel_checks import DATA, apply_forward, assert_passes

from klineage.deopt import _flash_tc_emit as TC
from klineage.deopt.flash_fusion import FlashFusion
from klineage.source.model import CudaSource

OP = FlashFusion()
ROOT = Path(__file__).resolve().parents[1]
ATTN = ROOT / "expert_kernels" / "attention_fwd"
FP16 = DATA / "flash_fusion" / "fp16_heads"
KT = DATA / "flash_fusion" / "fp16_kt"


def _fuse(src: CudaSource) -> CudaSource:
    return apply_forward(OP, src)


def test_a_block_is_four_warps_of_16_query_rows_over_64_key_stages() -> None:
    out = _fuse(CudaSource.from_file(ATTN / "naive.cu")).text
    assert "attn_scores_flash<<<(unsigned)(((BH*S) + 63) / 64), 128, kl_smem, stream>>>" in out
    assert "const int kl_w0 = kl_warp * 16;" in out  # a warp's own 16 query rows
    assert "kl_j0 += 64" in out and "float kl_s[8][4];" in out  # 64 keys a stage: 8 mma score tiles a warp
    # K and V rows staged through one pointer per row, 16 bytes at a time (cp.async) when aligned
    assert '"l"((kl_kq[kl_i] + kl_c))' in out and '"l"((kl_vq[kl_i] + kl_c))' in out
    # one value-lambda call per score on the staged product (its row's position in the head
    # computed once per row); the direct score only off the staged path
    fast = "kl_s[kl_f][kl_e] = kl_rk[kl_e >> 1] && kl_j < kl_len ? kl_vrk(kl_r, kl_j, kl_rm[kl_e >> 1], kl_d) : -INFINITY;"
    body = out.split("const long long kl_r0 = ")[1]  # past the lambdas
    assert body.index(fast) < body.index("kl_v = kl_direct(kl_r * kl_len + kl_j);")


def test_the_shared_memory_budget_is_the_64_row_tile_s() -> None:
    text = (FP16 / "naive.cu").read_text()
    for size, fits in ((256, True), (512, False)):
        fixed = text.replace("(Q, K, S, BH, M, N, D, alpha)", f"(Q, K, S, BH, M, N, {size}, alpha)").replace(
            "(S, V, O, BH, M, N, E)", f"(S, V, O, BH, M, N, {size})"
        )
        src = CudaSource.from_text(fixed, "k.cu")
        (site,) = OP.find_forward(src)
        facts = {f.name: f for f in OP.preconditions(src, site)}
        assert facts["smem_budget"].holds is fits, (size, TC.smem_value(size, size))
    # the fallback's fp32 weights, two row-pointer arrays per stage, Q and the K and V stages
    # (16-bit, rows padded by 8); the fp32 output tile only past 128 value columns
    assert TC.smem_value(128, 128, 2) == 64 * 68 * 4 + 2 * 2 * 64 * 8 + (64 * 136 + 2 * 64 * (136 + 136)) * 2
    assert TC.smem_value(256, 256, 1) == (64 * 68 + 64 * 260) * 4 + 2 * 2 * 64 * 8 + (64 * 264 + 64 * 528) * 2
    assert 2 * TC.smem_value(128, 128, 2) <= 228 * 1024 - 2 * 1024  # two blocks an SM at D 128


def test_transposed_keys_and_unaligned_value_rows_pass_the_emu_gate(tmp_path: Path) -> None:
    out = _fuse(CudaSource.from_file(KT / "naive.cu"))
    assert "kl_dq - 1) == kl_ptr + (kl_dq - 1)" in out.text  # each key row: is its last element at n - 1?
    assert_passes(out.text, KT, tmp_path, "kt_flash.cu")


def test_the_output_tile_stays_in_registers_up_to_128_columns() -> None:
    out = _fuse(CudaSource.from_file(ATTN / "naive.cu")).text
    assert "const bool kl_oreg = kl_dvp <= 128;" in out
    assert "float kl_m[2] = {-INFINITY, -INFINITY}, kl_l[2] = {0.0f, 0.0f}, kl_o[16][4];" in out
    # the mma accumulator layout is documented: each element's row is the lane's g or g + 8
    assert "kl_o[kl_n][kl_e] *= kl_al[kl_e >> 1];" in out


def test_wider_values_than_the_register_tile_pass_the_emu_gate(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    # one register column tile: value width 16 stays in registers, 24 goes through shared memory
    monkeypatch.setattr(TC, "OREG", 1)
    out = _fuse(CudaSource.from_file(FP16 / "naive.cu"))
    assert "const bool kl_oreg = kl_dvp <= 16;" in out.text
    assert_passes(out.text, FP16, tmp_path, "fp16_oreg1.cu")
