"""flash_fusion's tensor-core forward on mma.sync: scores, weights and output stay in registers
(P never goes through shared memory), K and V come by cp.async one stage ahead, and key tiles the
mask removes whole (above a causal diagonal) are neither staged nor multiplied."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import DATA, apply_forward, assert_passes, emu_available

from klineage.deopt.flash_fusion import FlashFusion
from klineage.source.model import CudaSource

OP = FlashFusion()
ROOT = Path(__file__).resolve().parents[1]
ATTN = ROOT / "expert_kernels" / "attention_fwd"
CAUSAL = DATA / "flash_fusion" / "fp16_causal"
_MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def _fuse(path: Path) -> str:
    return apply_forward(OP, CudaSource.from_file(path)).text


def test_scores_weights_and_output_stay_in_mma_registers() -> None:
    out = _fuse(ATTN / "naive.cu")
    assert "nvcuda::wmma" not in out and "kl_ph" not in out  # no WMMA, no 16-bit P tile in shared memory
    # Q K^T (Q fragments from registers, or from shared memory past 128 columns) and P V
    assert out.count(_MMA) == 6
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in out  # V^T fragments
    # two adjacent 8-key score tiles packed as the A operand of P V
    assert "kl_pa[kl_k][0] = ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k][0])) |" in out
    # row max and sum over the quad of lanes that share a row
    assert (
        "__shfl_xor_sync(0xffffffffu, kl_mt[kl_i], 2)" in out
        and "__shfl_xor_sync(0xffffffffu, kl_sum[kl_i], 2)" in out
    )
    # the next tile's copy in flight while this one is multiplied, when two stages fit
    assert 'asm volatile("cp.async.wait_group 1;\\n" ::: "memory");' in out


def test_dead_key_tiles_are_probed_only_after_a_masked_score_and_skipped() -> None:
    out = _fuse(CAUSAL / "naive.cu")
    assert "kl_saw = __syncthreads_or(kl_saw);" in out
    assert "kl_nd = kl_saw ? __syncthreads_and(kl_all) : 0;" in out
    assert "if (kl_nu && !kl_nd) {" in out  # a dead tile is not staged
    assert "if (!kl_dead) {" in out  # nor multiplied


def test_odd_lengths_padded_heads_and_causal_pass_the_emu_gate(tmp_path: Path) -> None:
    assert_passes(_fuse(CAUSAL / "naive.cu"), CAUSAL, tmp_path, "causal_flash.cu")


@pytest.mark.skipif(not emu_available(), reason="needs the emu backend")
def test_the_causal_shapes_reach_dead_tiles() -> None:
    # poisoning the running sum in the dead-tile branch must change the result: the skip is taken
    from klineage.gates.backend import GateOptions
    from klineage.gates.gate import gate

    out = _fuse(CAUSAL / "naive.cu")
    dead = "        } else {\n            kl_saw = 1;\n        }"
    assert out.count(dead) == 1
    poisoned = out.replace(
        dead, "        } else {\n            kl_saw = 1;\n            kl_l[0] = NAN;\n        }"
    )
    r = gate(poisoned, CAUSAL, GateOptions(backend="emu"), name="poisoned.cu")
    assert not r.accepted and r.category == "mismatch", (r.category, r.message)
