"""Tensor cores forward: a naive 16-bit GEMM loop (bf16 or half factors converted to float and
summed in float, as gemm_loop.analyze reads it) becomes a WMMA kernel.

Block tile 128 x 128, eight warps of 32 x 64 (2 x 4 accumulator fragments of m16n16k16), K walked
in 32-wide slices: the whole block stages the A (128 x 32) and B (32 x 128) slices in shared
memory as the 16-bit elements the naive loop reads (its own index expressions, `row` and `k`
bound to the element each thread copies; zero outside the guard's extents and the loop's bound, so
M, N and K tails need no other path), each warp loads its fragments with `load_matrix_sync` and
multiplies with `mma_sync`. Each accumulator fragment then goes through the warp's own 16 x 24
float scratch tile, and the naive epilogue runs once per output element with `row`, `col` and the
accumulator re-declared. Shared rows are padded by 8 elements: every fragment pointer is 32-byte
aligned and every leading dimension a multiple of 16 bytes (8 elements), as the hardware requires.
"""

from __future__ import annotations

import re

from klineage.deopt.gemm_loop import GemmLoop, Operand

#: 16-bit element types, their conversion to float (as the naive loop reads them) and their zero
ELEMENTS = {
    "__bfloat162float": ("__nv_bfloat16", "__float2bfloat16(0.0f)", "<cuda_bf16.h>"),
    "__half2float": ("__half", "__float2half(0.0f)", "<cuda_fp16.h>"),
}
#: block tile, K slice, warps along M and N, 16 x 16 fragments a warp holds along M and N
BM, BN, BK = 128, 128, 32
WARPS_M, WARPS_N, FM, FN = 4, 2, 2, 4
THREADS = 32 * WARPS_M * WARPS_N
#: shared rows padded by 8 elements; a warp's float scratch tile is 16 x 24
PAD16, SCRATCH_LD = 8, 24


def element(op: Operand) -> tuple[str, str, str] | None:
    """(raw element text, element type, zero) of a factor `conv(P[index])`, else None."""
    m = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", op.text, re.S)
    if m is None or m.group(1) not in ELEMENTS:
        return None
    elem, zero, _ = ELEMENTS[m.group(1)]
    return m.group(2), elem, zero


def why_not(g: GemmLoop) -> str | None:
    """Why the loop cannot take tensor cores here (None: it can)."""
    a, b = element(g.a), element(g.b)
    if a is None or b is None:
        return "a factor is not a 16-bit element converted to float (bf16 or half)"
    if a[1] != b[1]:
        return f"the factors are {a[1]} and {b[1]}: one MMA type"
    if g.acc.type.replace("const", "").strip() != "float":
        return f"the sum is {g.acc.type}, not float"
    return None


def body(g: GemmLoop) -> str:
    """The WMMA kernel body for the naive loop `g` (why_not(g) is None)."""
    (a_raw, elem, zero), (b_raw, _, _) = element(g.a), element(g.b)  # type: ignore[misc]
    row_t, col_t, k_t = (x.type.replace("const", "").strip() for x in (g.row, g.col, g.k))
    row_ok = " && ".join(f"!({c})" for c in g.row_clauses)
    col_ok = " && ".join(f"!({c})" for c in g.col_clauses)
    w = "nvcuda::wmma"

    def stage(
        tile: str, rows: int, cols: int, r_decl: str, c_decl: str, value: str, ok: str, along_cols: bool
    ) -> str:
        r, c = (f"kl_e / {cols}", f"kl_e % {cols}") if along_cols else (f"kl_e % {rows}", f"kl_e / {rows}")
        return (
            f"        for (int kl_e = threadIdx.x; kl_e < {rows * cols}; kl_e += {THREADS}) {{\n"
            f"            const int kl_r = {r}, kl_c = {c};\n"
            f"            {r_decl}\n            {c_decl}\n"
            f"            {tile}[kl_r][kl_c] = ({ok}) ? {value} : {zero};\n"
            "        }\n"
        )

    a_load = stage(
        "kl_As", BM, BK, f"const {row_t} {g.row.name} = kl_row0 + kl_r;", f"const {k_t} {g.k.name} = kl_k0 + kl_c;",
        a_raw, f"{row_ok} && ({g.k_cond})", g.a.k_contiguous,
    )  # fmt: skip
    b_load = stage(
        "kl_Bs", BK, BN, f"const {k_t} {g.k.name} = kl_k0 + kl_r;", f"const {col_t} {g.col.name} = kl_col0 + kl_c;",
        b_raw, f"{col_ok} && ({g.k_cond})", not g.b.k_contiguous,
    )  # fmt: skip
    uniform = "".join(f"    {u}\n" for u in g.uniform)
    derived = "".join(f"                {d}\n" for d in g.derived)
    epilogue = "".join(f"                {s}\n" for s in g.epilogue)
    frag = f"{w}::fragment"
    return f"""{{
{uniform}    __shared__ __align__(32) {elem} kl_As[{BM}][{BK + PAD16}];
    __shared__ __align__(32) {elem} kl_Bs[{BK}][{BN + PAD16}];
    __shared__ __align__(32) float kl_Ws[{WARPS_M * WARPS_N}][16][{SCRATCH_LD}];
    const int kl_warp = threadIdx.x / 32, kl_lane = threadIdx.x % 32;
    const int kl_wm = (kl_warp / {WARPS_N}) * {16 * FM}, kl_wn = (kl_warp % {WARPS_N}) * {16 * FN};
    const int kl_row0 = blockIdx.y * {BM}, kl_col0 = blockIdx.x * {BN};
    {frag}<{w}::accumulator, 16, 16, 16, float> kl_acc[{FM}][{FN}];
    for (int kl_i = 0; kl_i < {FM}; ++kl_i)
        for (int kl_j = 0; kl_j < {FN}; ++kl_j) {w}::fill_fragment(kl_acc[kl_i][kl_j], 0.0f);
    for (int kl_k0 = 0; kl_k0 < {g.k_extent}; kl_k0 += {BK}) {{
{a_load}{b_load}        __syncthreads();
        for (int kl_kk = 0; kl_kk < {BK}; kl_kk += 16) {{
            {frag}<{w}::matrix_a, 16, 16, 16, {elem}, {w}::row_major> kl_a[{FM}];
            {frag}<{w}::matrix_b, 16, 16, 16, {elem}, {w}::row_major> kl_b[{FN}];
            for (int kl_i = 0; kl_i < {FM}; ++kl_i) {w}::load_matrix_sync(kl_a[kl_i], &kl_As[kl_wm + kl_i * 16][kl_kk], {BK + PAD16});
            for (int kl_j = 0; kl_j < {FN}; ++kl_j) {w}::load_matrix_sync(kl_b[kl_j], &kl_Bs[kl_kk][kl_wn + kl_j * 16], {BN + PAD16});
            for (int kl_i = 0; kl_i < {FM}; ++kl_i)
                for (int kl_j = 0; kl_j < {FN}; ++kl_j) {w}::mma_sync(kl_acc[kl_i][kl_j], kl_a[kl_i], kl_b[kl_j], kl_acc[kl_i][kl_j]);
        }}
        __syncthreads();
    }}
    for (int kl_i = 0; kl_i < {FM}; ++kl_i)
        for (int kl_j = 0; kl_j < {FN}; ++kl_j) {{
            {w}::store_matrix_sync(&kl_Ws[kl_warp][0][0], kl_acc[kl_i][kl_j], {SCRATCH_LD}, {w}::mem_row_major);
            __syncwarp();
            for (int kl_e = kl_lane; kl_e < 256; kl_e += 32) {{
                const {row_t} {g.row.name} = kl_row0 + kl_wm + kl_i * 16 + kl_e / 16;
                const {col_t} {g.col.name} = kl_col0 + kl_wn + kl_j * 16 + kl_e % 16;
{derived}                if ({g.guard}) continue;
                {g.acc.type} {g.acc.name} = kl_Ws[kl_warp][kl_e / 16][kl_e % 16];
{epilogue}            }}
            __syncwarp();
        }}
}}"""


def include(g: GemmLoop) -> str:
    """The headers the WMMA body needs."""
    return "#include <mma.h>\n"
