"""smem_transpose: a 2-D shared tile stored transposed so that a warp reads it along a row."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, same_code

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource

OP = get_operator("smem_transpose")


def _canonical(operator: str, name: str) -> CudaSource:
    src, _ = fixture(operator, name)
    return canonical_form(src).source


def test_removal_stores_the_a_tile_row_major_and_the_gate_accepts_it(tmp_path: Path) -> None:
    """The transposed A tile goes back to [kBM][kBK] with every access swapped; the B tile,
    stored and read row-wise, is no site; apply on the result gives the expert back."""
    src = _canonical("smem_transpose", "thread_tile")
    _, wl = fixture("register_blocking", "product_threads")  # the same GEMM contract
    (site,) = OP.find(src)
    assert site.details["tile"] == "As" and OP.find_forward(src) == []
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    simpler = OP.remove(src, site)
    assert "__shared__ float As[kBM][kBK];" in simpler.text
    assert "As[e / kBK][e % kBK] = " in simpler.text
    assert "const float a = As[ty * kTM + i][kk];" in simpler.text
    assert OP.find(simpler) == []
    assert_passes(simpler.text, wl, tmp_path)
    (fwd,) = OP.find_forward(simpler)
    assert all(p.holds for p in OP.preconditions(simpler, fwd))
    assert same_code(OP.apply(simpler, fwd).text, src.text)


def test_a_warp_uniform_row_read_is_no_forward_site() -> None:
    """One row group per warp (`row0 = threadIdx.x / 64 * kTM`): every lane reads the same A
    word, a broadcast with no bank conflict, so there is nothing to transpose."""
    src = _canonical("register_blocking", "column_tile")
    assert OP.find(src) == [] and OP.find_forward(src) == []


def test_refuses_a_tile_that_is_also_read_through_a_pointer() -> None:
    """A pointer into the tile would keep reading the old layout after the swap."""
    src = _canonical("smem_transpose", "thread_tile")
    text = src.text.replace(
        "__syncthreads();\n        for (int kk",
        "__syncthreads();\n        const float* p0 = &As[0][0];\n        C[0] = p0[1];\n        for (int kk",
        1,
    )
    assert text != src.text
    s = CudaSource.from_text(text)
    (site,) = OP.find(s)
    with pytest.raises(Refused, match="subscripted_only"):
        OP.remove(s, site)


def test_a_store_that_splits_two_different_indices_is_no_site() -> None:
    """`As[e % kBK][f / kBK]` splits two different linear indices: not one thread's element moved
    across the tile's diagonal, so the layout cannot be read as transposed."""
    src = _canonical("smem_transpose", "thread_tile")
    text = src.text.replace("As[e % kBK][e / kBK]", "As[e % kBK][(e + 1) / kBK]")
    assert text != src.text
    assert OP.find(CudaSource.from_text(text)) == []


def test_a_tile_indexed_by_its_own_element_is_no_site() -> None:
    """`As[kk][As[0][0] > 0.f ? ...]`: swapping the outer access would rewrite the inner one
    inside it; such a tile is left alone."""
    src = _canonical("smem_transpose", "thread_tile")
    text = src.text.replace("As[kk][ty * kTM + i]", "As[kk][(As[0][ty] > 0.f ? ty : ty) * kTM + i]")
    assert text != src.text
    assert OP.find(CudaSource.from_text(text)) == []
