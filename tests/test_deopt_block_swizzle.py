"""block_swizzle: blocks take their output tiles in the plain order again (the z index no longer
folds into the columns, odd z slices no longer walk the rows backwards; cuda_hgemm's BLOCK_STRIDE
swizzle), on an sgemm written here in that idiom."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, assert_refused_on, edited

from klineage.deopt.registry import get_operator, operators
from klineage.source.model import CudaSource

OP = get_operator("block_swizzle")
REPO = Path(__file__).resolve().parents[1]
KERNEL = Path(__file__).resolve().parent / "data" / "deopt" / "block_swizzle" / "swizzled_sgemm.cu"
WORKLOAD = REPO / "expert_kernels" / "sgemm"
ROW = "(blockIdx.z % 2) ? (gridDim.y - blockIdx.y - 1) * TILE : blockIdx.y * TILE"


def _src(*edits: tuple[str, str]) -> CudaSource:
    return edited(KERNEL, *edits)


def test_registered_with_the_tuning_steps_backward_only() -> None:
    names = [o.name for o in operators()]
    assert names.index("tile_size") < names.index("block_swizzle") < names.index("unrolled_tree")
    assert OP.category == "tuning" and not OP.mechanical_apply


def test_plain_block_order(tmp_path: Path) -> None:
    """The conditional becomes its plain branch, the fold blockIdx.x, the grid (X * Z, Y); the emu
    shapes with N >= 33 run two z slices, so the reversed order is exercised before the step."""
    src = CudaSource.from_file(KERNEL)
    (site,) = OP.find(src)
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    out = OP.remove(src, site).text
    assert "const int tile_row = blockIdx.y * TILE;" in out
    assert "const int tile_col = (blockIdx.x) * TILE;" in out
    assert "dim3 grid(STRIDE * ((N + TILE * STRIDE - 1) / (TILE * STRIDE)), (M + TILE - 1) / TILE);" in out
    assert "blockIdx.z" not in out and OP.find(CudaSource.from_text(out)) == []
    assert_passes(KERNEL.read_text(), WORKLOAD, tmp_path, "swizzled.cu")
    assert_passes(out, WORKLOAD, tmp_path, "plain_order.cu")


@pytest.mark.parametrize(
    ("edits", "fact"),
    [
        # blocks communicate: the order they run in may matter
        (
            (
                (
                    "    float acc = 0.0f;",
                    "    if (row == 0 && col == 0) atomicAdd(C, 0.0f);\n    float acc = 0.0f;",
                ),
            ),
            "blocks_independent",
        ),
        # the row index read again outside the swizzle: the two reads would disagree
        (
            (
                (
                    "const int row = tile_row + threadIdx.y;",
                    "const int row = tile_row + threadIdx.y + 0 * blockIdx.y;",
                ),
            ),
            "reversed_axis_read_once",
        ),
        # gridDim.x read outside the fold: folding z into x changes it
        (
            (("if (row >= M || col >= N) return;", "if (row >= M || col >= N || gridDim.x == 0) return;"),),
            "fold_only_z",
        ),
        # the launch's grid has no z size to fold
        (
            (
                (
                    "dim3 grid(STRIDE, (M + TILE - 1) / TILE, (N + TILE * STRIDE - 1) / (TILE * STRIDE));",
                    "dim3 grid(STRIDE, (M + TILE - 1) / TILE);",
                ),
            ),
            "fold_only_z",
        ),
    ],
)
def test_refusals_name_the_failing_fact(edits: tuple[tuple[str, str], ...], fact: str) -> None:
    assert_refused_on(OP, _src(*edits), fact)


@pytest.mark.parametrize(
    "row",
    [
        "(blockIdx.z % 2) ? (gridDim.y - blockIdx.y) * TILE : blockIdx.y * TILE",  # not a reversal
        "(threadIdx.x % 2) ? (gridDim.y - blockIdx.y - 1) * TILE : blockIdx.y * TILE",  # not a block parity
        "(blockIdx.z % 2) ? (gridDim.x - blockIdx.y - 1) * TILE : blockIdx.y * TILE",  # another axis's extent
    ],
)
def test_other_conditionals_are_no_site(row: str) -> None:
    assert OP.find(_src((ROW, row))) == []


def test_without_a_fold_only_the_order_changes() -> None:
    """Parity of x reversing y, no z: the conditional alone, the launch untouched."""
    src = _src(
        (ROW, "(blockIdx.x & 1) ? (gridDim.y - blockIdx.y - 1) * TILE : blockIdx.y * TILE"),
        ("(blockIdx.z * gridDim.x + blockIdx.x)", "blockIdx.x"),
    )
    (site,) = OP.find(src)
    assert {p.name for p in OP.removal_preconditions(src, site)} == {
        "blocks_independent",
        "reversed_axis_read_once",
    }
    out = OP.remove(src, site).text
    assert "const int tile_row = blockIdx.y * TILE;" in out
    assert "dim3 grid(STRIDE, (M + TILE - 1) / TILE, (N + TILE * STRIDE - 1) / (TILE * STRIDE));" in out
