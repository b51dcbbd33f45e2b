"""expert_kernels/attention_fwd/variants/expert_knobs.cu's compile-time knobs (KL_* macros, issue 25): a GPU run
sweeps the design space with variant files that differ only in the #defines prepended to the
expert, so every knob path must stay a correct kernel. The emu gate checks three variants that
between them take every non-default path (Q in registers, softmax steps narrower than the K/V
tile, looped and unrolled, stale maxima, three stages, 16-row warps, 8 warps, 64-query blocks,
32- and 128-row K/V tiles), and a knob value the kernel cannot build is refused at compile time."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from tests.conftest import define_lines

ATTN = Path(__file__).resolve().parent.parent / "expert_kernels" / "attention_fwd"


def _variant(tmp_path: Path, defines: dict[str, int]) -> Path:
    """The knob file with `defines` prepended, as the GPU sweep writes its variants."""
    out = tmp_path / "variant.cu"
    head = define_lines(",".join(f"{k}={v}" for k, v in defines.items()))
    out.write_text(head + (ATTN / "variants" / "expert_knobs.cu").read_text())
    return out


def _gate(path: Path):
    # one seed: the knob paths, not the inputs, are what this test is about
    return gate(path, ATTN, GateOptions(backend="emu", seeds=(0,), timeout_s=300.0), use_cache=False)


VARIANTS = {
    "qregs-bn16-slack8-3stages": {"KL_Q_IN_REGS": 1, "KL_BN": 16, "KL_RESCALE_SLACK": 8, "KL_STAGES": 3},
    "16rows-8warps-bkv32": {"KL_ROWS_PER_WARP": 16, "KL_WARPS": 8, "KL_BKV": 32, "KL_MIN_BLOCKS": 1},
    # 64-query blocks: two per emu shape; a 128-row K/V tile reaches past a causal block's rows
    "16rows-4warps-bkv128-bn32-unrolled": {
        "KL_ROWS_PER_WARP": 16,
        "KL_BKV": 128,
        "KL_BN": 32,
        "KL_UNROLL_STEPS": 1,
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("defines", VARIANTS.values(), ids=VARIANTS.keys())
def test_knob_variant_passes_the_emu_gate(tmp_path: Path, defines: dict[str, int]) -> None:
    r = _gate(_variant(tmp_path, defines))
    assert r.accepted and r.category == "ok", f"{r.category}: {r.message}"


@pytest.mark.parametrize(
    "defines",
    [{"KL_ROWS_PER_WARP": 24}, {"KL_WARPS": 8, "KL_ROWS_PER_WARP": 32}, {"KL_BKV": 64, "KL_BN": 48}],
    ids=["rows-not-m16-tiles", "query-tile-past-128", "bn-not-dividing-bkv"],
)
def test_a_knob_value_the_kernel_cannot_build_is_refused(tmp_path: Path, defines: dict[str, int]) -> None:
    r = _gate(_variant(tmp_path, defines))
    assert not r.accepted and r.category == "compile_error", f"{r.category}: {r.message}"
