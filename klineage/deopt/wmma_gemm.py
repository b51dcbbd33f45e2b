"""Tensor cores forward: a naive 16-bit GEMM loop (bf16 or half factors converted to float and
summed in float, as gemm_loop.analyze reads it) becomes a WMMA kernel.

Block tile 128 x 128, eight warps of 32 x 64 (2 x 4 accumulator fragments of m16n16k16), K walked
in 32-wide slices, double-buffered: the block stages slice kt + 1 into the other shared buffer
while the warps multiply slice kt. Each operand's tile is stored along the index its own address
is contiguous in (k when the naive index has unit stride in k, else the row or column: a
transposed operand becomes a col-major fragment, never a transposing copy) and staged in chunks of
8 elements: a chunk whose 8 elements are in range, consecutive in memory (checked on the
addresses the naive index expression gives for its first and last element) and 16-byte aligned
goes by one 16-byte `cp.async`; any other chunk element by element as the naive loop reads it,
zero outside the guard's extents and the loop's bound, so M, N and K tails and unaligned or
strided operands need no other path. Each accumulator fragment then goes through the warp's 16 x
24 float scratch (carved out of the A buffers once the K loop is done), and the naive epilogue
runs once per output element with `row`, `col` and the accumulator re-declared. Shared rows are
padded by 8 elements: every fragment pointer is 32-byte aligned and every leading dimension a
multiple of 16 bytes (8 elements), as the hardware requires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
#: shared rows padded by 8 elements; a warp's float scratch tile is 16 x 24; 16-byte chunks of 8
PAD16, SCRATCH_LD, CHUNK = 8, 24, 8


def element(op: Operand) -> tuple[str, str, str] | None:
    """(raw element text, element type, zero) of a factor `conv(P[index])`, else None."""
    m = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", op.text, re.S)
    if m is None or m.group(1) not in ELEMENTS:
        return None
    elem, zero, _ = ELEMENTS[m.group(1)]
    return m.group(2), elem, zero


def address(raw: str) -> str | None:
    """The address of the element `raw` reads: `&P[i]` for a subscript `P[i]`, the argument of
    `__ldg(...)`; None for anything else (an accessor macro, another call)."""
    m = re.fullmatch(r"\s*__ldg\s*\((.*)\)\s*", raw, re.S)
    if m is not None:
        return m.group(1).strip()
    m = re.match(r"\s*[A-Za-z_]\w*\s*\[", raw)
    if m is None:
        return None
    depth = 0
    for i, ch in enumerate(raw[m.end() - 1 :], m.end() - 1):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth == 0:  # the first bracket closes: it must close at the end
            return f"&{raw.strip()}" if raw[i + 1 :].strip() == "" else None
    return None


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


@dataclass(frozen=True)
class _Tile:
    """One operand's shared tile: `rows` x `cols` stored row by row, `cols` its contiguous index."""

    name: str
    rows: int
    cols: int
    raw: str  # the element as the naive loop reads it (`A[(size_t)row * K + k]`)
    ok: str  # in range: the guard's clauses on its output index and the loop's condition
    bind: tuple[str, str]  # declarations of (tile row, tile column) as the naive loop's names
    layout: str  # the fragment layout that reads this tile


def _tiles(g: GemmLoop, elem: str) -> tuple[_Tile, _Tile]:
    (a_raw, _, _), (b_raw, _, _) = element(g.a), element(g.b)  # type: ignore[misc]
    row_t, col_t, k_t = (x.type.replace("const", "").strip() for x in (g.row, g.col, g.k))
    row_ok = " && ".join(f"!({c})" for c in g.row_clauses)
    col_ok = " && ".join(f"!({c})" for c in g.col_clauses)
    row_d, col_d, k_d = (
        f"const {row_t} {g.row.name} = kl_row0 + {{}};",
        f"const {col_t} {g.col.name} = kl_col0 + {{}};",
        f"const {k_t} {g.k.name} = kl_k0 + {{}};",
    )
    w = "nvcuda::wmma"
    a = (
        _Tile("kl_As", BM, BK, a_raw, f"{row_ok} && ({g.k_cond})", (row_d, k_d), f"{w}::row_major")
        if g.a.k_contiguous
        else _Tile("kl_As", BK, BM, a_raw, f"{row_ok} && ({g.k_cond})", (k_d, row_d), f"{w}::col_major")
    )
    b = (
        _Tile("kl_Bs", BN, BK, b_raw, f"{col_ok} && ({g.k_cond})", (col_d, k_d), f"{w}::col_major")
        if g.b.k_contiguous
        else _Tile("kl_Bs", BK, BN, b_raw, f"{col_ok} && ({g.k_cond})", (k_d, col_d), f"{w}::row_major")
    )
    return a, b


def _stage(t: _Tile, elem: str, zero: str) -> str:
    """Stage buffer `kl_s` of `t` for the slice at `kl_k0`: 16-byte cp.async chunks where the
    addresses allow, element by element (zero outside) elsewhere."""
    chunks = t.cols // CHUNK

    def at(col: str) -> str:
        return f"{t.bind[0].format('kl_r')} {t.bind[1].format(col)}"

    head = f"""        for (int kl_e = threadIdx.x; kl_e < {t.rows * chunks}; kl_e += {THREADS}) {{
            const int kl_r = kl_e / {chunks}, kl_c = (kl_e % {chunks}) * {CHUNK};
            {elem}* kl_dst = &{t.name}[kl_s][kl_r][kl_c];
"""
    elements = f"""for (int kl_i = 0; kl_i < {CHUNK}; ++kl_i) {{
                    {at("kl_c + kl_i")}
                    kl_dst[kl_i] = ({t.ok}) ? {t.raw} : {zero};
                }}"""
    addr = address(t.raw)
    if addr is None:  # no address to copy from: element by element
        return f"{head}            {elements}\n        }}\n"
    return f"""{head}            bool kl_in = true;
            const {elem}* kl_first = nullptr;
            const {elem}* kl_last = nullptr;
#pragma unroll
            for (int kl_i = 0; kl_i < {CHUNK}; ++kl_i) {{
                {at("kl_c + kl_i")}
                kl_in = kl_in && ({t.ok});
            }}
            if (kl_in) {{
                {{ {at("kl_c")} kl_first = {addr}; }}
                {{ {at(f"kl_c + {CHUNK - 1}")} kl_last = {addr}; }}
            }}
            if (kl_in && kl_last == kl_first + {CHUNK - 1} && (reinterpret_cast<size_t>(kl_first) & 15) == 0) {{
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst))), "l"(kl_first));
            }} else {{
                {elements}
            }}
        }}
"""


def body(g: GemmLoop) -> str:
    """The WMMA kernel body for the naive loop `g` (why_not(g) is None)."""
    (_, elem, zero), _ = element(g.a), element(g.b)  # type: ignore[misc]
    a, b = _tiles(g, elem)
    row_t, col_t = (x.type.replace("const", "").strip() for x in (g.row, g.col))
    w = "nvcuda::wmma"
    uniform = "".join(f"    {u}\n" for u in g.uniform)
    derived = "".join(f"                {d}\n" for d in g.derived)
    epilogue = "".join(f"                {s}\n" for s in g.epilogue)
    frag = f"{w}::fragment"
    stages = _stage(a, elem, zero) + _stage(b, elem, zero)

    def ptr(t: _Tile, out: str) -> str:  # a fragment's top-left element in the current buffer
        return f"&{t.name}[kl_cur][kl_kk][{out}]" if t.rows == BK else f"&{t.name}[kl_cur][{out}][kl_kk]"

    return f"""{{
{uniform}    __shared__ __align__(128) {elem} kl_As[2][{a.rows}][{a.cols + PAD16}];
    __shared__ __align__(128) {elem} kl_Bs[2][{b.rows}][{b.cols + PAD16}];
    const int kl_warp = threadIdx.x / 32, kl_lane = threadIdx.x % 32;
    const int kl_wm = (kl_warp / {WARPS_N}) * {16 * FM}, kl_wn = (kl_warp % {WARPS_N}) * {16 * FN};
    const int kl_row0 = blockIdx.y * {BM}, kl_col0 = blockIdx.x * {BN};
    {frag}<{w}::accumulator, 16, 16, 16, float> kl_acc[{FM}][{FN}];
#pragma unroll
    for (int kl_i = 0; kl_i < {FM}; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < {FN}; ++kl_j) {w}::fill_fragment(kl_acc[kl_i][kl_j], 0.0f);
    {{  // slice 0 into buffer 0
        const int kl_s = 0, kl_k0 = 0;
{stages}    }}
    asm volatile("cp.async.commit_group;\\n" ::);
    for (int kl_k0 = 0; kl_k0 < {g.k_extent}; kl_k0 += {BK}) {{
        const int kl_cur = (kl_k0 / {BK}) & 1, kl_next = kl_k0 + {BK};
        if (kl_next < {g.k_extent}) {{  // slice kt + 1 into the other buffer while slice kt is multiplied
            const int kl_s = kl_cur ^ 1, kl_k0 = kl_next;
{_indent(stages)}        }}
        asm volatile("cp.async.commit_group;\\n" ::);
        asm volatile("cp.async.wait_group 1;\\n" ::: "memory");
        __syncthreads();
#pragma unroll
        for (int kl_kk = 0; kl_kk < {BK}; kl_kk += 16) {{
            {frag}<{w}::matrix_a, 16, 16, 16, {elem}, {a.layout}> kl_a[{FM}];
            {frag}<{w}::matrix_b, 16, 16, 16, {elem}, {b.layout}> kl_b[{FN}];
#pragma unroll
            for (int kl_i = 0; kl_i < {FM}; ++kl_i) {w}::load_matrix_sync(kl_a[kl_i], {ptr(a, "kl_wm + kl_i * 16")}, {a.cols + PAD16});
#pragma unroll
            for (int kl_j = 0; kl_j < {FN}; ++kl_j) {w}::load_matrix_sync(kl_b[kl_j], {ptr(b, "kl_wn + kl_j * 16")}, {b.cols + PAD16});
#pragma unroll
            for (int kl_i = 0; kl_i < {FM}; ++kl_i)
#pragma unroll
                for (int kl_j = 0; kl_j < {FN}; ++kl_j) {w}::mma_sync(kl_acc[kl_i][kl_j], kl_a[kl_i], kl_b[kl_j], kl_acc[kl_i][kl_j]);
        }}
        __syncthreads();
    }}
    asm volatile("cp.async.wait_group 0;\\n" ::: "memory");
    __syncthreads();
    float* kl_Ws = reinterpret_cast<float*>(&kl_As[0][0][0]) + kl_warp * {16 * SCRATCH_LD};
#pragma unroll
    for (int kl_i = 0; kl_i < {FM}; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < {FN}; ++kl_j) {{
            {w}::store_matrix_sync(kl_Ws, kl_acc[kl_i][kl_j], {SCRATCH_LD}, {w}::mem_row_major);
            __syncwarp();
            for (int kl_e = kl_lane; kl_e < 256; kl_e += 32) {{
                const {row_t} {g.row.name} = kl_row0 + kl_wm + kl_i * 16 + kl_e / 16;
                const {col_t} {g.col.name} = kl_col0 + kl_wn + kl_j * 16 + kl_e % 16;
{derived}                if ({g.guard}) continue;
                {g.acc.type} {g.acc.name} = kl_Ws[(kl_e / 16) * {SCRATCH_LD} + kl_e % 16];
{epilogue}            }}
            __syncwarp();
        }}
}}"""


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in text.splitlines())


def include(g: GemmLoop) -> str:
    """The headers the WMMA body needs."""
    return "#include <mma.h>\n"
