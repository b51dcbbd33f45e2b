"""block_row_of_warps: a row per block of warps -> a row per warp (block_per_row's removal, then
warp_per_row's forward step, as one edit), so a walk from a block-per-row kernel holds the
warp-per-row state (llm.c layernorm kernel5 -> kernel4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator, operators
from klineage.source.model import CudaSource

OP = get_operator("block_row_of_warps")
REPO = Path(__file__).resolve().parents[1]
KERNEL = Path(__file__).resolve().parent / "data" / "deopt" / "block_row_of_warps" / "layernorm_block_rows.cu"
WORKLOAD = REPO / "heldout" / "layernorm_fp32"


def test_registered_between_warp_per_row_and_block_per_row() -> None:
    names = [o.name for o in operators()]
    assert names.index("warp_per_row") < names.index("block_row_of_warps") < names.index("block_per_row")
    assert not OP.mechanical_apply and OP.find_forward(CudaSource.from_file(KERNEL)) == []


def test_a_block_of_warps_per_row_becomes_a_warp_per_row(tmp_path: Path) -> None:
    """Warp partials through one slot per warp, re-reduced by every warp: the slots and the barrier
    go, each warp takes a row (grid in warps), and warp_per_row's removal applies next."""
    src = CudaSource.from_file(KERNEL)
    (site,) = OP.find(src)
    assert site.operator == "block_row_of_warps"
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    out = OP.remove(src, site)
    assert "const int kl_row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;" in out.text
    assert "__syncthreads" not in out.text and "part_s" not in out.text
    assert "for (int c = lane; c < N; c += 32)" in out.text
    assert_passes(out.text, WORKLOAD, tmp_path, "warp_rows.cu")
    warp = get_operator("warp_per_row")
    (back,) = warp.find(out)
    assert all(p.holds for p in warp.removal_preconditions(out, back))


@pytest.mark.parametrize(
    ("edit", "fact"),
    [
        # a slot read outside the reductions: block_per_row's removal refuses, so does this step
        (("yr[c] = (xr[c] - mean)", "yr[c] = (xr[c] - mean + part_s[1] * 0.f)"), "exchange_only_reductions"),
        # a thread per row holds, but its loop steps by 2: warp_per_row's forward step refuses it
        (
            (
                "for (int c = threadIdx.x; c < N; c += blockDim.x) {",
                "for (int c = threadIdx.x; c < N; c += 2 * blockDim.x) {",
            ),
            "rows_independent",
        ),
    ],
)
def test_both_steps_facts_are_its_facts(edit: tuple[str, str], fact: str) -> None:
    text = KERNEL.read_text()
    assert edit[0] in text
    src = CudaSource.from_text(text.replace(*edit))
    (site,) = OP.find(src)
    assert {p.name for p in OP.removal_preconditions(src, site) if not p.holds} == {fact}
    with pytest.raises(Refused, match=fact):
        OP.remove(src, site)
