"""Byte-range edits: batches, overlap and parse-error refusal, node helpers, normalized equality."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.errors import SourceError
from klineage.source.edit import (
    Edit,
    apply_edits,
    delete,
    indent_of,
    insert_after,
    insert_before,
    normalize,
    replace,
)
from klineage.source.model import CudaSource

DATA = Path(__file__).parent / "data" / "source"
SRC = CudaSource.from_file(DATA / "softmax.cu")


def test_several_edits_at_once_use_original_offsets() -> None:
    a, b = SRC.launch_sites
    out = apply_edits(SRC, [replace(b, "/*b*/0"), replace(a, "/*a*/0")])
    assert out.launch_sites == () and out.path == SRC.path
    assert "/*a*/0;" in out.text and "/*b*/0;" in out.text
    assert SRC.launch_sites == (a, b)  # the original is untouched


def test_overlapping_edits_refused() -> None:
    k = SRC.kernels[0]
    with pytest.raises(SourceError, match="overlapping edits"):
        apply_edits(SRC, [Edit(k.start, k.start + 10, ""), Edit(k.start + 5, k.start + 12, "")])
    with pytest.raises(SourceError, match="overlapping edits"):
        apply_edits(SRC, [Edit(k.start, k.start, "a"), Edit(k.start, k.start, "b")])
    with pytest.raises(SourceError, match="bad edit range"):
        Edit(5, 2, "")


def test_parse_error_refused_with_line() -> None:
    call = SRC.calls("__shfl_sync")[0]
    with pytest.raises(SourceError, match=r"edit at line 64 refused: .*softmax.cu:64:\d+: parse error"):
        apply_edits(SRC, [replace(call, "__shfl_sync(0xffffffff, warp_sum(s), 0")])


def test_utf8_offsets_and_split_character() -> None:
    src = CudaSource.from_text("// naïve kernel\n__global__ void k(float* o) { o[0] = 1.f; }\n")
    k = src.kernels[0]
    new = apply_edits(src, [insert_before(k, "// é\n")])
    assert new.kernels[0].line == 3 and new.text.startswith("// naïve kernel\n// é\n")
    with pytest.raises(SourceError, match="splits a UTF-8 character"):
        apply_edits(src, [Edit(6, 6, "x")])


def test_remove_then_reapply_pragma_round_trips() -> None:
    pragma = SRC.pragmas[2]
    assert pragma.text == "#pragma unroll 4"
    removed = apply_edits(SRC, [delete(SRC, pragma)])  # alone on its line: the line goes
    assert removed.line_of(len(removed.text_bytes)) == SRC.line_of(len(SRC.text_bytes)) - 1
    assert [p.value for p in removed.pragmas] == [None, None]
    loop = removed.loops[2]
    restored = apply_edits(removed, [insert_before(loop, "#pragma unroll 4\n" + indent_of(removed, loop))])
    assert restored.text == SRC.text
    assert normalize(restored.text) == normalize(SRC.text) != normalize(removed.text)


def test_remove_launch_bounds_normalizes_back() -> None:
    (lb,) = SRC.kernels[0].attributes
    assert lb.name == "__launch_bounds__" and SRC.text_of((lb.start, lb.end)) == "__launch_bounds__(256, 2)"
    stripped = apply_edits(SRC, [delete(SRC, lb)])
    assert stripped.kernels[0].launch_bounds == () and stripped.kernels[0].attributes == ()
    k = stripped.node_for(stripped.kernels[0])
    void = k.child_by_field_name("type")
    back = apply_edits(stripped, [insert_after(void, " __launch_bounds__( 256,2 )")])
    assert back.kernels[0].launch_bounds == ("256", "2")
    assert normalize(back.text) == normalize(SRC.text)


def test_delete_keeps_line_when_node_shares_it() -> None:
    call = SRC.calls("__shfl_xor_sync")[0]
    e = delete(SRC, call)
    assert (e.start, e.end) == (call.start, call.end)
    decl = SRC.shared_decls[0]
    e = delete(SRC, decl)
    assert SRC.text_bytes[e.start : e.end] == b"    __shared__ float red[BLOCK / WARP_SIZE];\n"


def test_normalize_ignores_layout_and_comments_not_strings() -> None:
    a = "for (int i = 0;  i < n; ++i) {  // go\n  x[ i ] = a + b; /* c */ }\n"
    b = "for(int i=0;i<n;++i){x[i]=a+b;}"
    assert normalize(a) == normalize(b)
    assert normalize('printf("a  b");') != normalize('printf("a b");')
    assert normalize("unsigned int x;") == "unsigned int x;"
    assert normalize("a - -b") != normalize("a--b")
