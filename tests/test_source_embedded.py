"""CUDA embedded in KernelBench-style Python: found, parsed, rewritten with every other byte kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from klineage.errors import SourceError
from klineage.source.edit import apply_edits, replace
from klineage.source.embedded import read_embedded_cuda, write_embedded_cuda
from klineage.source.model import CudaSource

PY = (Path(__file__).parent / "data" / "source" / "kernelbench_softmax.py").read_text()


def test_finds_every_source_string() -> None:
    found = read_embedded_cuda(PY)
    assert [(e.index, e.name, e.call, e.kwarg, e.item) for e in found] == [
        (0, "softmax_cpp_source", "softmax_ext", "cpp_sources", None),
        (1, "softmax_source", "softmax_ext", "cuda_sources", None),
        (2, None, "relu_ext", "cpp_sources", 0),
        (3, None, "relu_ext", "cuda_sources", 0),
        (4, None, "relu_ext", "cuda_sources", 1),
    ]
    assert found[1].functions == ("softmax_cuda",) and found[1].is_cuda and not found[0].is_cuda
    assert found[1].line == 6 and found[3].line == 56
    assert found[4].value == "// second translation unit\n__device__ int unused_counter;\n"
    assert 'printf("rows=%d\\n", rows);' in found[1].value  # escapes evaluated


def test_embedded_cuda_parses() -> None:
    cuda = read_embedded_cuda(PY)[1].value
    src = CudaSource.from_text(cuda, "softmax_ext.cu")
    assert [k.name for k in src.kernels] == ["softmax_rows"]
    assert src.launch_sites[0].config == ("(rows + warps - 1) / warps", "warps * 32")
    assert len(src.calls("__shfl_xor_sync")) == 2


def test_unchanged_round_trip_is_identical() -> None:
    found = read_embedded_cuda(PY)
    assert write_embedded_cuda(PY, {e.index: e.value for e in found}) == PY
    assert write_embedded_cuda(PY, {}) == PY


def _untouched_parts_equal(old: str, new: str, old_literal: str, new_literal: str) -> None:
    i = old.index(old_literal)
    j = new.index(new_literal)
    assert new[:j] == old[:i]
    assert new[j + len(new_literal) :] == old[i + len(old_literal) :]


def test_rewrite_by_name_keeps_every_other_byte() -> None:
    found = read_embedded_cuda(PY)
    src = CudaSource.from_text(found[1].value)
    call = src.calls("__expf")[0]
    edited = apply_edits(src, [replace(call, "expf(x[row * cols + c] - m)")])
    out = write_embedded_cuda(PY, {"softmax_source": edited.text})
    again = read_embedded_cuda(out)
    assert again[1].value == edited.text
    assert [e.value for e in again if e.index != 1] == [e.value for e in found if e.index != 1]
    old_lit = PY[
        PY.index('softmax_source = """') + len("softmax_source = ") : PY.index('"""\n\nsoftmax_cpp') + 3
    ]
    new_lit = out[
        out.index('softmax_source = """') + len("softmax_source = ") : out.index('"""\n\nsoftmax_cpp') + 3
    ]
    _untouched_parts_equal(PY, out, old_lit, new_lit)
    assert '\\n", rows);' in new_lit  # the backslash of the C escape stays escaped in Python


def test_rewrite_raw_literal_and_concatenation() -> None:
    found = read_embedded_cuda(PY)
    new_relu = found[3].value.replace("0.f ? x[i] : 0.f", "0.f ? x[i] : 0.0f")
    out = write_embedded_cuda(PY, {3: new_relu, 4: "__device__ int counter2;\n"})
    again = read_embedded_cuda(out)
    assert again[3].value == new_relu and again[4].value == "__device__ int counter2;\n"
    assert "[r'''\n__global__ void relu_k" in out  # raw triple-quoted style kept
    assert '"__device__ int counter2;\\n"],' in out  # concatenation became one literal
    assert out.count("\n") == PY.count("\n")


def test_quotes_and_backslashes_survive() -> None:
    tricky = 'asm volatile("mov.u32 %0, %%laneid;\\n" : "=r"(r)); // """ \'\'\' \\'
    out = write_embedded_cuda(PY, {1: tricky})
    assert read_embedded_cuda(out)[1].value == tricky


def test_bad_python_and_computed_strings() -> None:
    with pytest.raises(SourceError, match=r"m.py:1:\d+: Python does not parse"):
        read_embedded_cuda("def f(:\n", "m.py")
    fstr = (
        'from torch.utils.cpp_extension import load_inline\nN = 4\nsrc = f"int x = {N};"\n'
        'm = load_inline(name="m", cpp_sources="", cuda_sources=src)\n'
    )
    with pytest.raises(SourceError, match=r":3: cuda_sources=src is an f-string"):
        read_embedded_cuda(fstr)
    computed = 'm = load_inline(name="m", cpp_sources="", cuda_sources=header + body)\n'
    with pytest.raises(SourceError, match="computed"):
        read_embedded_cuda(computed)
    with pytest.raises(SourceError, match="no module-level assignment"):
        read_embedded_cuda('m = load_inline(name="m", cpp_sources="", cuda_sources=missing)\n')
    with pytest.raises(SourceError, match="no embedded source #9"):
        write_embedded_cuda(PY, {9: "x"})


def test_aliases_lists_of_names_and_annotations() -> None:
    py = (
        "from torch.utils.cpp_extension import load_inline as build\n"
        "head: str = '#include <cuda_fp16.h>\\n'\n"
        "body = '''__global__ void k(__half* x) { x[0] = __float2half(1.f); }\\n'''\n"
        "srcs = [head, body]\n"
        "m = build('m', '', [head, body], functions=[])\n"
        "n = build(name='n', cpp_sources='', cuda_sources=srcs)\n"
    )
    found = read_embedded_cuda(py)
    assert [(e.name, e.call, e.kwarg, e.item) for e in found] == [
        (None, "m", "cpp_sources", None),
        ("head", "m", "cuda_sources", None),
        ("body", "m", "cuda_sources", None),
        (None, "n", "cpp_sources", None),
    ]
    out = write_embedded_cuda(py, {"body": found[2].value.replace("1.f", "2.f")})
    assert read_embedded_cuda(out)[2].value == found[2].value.replace("1.f", "2.f")
    old_line, new_line = py.splitlines()[2], out.splitlines()[2]
    assert new_line == old_line.replace("1.f); }\\n'''", "2.f); }") and out.splitlines()[3] == "'''"
    assert out.splitlines()[:2] + out.splitlines()[4:] == py.splitlines()[:2] + py.splitlines()[3:]
    assert CudaSource.from_text(found[1].value + found[2].value).kernels[0].name == "k"


_PIECES = [*"ab{};\"'\\\n\t\r#%x ", "'''", '"""', "\\n", "é"]


_STYLES = (
    "from torch.utils.cpp_extension import load_inline\n"
    'a = ("x")\nb = """y"""\nc = r\'\'\'z\'\'\'\nd = "p" \'q\'\n'
    'm = load_inline(name="m", cpp_sources=[a, b], cuda_sources=[c, d])\n'
)


@settings(max_examples=40, deadline=None)
@given(new=st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
@example(new='\\"')  # a backslash then a quote at the end of a triple-quoted literal (hypothesis found it)
def test_any_text_round_trips_through_each_literal_style(new: str) -> None:
    """Parenthesized "...", triple \"\"\", raw r\'\'\' \'\'\', and a concatenation."""
    out = write_embedded_cuda(_STYLES, {0: new, 1: new, 2: new, 3: new})
    assert [e.value for e in read_embedded_cuda(out)] == [new] * 4
