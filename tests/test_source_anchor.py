"""Anchors: readable, JSON round-trip, stable under unrelated edits, None when the construct is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from klineage.errors import SourceError
from klineage.source.anchor import Anchor
from klineage.source.edit import Edit, apply_edits, delete, insert_before
from klineage.source.model import CudaSource
from klineage.source.text import normalize

DATA = Path(__file__).parent / "data" / "source"
SRC = CudaSource.from_file(DATA / "softmax.cu")
KERNEL = SRC.kernels[0]


def _targets(src: CudaSource) -> list:
    """Nodes inside softmax_kernel worth anchoring: calls, loops, ifs, declarations, launches."""
    k = src.node_for(src.kernels[0])
    wanted = {"call_expression", "for_statement", "if_statement", "declaration", "expression_statement"}
    out = [n for n in src.nodes_of_type(*wanted) if k.start_byte < n.start_byte < k.end_byte]
    return out + [src.node_for(ls) for ls in src.launch_sites] + [k]


TARGETS = _targets(SRC)
ANCHORS = [SRC.anchor(n) for n in TARGETS]


def test_anchor_path_and_str() -> None:
    call = SRC.calls("__shfl_sync")[0]
    a = SRC.anchor(call)
    assert a.path == "kernel:softmax_kernel/if[3]/call:__shfl_sync[0]"
    assert (a.function, a.node_kind, a.line, a.end_line) == ("softmax_kernel", "call_expression", 64, 64)
    assert a.fingerprint == "__shfl_sync(0xffffffff,warp_sum(s),0)"
    assert str(a).endswith(
        "softmax.cu:64 kernel:softmax_kernel/if[3]/call:__shfl_sync[0] (call_expression) "
        "`__shfl_sync(0xffffffff,warp_sum(s),0)`"
    )
    loop = SRC.anchor(SRC.pragmas[2].loop)
    assert loop.path == "kernel:softmax_kernel/for[0]" and loop.fingerprint.startswith(
        "for(int c=threadIdx.x"
    )
    assert SRC.anchor(SRC.launch_sites[1]).path == "launcher:softmax_f16/launch:softmax_kernel[0]"


def test_every_anchor_resolves_to_its_node() -> None:
    assert len(ANCHORS) > 50
    paths = [a.path for a in ANCHORS]
    assert len(set(paths)) == len(paths)
    for node, a in zip(TARGETS, ANCHORS, strict=True):
        assert SRC.node_at(a) == node, a


def test_overloaded_names_and_file_scope() -> None:
    specialized = SRC.device_functions[1]
    a = SRC.anchor(specialized)
    assert a.path == "device:to_float[1]" and SRC.node_at(a) == SRC.node_for(specialized)
    include = SRC.nodes_of_type("preproc_include")[1]
    b = SRC.anchor(include)
    assert b.path.startswith("file/") and b.function is None and SRC.node_at(b) == include


def test_json_round_trip() -> None:
    for a in ANCHORS[:10]:
        again = Anchor.from_dict(json.loads(json.dumps(a.to_dict())))
        assert again == a
    with pytest.raises(SourceError, match="missing"):
        Anchor.from_dict({"file": "x"})


def test_construct_gone_resolves_to_none() -> None:
    call = SRC.calls("__shfl_sync")[0]
    a = SRC.anchor(call)
    stmt = SRC.node_for(call).parent.parent  # the `s = __shfl_sync(...);` statement
    edited = apply_edits(SRC, [delete(SRC, stmt)])
    assert edited.node_at(a) is None
    loop = SRC.anchor(SRC.loops[3])  # second loop of the kernel (the sum)
    edited = apply_edits(SRC, [delete(SRC, SRC.loops[3])])
    assert edited.node_at(loop) is None  # for[2] moved into its place but is another loop
    assert edited.node_at(SRC.anchor(SRC.loops[4])) is not None


def test_survives_new_loop_in_same_function() -> None:
    a = SRC.anchor(SRC.loops[3])
    first = SRC.loops[2]
    edit = insert_before(first, "for (int q = 0; q < 2; ++q) { m += 0.f; }\n    ")
    edited = apply_edits(SRC, [edit])
    node = edited.node_at(a)
    assert node is not None and edited.text_of(node) == SRC.text_of(SRC.loops[3])


def test_function_renamed_resolves_to_none() -> None:
    name = SRC.node_for(KERNEL)
    ident = next(
        n
        for n in SRC.nodes_of_type("identifier")
        if SRC.text_of(n) == "softmax_kernel" and name.start_byte < n.start_byte < name.end_byte
    )
    edited = apply_edits(SRC, [Edit(ident.start_byte, ident.end_byte, "softmax_kernel_v2")])
    assert edited.node_at(ANCHORS[0]) is None


# --- property: unrelated insertions elsewhere never change what an anchor resolves to ----------

_SNIPPETS = [
    "// unrelated comment\n",
    "\n\n",
    "/* block\n   comment */\n",
    "__device__ float extra_fn(float a) {\n    for (int i = 0; i < 3; ++i) a += i;\n    return a;\n}\n",
    "template <int N> __global__ void other_kernel(float* p) { if (N > 1) p[0] = __shfl_sync(0xffffffff, 1.f, 0); }\n",
    "constexpr int UNUSED = 7;\n",
]
_BODY_SNIPPETS = [
    "int unrelated = 0;\n    ",
    "for (int z = 0; z < 2; ++z) { v += z; }\n    ",
    "// note\n    ",
]


def _insertion_points(src: CudaSource) -> tuple[list[int], list[int]]:
    """Top-level boundaries, and statement starts inside functions other than the kernel."""
    top = [n.start_byte for n in src.tree.root_node.children] + [len(src.text_bytes)]
    bodies = []
    for f in src.functions:
        if f.name == "softmax_kernel":
            continue
        body = src.tree.root_node.descendant_for_byte_range(f.body_start, f.body_end)
        bodies += [c.start_byte for c in body.named_children]
    return top, bodies


TOP, BODIES = _insertion_points(SRC)


@st.composite
def _unrelated_edits(draw: st.DrawFn) -> list[Edit]:
    top = draw(st.lists(st.tuples(st.sampled_from(TOP), st.sampled_from(_SNIPPETS)), max_size=3))
    inner = draw(st.lists(st.tuples(st.sampled_from(BODIES), st.sampled_from(_BODY_SNIPPETS)), max_size=3))
    by_pos = {}
    for pos, text in top + inner:
        by_pos[pos] = by_pos.get(pos, "") + text
    return [Edit(p, p, t) for p, t in by_pos.items()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=_unrelated_edits(), which=st.integers(min_value=0, max_value=len(ANCHORS) - 1))
def test_anchor_survives_unrelated_insertions(edits: list[Edit], which: int) -> None:
    edited = apply_edits(SRC, edits)
    node, anchor = TARGETS[which], ANCHORS[which]
    shift = sum(len(e.replacement.encode()) for e in edits if e.start <= node.start_byte)
    found = edited.node_at(anchor)
    assert found is not None, anchor
    assert found.start_byte == node.start_byte + shift
    assert normalize(edited.text_of(found)) == normalize(SRC.text_of(node))
    assert edited.anchor(found).path == anchor.path


MISC = CudaSource.from_text(
    """
__global__ void k(int* o, int n) {
    if (n > 0) { o[0] = 1; } else if (n < 0) { o[0] = atomicAdd(o, 1); } else { o[1] = 2; }
    switch (n) { case 1: o[2] = __popc(n); break; default: { o[3] = __clz(n); } }
    { int t = __ffs(n); o[4] = t; }
}
struct S { __device__ float get() const { return __fdividef(1.f, 2.f); } };
torch::Tensor fwd(torch::Tensor x) {
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fwd", ([&] {
        kern<scalar_t><<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<scalar_t>());
    }));
    return x;
}
""",
    "misc.cu",
)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("atomicAdd", "kernel:k/if[0]/else[0]/if[0]/call:atomicAdd[0]"),
        ("__popc", "kernel:k/switch[0]/case[0]/call:__popc[0]"),
        ("__clz", "kernel:k/switch[0]/case[1]/call:__clz[0]"),
        ("__ffs", "kernel:k/block[0]/call:__ffs[0]"),
        ("__fdividef", "device:get/call:__fdividef[0]"),
    ],
)
def test_paths_through_else_switch_blocks_and_methods(pattern: str, path: str) -> None:
    call = MISC.calls(pattern)[0]
    a = MISC.anchor(call)
    assert a.path == path and MISC.node_at(a) == MISC.node_for(call)


def test_launch_inside_dispatch_lambda() -> None:
    (ls,) = MISC.launch_sites
    assert ls.function == "fwd" and ls.stream == "at::cuda::getCurrentCUDAStream()"
    assert MISC.anchor(ls).path == "host:fwd/lambda[0]/launch:kern[0]"


def test_pragma_anchor_is_its_loop() -> None:
    p = SRC.pragmas[2]
    a = SRC.anchor(p)
    assert a.path == "kernel:softmax_kernel/for[0]" and SRC.pragma_of(SRC.node_at(a)) == p


def test_file_scope_anchor_does_not_match_inside_functions() -> None:
    src = CudaSource.from_text("int x = 0;\n__global__ void k(int* o) { int x = 0; o[0] = x; }\n")
    outer = src.nodes_of_type("declaration")[0]
    a = src.anchor(outer)
    assert a.path == "file/decl:x[0]" and src.node_at(a) == outer
    gone = apply_edits(src, [delete(src, outer)])
    assert gone.node_at(a) is None
