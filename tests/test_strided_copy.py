"""strided_copy: the stride analysis of naive permutes written in other authors' idioms."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt import strided_copy as SC
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import load


def _analyze(text: str) -> SC.StridedCopy:
    src = CudaSource.from_text(text)
    return SC.analyze(src, src.kernels[0])


def _strides(copy: SC.StridedCopy) -> dict[str, tuple[str, str, str]]:
    return {
        c.label: (SC.c_text(c.extent), SC.c_text(c.read_stride), SC.c_text(c.write_stride))
        for c in copy.coords
    }


def test_flat_index_split_by_div_and_mod() -> None:
    src, _ = load("smem_staging", "nchw_to_nhwc", "naive.cu")
    copy = SC.analyze(src, src.kernels[0])
    assert (copy.src, copy.dst, copy.elem) == ("in", "out", "float")
    assert _strides(copy) == {
        "ch": ("(size_t)c", "(size_t)hw", "(size_t)1"),
        "pix": ("(size_t)hw", "(size_t)1", "(size_t)c"),
        "img": ("(size_t)n", "(size_t)c * hw", "(size_t)c * hw"),
    }
    p, q = copy.transposed or (None, None)
    assert (p and p.label, q and q.label) == ("pix", "ch")


def test_two_dimensional_grid_with_wrapping_guard() -> None:
    src, _ = load("smem_padding", "transpose_pad", "naive_2d_grid.cu")
    copy = SC.analyze(src, src.kernels[0])
    assert _strides(copy) == {
        "xIndex": ("(size_t)width", "(size_t)1", "(size_t)height"),
        "yIndex": ("(size_t)height", "(size_t)width", "(size_t)1"),
    }
    assert copy.transposed is not None


KERNEL = "__global__ void k(const float* x, float* y, int M, int N) {{\n{body}\n}}\n"


@pytest.mark.parametrize(
    "body, why",
    [
        (
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= M) return;\n  y[i] = 2.0f * x[i];",
            "load",
        ),
        (
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= M) return;\n  y[i] = x[i * i];",
            "affine",
        ),
        (
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  for (int k = 0; k < N; ++k) y[i] = x[k];",
            "statement",
        ),
        ("  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  y[i] = x[i];", "no bound"),
        (
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= M * N) return;\n"
            "  y[i] = x[(i % M) * N + (i % N)];",
            "tile",
        ),
        (
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= M * N) return;\n  int j = i;\n  j += 1;\n"
            "  y[i] = x[j];",
            "single-assignment",
        ),
    ],
)
def test_not_a_strided_copy(body: str, why: str) -> None:
    with pytest.raises(SC.NotACopy, match=why):
        _analyze(KERNEL.format(body=body))


def test_plain_copy_is_no_transpose() -> None:
    copy = _analyze(
        KERNEL.format(
            body="  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < M * N) { y[i] = x[i]; }"
        )
    )
    assert copy.unit("read") == copy.unit("write") and copy.transposed is None


def _permute_kernel(out_order: tuple[int, ...], split_by_div_first: bool) -> str:
    """A naive permute of a (D0, D1, D2) tensor to the axis order `out_order`, written with a flat
    output index split into output coordinates (innermost first, `%` then `/`, or the other way)."""
    sizes = ["D0", "D1", "D2"]
    o = [sizes[a] for a in out_order]
    lines = [
        "  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;",
        "  if (t >= (size_t)D0 * D1 * D2) return;",
    ]
    names = {out_order[2]: "c2", out_order[1]: "c1", out_order[0]: "c0"}
    if split_by_div_first:
        lines += [
            f"  size_t c0 = t / ((size_t){o[1]} * {o[2]});",
            f"  size_t rest = t % ((size_t){o[1]} * {o[2]});",
            f"  size_t c1 = rest / {o[2]};",
            f"  size_t c2 = rest % {o[2]};",
        ]
    else:
        lines += [
            f"  size_t c2 = t % {o[2]};",
            f"  size_t c1 = (t / {o[2]}) % {o[1]};",
            f"  size_t c0 = t / {o[2]} / {o[1]};",
        ]
    lines.append(f"  y[t] = x[({names[0]} * D1 + {names[1]}) * D2 + {names[2]}];")
    return (
        "__global__ void permute(const float* x, float* y, int D0, int D1, int D2) {\n"
        + "\n".join(lines)
        + "\n}\n"
    )


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(list(itertools.permutations(range(3)))), st.booleans())
def test_any_axis_permutation(out_order: tuple[int, ...], div_first: bool) -> None:
    copy = _analyze(_permute_kernel(out_order, div_first))
    sizes = ["D0", "D1", "D2"]
    in_strides = {0: "(size_t)D1 * D2", 1: "(size_t)D2", 2: "(size_t)1"}
    by_extent = {SC.c_text(c.extent): c for c in copy.coords}
    for axis in range(3):
        c = by_extent[f"(size_t){sizes[axis]}"]
        assert SC.c_text(c.read_stride) == in_strides[axis]
    assert (copy.transposed is None) == (out_order[2] == 2)


@pytest.mark.parametrize("eight", ["8", "010", "0x8", "8u", "010UL"])
def test_integer_literals_of_any_spelling_are_read(eight: str) -> None:
    """A fixed row width written in octal, hexadecimal or with a suffix is the same stride (the
    old reader took `int(text, 0)`, which refuses C's octal `010`)."""
    copy = _analyze(
        KERNEL.format(
            body="  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= M * "
            + eight
            + ") return;\n  y[(i % "
            + eight
            + ") * M + i / "
            + eight
            + "] = x[i];"
        )
    )
    assert copy.transposed is not None
    assert sorted(SC.c_text(c.extent) for c in copy.coords) == ["(size_t)8", "(size_t)M"]


def test_a_float_literal_is_not_an_index() -> None:
    with pytest.raises(SC.NotACopy, match="integer literal"):
        _analyze(
            KERNEL.format(
                body="  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= M) return;\n  y[i] = x[i + 1.0];"
            )
        )
