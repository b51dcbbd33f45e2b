"""`packs._pointers` is remembered per source text and function (every pack site of a kernel asks
again): the answer must still be the one of that function in that file, since a name's type may
come from a declaration anywhere in the file."""

from __future__ import annotations

from klineage.deopt import packs
from klineage.source import nodes as N
from klineage.source.model import CudaSource

K = "__global__ void {name}({params}) {{ {body} }}\n"


def _fns(text: str) -> dict[str, object]:
    src = CudaSource.from_text(text)
    fns = [n for n in N.walk(src.tree.root_node) if n.type == "function_definition"]
    return src, {src.text_of(f.child_by_field_name("declarator")).split("(")[0]: f for f in fns}


def test_each_function_gets_its_own_pointers_and_a_copy() -> None:
    src, fns = _fns(
        K.format(name="a", params="float* x", body="x[0] = 1.0f;")
        + K.format(name="b", params="double* y", body="y[0] = 1.0;")
    )
    first = packs._pointers(src, fns["a"])
    assert first == {"x": "float"} and packs._pointers(src, fns["b"]) == {"y": "double"}
    first["z"] = "int"  # a caller's change stays its own
    assert packs._pointers(src, fns["a"]) == {"x": "float"}


def test_the_same_function_in_another_file_reads_that_file() -> None:
    kernel = K.format(name="k", params="int n", body="g[0] = 1;")
    src1, f1 = _fns("__device__ float* g;\n" + kernel)
    src2, f2 = _fns("__device__ short* g;\n" + kernel)  # same function text, same offsets
    assert f1["k"].byte_range == f2["k"].byte_range
    assert packs._pointers(src1, f1["k"]) == {"g": "float"}
    assert packs._pointers(src2, f2["k"]) == {"g": "short"}
