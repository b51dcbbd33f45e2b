"""tiled_online_softmax: a running max and sum carried across key tiles (the output row rescaled at
each tile) becomes three passes over the key tiles, one per phase of the plain softmax (the
flash-attention-minimal form, on an attention kernel written here in that idiom)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, assert_refused_on, edited

from klineage.deopt.registry import get_operator, operators
from klineage.source.model import CudaSource
from klineage.source.syntax import eval_real

OP = get_operator("tiled_online_softmax")
FOLDER = Path(__file__).resolve().parent / "data" / "deopt" / "tiled_online_softmax"
KERNEL = FOLDER / "tiled_attention.cu"
STATE = "mh[r * TILE + threadIdx.x]"


def _src(*edits: tuple[str, str]) -> CudaSource:
    return edited(KERNEL, *edits)


def test_registered_with_the_fusions_backward_only() -> None:
    names = [o.name for o in operators()]
    assert names.index("online_softmax") < names.index("tiled_online_softmax") < names.index("grid_stride")
    assert OP.category == "fusion" and not OP.mechanical_apply
    assert OP.find_forward(CudaSource.from_file(KERNEL)) == []


def test_three_passes_over_the_key_tiles(tmp_path: Path) -> None:
    """Max pass, sum pass (against the final max), output pass (P V / sum added per tile); the
    state restarts at the first key tile; the emu gate accepts the result."""
    src = CudaSource.from_file(KERNEL)
    (site,) = OP.find(src)
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    out = OP.remove(src, site).text
    assert out.count("for (int t = 0; t < seq / TILE; ++t) {") == 3
    assert "float tile_max = t == 0 ? (-INFINITY) : mh[r * TILE + threadIdx.x];" in out
    assert "float tile_sum = t == 0 ? (0.0f) : sh[r * TILE + threadIdx.x];" in out
    assert "float new_sum = sh[r * TILE + threadIdx.x];" in out
    assert "oh[(r * TILE + threadIdx.x) * dim + e] = t == 0 ? acc / new_sum : " in out
    assert "old_max" not in out and "old_sum" not in out and "new_max" not in out
    assert OP.find(CudaSource.from_text(out)) == []
    assert_passes(out, FOLDER, tmp_path, "three_passes.cu")


@pytest.mark.parametrize(
    ("edits", "fact"),
    [
        # the old sum is not rescaled to the new max
        ((("expf(old_max - new_max) * old_sum +", "old_sum +"),), "online_sum_rescale"),
        # the output row is not rescaled by the old sum
        (
            (("(old_sum * expf(old_max - new_max) * oh", "(expf(old_max - new_max) * oh"),),
            "online_output_rescale",
        ),
        # the running max is read after the tiles: three passes would change what it reads
        (
            (
                (
                    "        __syncthreads();\n    }\n}",
                    "        __syncthreads();\n    }\n    oh[0] += mh[0];\n}",
                ),
            ),
            "state_only_in_update",
        ),
        # the score loop also accumulates into global memory: each pass would add again
        (
            (
                (
                    "                row_scores[c] = dot * scale;",
                    "                row_scores[c] = dot * scale;\n                out[0] += 0.0f;",
                ),
            ),
            "phases_write_no_global",
        ),
        # every thread updates the same state element
        (((STATE, "mh[r * TILE]"), ("sh[r * TILE + threadIdx.x]", "sh[r * TILE]")), "thread_private_rows"),
    ],
)
def test_refusals_name_the_failing_fact(edits: tuple[tuple[str, str], ...], fact: str) -> None:
    assert_refused_on(OP, _src(*edits), fact)


@pytest.mark.parametrize(
    "edit",
    [
        # a store besides the state's and the output's in the query-tile body
        (
            "            mh[r * TILE + threadIdx.x] = new_max;",
            "            mh[r * TILE + threadIdx.x] = new_max;\n            oh[0] = 0.0f;",
        ),
        # the new max is not stored back to the state it was loaded from
        ("mh[r * TILE + threadIdx.x] = new_max;", "mh[r * TILE + threadIdx.x] = tile_max;"),
        # the key-tile loop does more than the query-tile loop and barriers
        ("        __syncthreads();\n        for (int r", "        oh[0] = 1.0f;\n        for (int r"),
    ],
)
def test_other_shapes_are_no_site(edit: tuple[str, str]) -> None:
    assert OP.find(_src(edit)) == []


def test_eval_real_reads_the_update_formulas_only() -> None:
    env = {"a": 1.0, "b": 2.0}
    assert eval_real("(1 / b) * (expf(a - b) * 2.0f + fmaxf(a, b))", env) == pytest.approx(
        0.5 * (2.718281828459045**-1 * 2 + 2)
    )
    assert eval_real("(float)a", env) is None
    assert eval_real("x[1] + a", env) is None
    assert eval_real("c + a", env) is None
