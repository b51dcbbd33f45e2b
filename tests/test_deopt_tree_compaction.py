"""tree_compaction: the divergent modulo tree <-> the strided-index tree (same pairs, warps retire)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator
from klineage.deopt.tree_addressing import TreeAddressing
from klineage.deopt.tree_compaction import TreeCompaction
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource
from klineage.source.text import normalize

CANON = Path(__file__).parent / "data" / "canon" / "block_sum"

#: the strided-index idiom as tutorials write it: `blockDim.x` as the bound, a signed index,
#: braces around the combine, and a `#define` block size
STRIDED = """
#define BLOCK 256
__global__ void block_sums(float *in, float *out) {
    __shared__ float part[BLOCK];
    unsigned int t = threadIdx.x;
    part[t] = in[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
        int k = 2 * stride * t;
        if (k < blockDim.x) {
            part[k] += part[k + stride];
        }
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = part[0];
}
"""


def test_strided_index_tree_backward_is_the_modulo_tree_and_forward_restores_it() -> None:
    op = TreeCompaction()
    src = CudaSource.from_text(STRIDED)
    (site,) = op.find(src)
    assert site.details["form"] == "strided" and site.details["bound"] == "blockDim.x"
    out = op.remove(src, site)
    assert "if (t % (2 * stride) == 0) part[t] += part[t + stride];" in out.text
    assert op.find(out) == [] and TreeAddressing().find(out) == []
    (fwd,) = op.find_forward(out)
    back = op.apply(out, fwd).text
    assert (
        "unsigned int index = 2 * stride * t;" in back
        and "if (index < blockDim.x) part[index] += part[index + stride];" in back
    )


def test_walk_from_sequential_passes_through_strided_to_modulo_under_the_gate(tmp_path: Path) -> None:
    """The two addressing steps of a textbook reduction, one operator each, each gated."""
    seq = canonical_form(CudaSource.from_file(CANON / "expert.cu")).source
    addressing, compaction = TreeAddressing(), TreeCompaction()
    (s1,) = addressing.find(seq)
    strided = addressing.remove(seq, s1)
    (s2,) = compaction.find(strided)
    modulo = compaction.remove(strided, s2)
    # the canonical form reads the `t` alias as threadIdx.x itself (canon thread_index_alias)
    assert "if (threadIdx.x % (2 * s) == 0) buf[threadIdx.x] += buf[threadIdx.x + s];" in modulo.text
    assert_passes(modulo.text, CANON, tmp_path)
    (f2,) = compaction.find_forward(modulo)
    assert normalize(compaction.apply(modulo, f2).text) == normalize(strided.text)


def test_refuses_a_tree_over_a_local_array() -> None:
    op = TreeCompaction()
    src = CudaSource.from_text(STRIDED.replace("__shared__ float part[BLOCK];", "float part[BLOCK];"))
    (site,) = op.find(src)
    with pytest.raises(Refused, match="shared_array"):
        op.remove(src, site)


def test_registered() -> None:
    assert get_operator("tree_compaction").name == "tree_compaction"


@settings(max_examples=25, deadline=None)
@given(
    block=st.sampled_from([32, 64, 128, 256, 1024]),
    combine=st.sampled_from(["{a}[{i}] += {a}[{i} + {s}];", "{a}[{i}] = fmaxf({a}[{i}], {a}[{i} + {s}]);"]),
    names=st.sampled_from(
        [("part", "stride", "t", "k"), ("buf", "s", "tid", "idx"), ("red", "h", "me", "j")]
    ),
)
def test_remove_then_apply_gives_the_strided_tree_back(
    block: int, combine: str, names: tuple[str, ...]
) -> None:
    """Any array, stride, thread and index name, a sum or a max, any power-of-two block."""
    a, s, t, i = names
    text = (
        STRIDED.replace("BLOCK 256", f"BLOCK {block}")
        .replace("part[k] += part[k + stride];", combine.format(a=a, i=i, s=s))
        .replace("part", a)
        .replace("stride", s)
        .replace("unsigned int t ", f"unsigned int {t} ")
        .replace("* t;", f"* {t};")
        .replace("[t]", f"[{t}]")
        .replace("(t == 0)", f"({t} == 0)")
        .replace("int k", f"int {i}")
        .replace("(k <", f"({i} <")
    )
    op = TreeCompaction()
    src = CudaSource.from_text(text)
    (site,) = op.find(src)
    out = op.remove(src, site)
    assert f"if ({t} % (2 * {s}) == 0)" in out.text
    (fwd,) = op.find_forward(out)
    again = op.apply(out, fwd)
    assert op.find(again) and f"= 2 * {s} * {t};" in again.text
