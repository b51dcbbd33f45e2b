"""epilogue_staging: WMMA fragments stored into a shared-memory image of the block's tile and
streamed out in wide pieces go straight to global memory again (cuda_hgemm's base-kernel
epilogue), on an fp16 GEMM written here in that idiom."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, assert_refused_on, edited

from klineage.deopt.registry import get_operator, operators
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource
from klineage.source.syntax import int_program, run_int

OP = get_operator("epilogue_staging")
FOLDER = Path(__file__).resolve().parent / "data" / "deopt" / "epilogue_staging"
KERNEL = FOLDER / "staged_hgemm.cu"
DST = "*((int2*)(c_block + (i * 8 + threadIdx.x / 16) * N) + threadIdx.x % 16)"


def test_registered_with_the_staging_steps_backward_only() -> None:
    names = [o.name for o in operators()]
    assert names.index("smem_staging") < names.index("epilogue_staging") < names.index("vectorize")
    assert OP.category == "staging" and not OP.mechanical_apply


@pytest.mark.parametrize("canonical", [False, True])
def test_fragments_go_straight_to_global_memory(tmp_path: Path, canonical: bool) -> None:
    """Each fragment is stored at the tile's origin + its image row * N + its image column with
    leading dimension N; the barrier and the copy-out go; the emu gate accepts both kernels."""
    src = CudaSource.from_file(KERNEL)
    if canonical:
        src = canonical_form(src).source
    (site,) = OP.find(src)
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    out = OP.remove(src, site).text
    assert "wmma::store_matrix_sync(C + (((blockIdx.y*TILE_M*N+blockIdx.x*TILE_N)+(0*N))+0) + " in out
    assert "% TILE_N, acc[j], N, wmma::mem_row_major);" in out
    assert "__syncthreads" not in out and "int2" not in out
    assert OP.find(CudaSource.from_text(out)) == []
    if not canonical:
        assert_passes(KERNEL.read_text(), FOLDER, tmp_path, "staged.cu")
        assert_passes(out, FOLDER, tmp_path, "direct.cu")


@pytest.mark.parametrize(
    ("edit", "fact"),
    [
        # the copy-out puts two image pieces on one place in C: no map of the image onto the tile
        ((DST, DST.replace("+ threadIdx.x % 16)", "+ threadIdx.x % 8)")), "tile_image"),
        # the copy-out copies half the image: the other half never reaches C
        (("for (int i = 0; i < 4; ++i) {", "for (int i = 0; i < 2; ++i) {"), "tile_image"),
        # fragments stored column-major: the image is the transposed tile
        (("acc[j], TILE_N, wmma::mem_row_major", "acc[j], TILE_N, wmma::mem_col_major"), "tile_image"),
        # C written before the epilogue too: the order of the two writes would change
        (
            ("    half* c_block =", "    C[0] = __float2half(0.0f);\n    half* c_block ="),
            "output_only_in_copy",
        ),
        # C read before the barrier: another warp's direct fragment store could come first
        (
            (
                "            wmma::mma_sync(acc[j], a, b, acc[j]);",
                "            wmma::mma_sync(acc[j], a, b, acc[j]);\n            acc[j].x[0] += C[0];",
            ),
            "output_only_in_copy",
        ),
    ],
)
def test_refusals_name_the_failing_fact(edit: tuple[str, str], fact: str) -> None:
    assert_refused_on(OP, edited(KERNEL, edit), fact)


@pytest.mark.parametrize(
    "edit",
    [
        ("    __syncthreads();\n", ""),  # no barrier between the stores and the copy-out
        ("            *((int2*)(&image", "            *((int2*)(&image"),  # unchanged: one site
    ],
)
def test_shapes(edit: tuple[str, str]) -> None:
    found = OP.find(edited(KERNEL, edit))
    assert len(found) == (1 if edit[0] == edit[1] else 0)


def test_int_program_reads_integer_arithmetic_over_names() -> None:
    prog = int_program("(threadIdx.x / 32) * 16 + lane % 4")
    assert prog is int_program("(threadIdx.x / 32) * 16 + lane % 4")  # compiled once
    assert run_int(prog, {"threadIdx_x": 70, "lane": 7}) == 35
    assert run_int(prog, {"threadIdx_x": 70}) is None  # a name without a value
    assert int_program("f(x) + 1") is None and int_program("a[2]") is None
