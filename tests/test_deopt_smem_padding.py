"""smem_padding: [T][T + 1] -> [T][T] and XOR swizzles -> plain indexing, and padding back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.smem_padding import SmemPadding
from klineage.source.model import CudaSource
from klineage.source.text import normalize
from tests.deopt_kernel_checks import load, one_site, passes_gate

OP = SmemPadding()


def test_remove_padding_and_apply_roundtrip(tmp_path: Path) -> None:
    src, wl = load("smem_padding", "transpose_pad")
    site = one_site(OP, src, kind="padding")
    out = OP.remove(src, site)
    assert "__shared__ float tile[TILE][TILE];" in out.text
    (fwd,) = OP.find_forward(out)
    facts = {f.name: f.holds for f in OP.preconditions(out, fwd)}
    assert facts == {
        "row_multiple_of_32_words": True,
        "bank_word_elements": True,
        "column_access_by_consecutive_threads": True,
        "indexed_only_as_array": True,
    }
    assert normalize(OP.apply(out, fwd).text) == normalize(src.text)
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.slow
def test_remove_swizzle(tmp_path: Path) -> None:
    src, wl = load("smem_padding", "transpose_swizzle")
    site = one_site(OP, src, kind="swizzle")
    out = OP.remove(src, site)
    assert "tile[ty + k][tx] = " in out.text and "= tile[tx][ty + k];" in out.text and "^ (" not in out.text
    passes_gate(out.text, wl, tmp_path)


def test_refusals() -> None:
    flat = CudaSource.from_text(
        "__global__ void k(float* y) {\n  __shared__ float t[32][32 + 1];\n  float* p = &t[0][0];\n"
        "  t[threadIdx.y][threadIdx.x] = 1.0f;\n  __syncthreads();\n  y[threadIdx.x] = p[threadIdx.x * 33];\n}\n"
    )
    with pytest.raises(Refused, match="indexed_only_as_array"):
        OP.remove(flat, one_site(OP, flat, kind="padding"))
    partial = CudaSource.from_text(
        "__global__ void k(float* y) {\n  __shared__ float t[32][32];\n"
        "  t[threadIdx.y][threadIdx.x ^ threadIdx.y] = 1.0f;\n  __syncthreads();\n"
        "  y[threadIdx.x] = t[threadIdx.x][threadIdx.y];\n}\n"
    )
    with pytest.raises(Refused, match="every_access_swizzled"):
        OP.remove(partial, one_site(OP, partial, kind="swizzle"))
    odd = CudaSource.from_text(
        "__global__ void k(float* y) {\n  __shared__ float t[32][24];\n  t[threadIdx.x][0] = 1.0f;\n"
        "  y[threadIdx.x] = t[threadIdx.x][0];\n}\n"
    )
    with pytest.raises(Refused, match="row_multiple_of_32_words"):
        OP.apply(odd, OP.find_forward(odd)[0])


def test_swizzle_key_on_either_side() -> None:
    src = CudaSource.from_text(
        "__global__ void k(float* y) {\n  __shared__ float t[32][32];\n"
        "  t[threadIdx.y][(threadIdx.y % 32) ^ threadIdx.x] = 1.0f;\n  __syncthreads();\n"
        "  y[0] = t[threadIdx.x][threadIdx.x ^ threadIdx.y];\n}\n"
    )
    out = OP.remove(src, one_site(OP, src, kind="swizzle"))
    assert (
        "t[threadIdx.y][threadIdx.x] = 1.0f;" in out.text
        and "y[0] = t[threadIdx.x][threadIdx.y];" in out.text
    )


TEMPLATE_TILE = """
template <int TILE>
__global__ void tr(const float* x, float* y, int n) {
    __shared__ float tile[TILE][TILE];
    tile[threadIdx.y][threadIdx.x] = x[threadIdx.y * n + threadIdx.x];
    __syncthreads();
    y[threadIdx.y * n + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}
extern "C" void launch(const float* x, float* y, int n) {
    if (n > 100) tr<SIZE_A><<<1, dim3(32, 32)>>>(x, y, n);
    else tr<SIZE_B><<<1, dim3(32, 32)>>>(x, y, n);
}
"""


@pytest.mark.parametrize("a, b, holds", [("32", "32", True), ("64", "2 * 32", True), ("32", "16", False)])
def test_template_tile_size_read_from_the_launches(a: str, b: str, holds: bool) -> None:
    src = CudaSource.from_text(TEMPLATE_TILE.replace("SIZE_A", a).replace("SIZE_B", b))
    (site,) = OP.find_forward(src)
    facts = {f.name: f.holds for f in OP.preconditions(src, site)}
    assert facts["row_multiple_of_32_words"] is holds


def test_transpose_expert_padding_roundtrips() -> None:
    """The shipped transpose expert pads `tile[TILE][TILE + 1]` with TILE a template parameter fixed
    at its launches: removing the padding and applying it again gives the expert back."""
    path = Path(__file__).resolve().parents[1] / "expert_kernels" / "transpose" / "expert.cu"
    src = CudaSource.from_file(path)
    out = OP.remove(src, one_site(OP, src, kind="padding"))
    (fwd,) = OP.find_forward(out)
    assert normalize(OP.apply(out, fwd).text) == normalize(src.text)


def test_flat_row_stride_padding_removed(tmp_path: Path) -> None:
    src, wl = load("smem_padding", "transpose_pad", "flat.cu")
    site = one_site(OP, src, kind="flat")
    assert all(f.holds for f in OP.removal_preconditions(src, site))
    out = OP.remove(src, site)
    assert "buf[TILE * TILE]" in out.text and "buf[j * TILE + threadIdx.x]" in out.text
    assert "buf[threadIdx.x * TILE + j]" in out.text and out.text.count("TILE + 1") == 1  # the comment
    passes_gate(out.text, wl, tmp_path)


STRIDE_KERNEL = """
#include <mma.h>
#define TILE 32
#define LDS STRIDE_VALUE
__global__ void k(const float* in, float* out) {
    __shared__ float buf[TILE * LDS];
    for (int j = threadIdx.y; j < TILE; j += 8) buf[j * LDS + threadIdx.x] = in[j * TILE + threadIdx.x];
    __syncthreads();
    for (int j = threadIdx.y; j < TILE; j += 8) out[j * TILE + threadIdx.x] = buf[threadIdx.x * LDS + j];
}
"""


@pytest.mark.parametrize(
    "value, base",
    [
        ("33", "32"),
        ("(TILE + 1)", "TILE"),
        ("40  // 32 + 8 halves of padding", "32"),
        ("32", None),
        ("48", None),
    ],
)
def test_padded_stride_constant(value: str, base: str | None) -> None:
    src = CudaSource.from_text(STRIDE_KERNEL.replace("STRIDE_VALUE", value))
    sites = [s for s in OP.find(src) if s.details["kind"] == "stride"]
    if base is None:
        assert sites == []
        return
    (site,) = sites
    out = OP.remove(src, site)
    assert re.search(rf"#define LDS {re.escape(base)}(\s|$)", out.text), out.text


def test_constant_that_bounds_a_loop_is_no_stride() -> None:
    src = CudaSource.from_text(
        STRIDE_KERNEL.replace("STRIDE_VALUE", "33").replace("j < TILE; j += 8) out", "j < LDS; j += 8) out")
    )
    assert [s for s in OP.find(src) if s.details["kind"] == "stride"] == []


def test_wmma_leading_dimension_constant() -> None:
    src = CudaSource.from_text(
        "#include <mma.h>\nusing namespace nvcuda;\n#define C_LD 136\n"
        "__global__ void k(float* out) {\n  extern __shared__ float smem[];\n"
        "  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;\n  wmma::fill_fragment(c, 0.0f);\n"
        "  wmma::store_matrix_sync(smem + threadIdx.y * 16 * C_LD, c, C_LD, wmma::mem_row_major);\n}\n"
    )
    (site,) = [s for s in OP.find(src) if s.details["kind"] == "stride"]
    assert site.details["constant"] == "C_LD" and "#define C_LD 128" in OP.remove(src, site).text


def test_half_tile_is_padded_by_one_word() -> None:
    """A 2-byte tile of 32 columns is 16 words a row: a column walk stays on two banks; padding by
    two elements (one word) spreads it."""
    src = CudaSource.from_text(
        "#include <cuda_fp16.h>\n__global__ void k(const __half* x, __half* y) {\n  __shared__ __half t[32][32];\n"
        "  t[threadIdx.y][threadIdx.x] = x[threadIdx.y * 32 + threadIdx.x];\n  __syncthreads();\n"
        "  y[threadIdx.y * 32 + threadIdx.x] = t[threadIdx.x][threadIdx.y];\n}\n"
    )
    (site,) = OP.find_forward(src)
    assert "__shared__ __half t[32][32 + 2];" in OP.apply(src, site).text


WMMA_STRIDE = """
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
#define A_LD 32
__global__ void k(const __half* a, float* c) {
    __shared__ __half tile[64][A_LD];
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) tile[i / 32][i % 32] = a[i];
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, &tile[(threadIdx.x / 32) * 16][0], A_LD);
}
"""


def test_forward_pads_a_wmma_stride_constant_by_16_bytes_and_roundtrips() -> None:
    """A row stride written as one `#define` that wmma reads as its leading dimension: the forward
    step pads it at its definition by 16 bytes (8 halves, what wmma's ldm allows), and the
    backward step reads that literal as padded and takes it back."""
    src = CudaSource.from_text(WMMA_STRIDE)
    (fwd,) = OP.find_forward(src)
    assert fwd.details["kind"] == "stride" and fwd.details["constant"] == "A_LD"
    assert all(p.holds for p in OP.preconditions(src, fwd))
    padded = OP.apply(src, fwd)
    assert "#define A_LD 40" in padded.text and "tile[64][A_LD]" in padded.text
    (back,) = [s for s in OP.find(padded) if s.details["kind"] == "stride"]
    assert normalize(OP.remove(padded, back).text) == normalize(src.text)


def test_forward_pads_a_float_row_constant_by_one_word(tmp_path: Path) -> None:
    """`tile[TILE][LD]` with `#define LD 32` (a stride distinct from the row count): LD becomes 33
    at its definition, once (no second `[..][LD + 1]` site), and the transpose still passes."""
    src, wl = load("smem_padding", "transpose_pad")
    text = src.text.replace("#define ROWS 8", "#define ROWS 8\n#define LD 32").replace("[TILE + 1]", "[LD]")
    plain = CudaSource.from_text(text)
    (fwd,) = OP.find_forward(plain)
    assert fwd.details["kind"] == "stride" and fwd.details["ldm"] == "0"
    out = OP.apply(plain, fwd)
    assert "#define LD 33" in out.text
    passes_gate(out.text, wl, tmp_path)
    same = CudaSource.from_text(src.text.replace("[TILE + 1]", "[TILE]"))  # TILE also counts the rows
    assert [s.details["kind"] for s in OP.find_forward(same)] == ["padding"]
