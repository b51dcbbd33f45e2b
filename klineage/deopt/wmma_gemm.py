"""Tensor cores forward: a naive 16-bit GEMM loop (bf16 or half factors converted to float and
summed in float, as gemm_loop.analyze reads it) becomes an mma.sync kernel.

Block tile 128 x 128, four warps of 64 x 64: each warp holds 4 x 8 tiles of 16 x 8 accumulators
in registers (128 floats a thread) and, per 16-wide k step, loads four A and four B fragments
with `ldmatrix.x4` (the 8 loads feed 32 `mma.sync.m16n8k16`). K is walked in 64-wide slices
through a three-stage ring in dynamic shared memory (106-108 KB: the launcher raises the kernel's
limit, which sm_80+ allows): slice kt + 2 is copied while slice kt is multiplied, one block
barrier a slice. Each operand's tile is stored along the index its own address is contiguous in
(k when the naive index has unit stride in k, else the row or column): a tile stored along k is
read by `ldmatrix` as it is, one stored along the output index through `ldmatrix.trans`, never a
transposing copy. The accumulator layout is the PTX ISA's (lane / 4 and lane / 4 + 8 the rows,
2 * (lane % 4) and the next the columns), so the naive epilogue runs once per accumulator in
registers with `row`, `col` and the accumulator re-declared.

Staging, two paths. The fast one, taken by a whole block for one operand's slice when the slice
lies inside the guard's extents and the loop's bound (one comparison per extent, only when every
guard clause reads `index >= extent`) and the operand's layout checks held at the block's start:
each thread copies its 16-byte chunks with `cp.async` from one pointer (its first chunk's element
at slice 0, from the naive index expression) plus the slice's step and a 32-bit multiple of the row
stride, no test per element. The layout checks read the naive index at the tile's corner, one
element along, one row along and one slice along (the index is affine in its output index and k,
which gemm_loop checks): consecutive along the stored index, the corner 16-byte aligned, row stride
and slice step multiples of 8 elements, the tile's rows within 32-bit offsets. Any other slice
(M, N or K tails) or layout (unaligned, strided operands) goes the general way, chunk by chunk: a
chunk whose 8 elements are in range, consecutive and aligned (checked on its first and last
element's addresses) by one `cp.async`, any other element by element as the naive loop reads it,
zero outside the extents. Shared rows are padded by 8 elements (16 bytes): 16-byte aligned chunks
and `ldmatrix` rows, and the 8 rows of each `ldmatrix` phase in distinct banks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from klineage.deopt.gemm_loop import GemmLoop, Operand, bound_extent
from klineage.source.syntax import paren

#: the MMA's name of each 16-bit element type
PTX_TYPES = {"__nv_bfloat16": "bf16", "__half": "f16"}
#: 16-bit element types, their conversion to float (as the naive loop reads them) and their zero
ELEMENTS = {
    "__bfloat162float": ("__nv_bfloat16", "__float2bfloat16(0.0f)", "<cuda_bf16.h>"),
    "__half2float": ("__half", "__float2half(0.0f)", "<cuda_fp16.h>"),
}
#: block tile, K slice, ring depth, warps along M and N, 16 x 16 tiles a warp holds along M and N
#: (the MMA is 16 x 8: a warp's tile is FM x 2 FN of them)
BM, BN, BK, STAGES = 128, 128, 64, 3
WARPS_M, WARPS_N, FM, FN = 2, 2, 4, 4
THREADS = 32 * WARPS_M * WARPS_N
#: shared rows padded by 8 elements; 16-byte chunks of 8
PAD16, CHUNK = 8, 8
#: bytes of 16-bit elements; the most dynamic shared memory a block may ask for on sm_90
ELEM_BYTES, SMEM_LIMIT_SM90 = 2, 227 * 1024


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
    #: the whole slice in range, block-uniform (`kl_row0 + 128 <= (M) && kl_k0 + 64 <= (K)`);
    #: None when a guard clause is not `index >= extent` (no fast path)
    full: str | None = None

    @property
    def ld(self) -> int:
        """Elements from one shared row to the next (padded)."""
        return self.cols + PAD16

    @property
    def stage_elems(self) -> int:
        return self.rows * self.ld

    @property
    def key(self) -> str:
        """`a` or `b`: the prefix of the tile's own locals."""
        return self.name[3].lower()


def _extents(clauses: tuple[str, ...], var: str) -> list[str] | None:
    """The extent of each guard clause `var >= E` (any spelling gemm_loop reads), None when one
    clause is another kind of test."""
    out = []
    for c in clauses:
        e = bound_extent(c, var)
        if e is None:
            return None
        out.append(e)
    return out


def _full(origin: str, size: int, clauses: tuple[str, ...], var: str, k_extent: str) -> str | None:
    """The block-uniform test that a tile starting at `origin` (`size` along the output index,
    BK along k) lies inside every extent, or None when the guard is not a set of bounds."""
    ext = _extents(clauses, var)
    if ext is None:
        return None
    tests = [f"{origin} + {size} <= {paren(e)}" for e in ext]
    return " && ".join([*tests, f"kl_k0 + {BK} <= {paren(k_extent)}"])


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
    k_ext = g.k_extent if re.fullmatch(rf"\s*{re.escape(g.k.name)}\s*<.*", g.k_cond, re.S) else None
    a_full = _full("kl_row0", BM, g.row_clauses, g.row.name, k_ext) if k_ext else None
    b_full = _full("kl_col0", BN, g.col_clauses, g.col.name, k_ext) if k_ext else None
    a_ok = f"{row_ok} && ({g.k_cond})"
    b_ok = f"{col_ok} && ({g.k_cond})"
    a = (
        _Tile("kl_As", BM, BK, a_raw, a_ok, (row_d, k_d), a_full)
        if g.a.k_contiguous
        else _Tile("kl_As", BK, BM, a_raw, a_ok, (k_d, row_d), a_full)
    )
    b = (
        _Tile("kl_Bs", BN, BK, b_raw, b_ok, (col_d, k_d), b_full)
        if g.b.k_contiguous
        else _Tile("kl_Bs", BK, BN, b_raw, b_ok, (k_d, col_d), b_full)
    )
    return a, b


def _ldmatrix(t: _Tile, out: str) -> tuple[str, str]:
    """(instruction, this lane's element offset in a stage) of the `ldmatrix.x4` that loads the
    fragments of 16 output rows (A) or columns (B) by 16 k at `out`, `kl_kk` of tile `t`.

    The MMA wants A's registers as (rows 0-7, 8-15) x (k 0-7, 8-15), rows before k, and B's as k
    0-7, 8-15 of one 8-column tile, then the next tile; lanes 8j .. 8j + 7 give matrix j's eight
    row addresses. A tile stored along k (`[out][k]`) is read as it is; one stored along the
    output index (`[k][out]`) through `.trans`, which hands each lane the transposed pairs."""
    lane_out, lane_k = (
        ("kl_lane % 16", "(kl_lane / 16) * 8")
        if t.key == "a"
        else ("kl_lane % 8 + (kl_lane / 16) * 8", "((kl_lane / 8) % 2) * 8")
    )
    if t.rows == BK:  # [k][out]: the 8 addresses of a matrix walk k
        lane_out, lane_k = (
            ("((kl_lane / 8) % 2) * 8", "kl_lane % 8 + (kl_lane / 16) * 8")
            if t.key == "a"
            else ("(kl_lane / 16) * 8", "kl_lane % 8 + ((kl_lane / 8) % 2) * 8")
        )
        return (
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            f"({out} + {lane_out}) + (kl_kk + {lane_k}) * {t.ld}",
        )
    return "ldmatrix.sync.aligned.m8n8.x4.shared.b16", f"({out} + {lane_out}) * {t.ld} + kl_kk + {lane_k}"


def smem_bytes(g: GemmLoop) -> int:
    """Dynamic shared memory of the kernel written for `g`: the ring of both operands' tiles."""
    a, b = _tiles(g, "")
    return STAGES * (a.stage_elems + b.stage_elems) * ELEM_BYTES


def _at(t: _Tile, row: str, col: str) -> str:
    """Declarations of the naive loop's names at tile position (`row`, `col`) of slice `kl_k0`."""
    return f"{t.bind[0].format(row)} {t.bind[1].format(col)}"


def _fast(t: _Tile, elem: str) -> str | None:
    """Per-block layout facts of `t` and the thread's pointer to its first chunk at slice 0
    (declarations before the K loop), or None when `t` has no fast path."""
    addr = address(t.raw)
    if t.full is None or addr is None:
        return None
    chunks = t.cols // CHUNK
    k = t.key
    limit = 2**31 // t.rows
    return f"""    // {t.name}: layout facts of the fast path, read from the naive index once a block
    const {elem}* kl_{k}_p;
    long long kl_{k}_ld, kl_{k}_step;
    bool kl_{k}_ok;
    {{
        const {elem}* kl_p00;
        const {elem}* kl_p01;
        const {elem}* kl_p10;
        const {elem}* kl_pk;
        {{
            const int kl_k0 = 0;
            {{ {_at(t, "0", "0")} kl_p00 = {addr}; }}
            {{ {_at(t, "0", "1")} kl_p01 = {addr}; }}
            {{ {_at(t, "1", "0")} kl_p10 = {addr}; }}
        }}
        {{
            const int kl_k0 = {BK};
            {{ {_at(t, "0", "0")} kl_pk = {addr}; }}
        }}
        kl_{k}_ld = kl_p10 - kl_p00;
        kl_{k}_step = kl_pk - kl_p00;
        kl_{k}_ok = kl_p01 == kl_p00 + 1 && (reinterpret_cast<size_t>(kl_p00) & 15) == 0 &&
                   kl_{k}_ld % {CHUNK} == 0 && kl_{k}_step % {CHUNK} == 0 &&
                   kl_{k}_ld > -{limit} && kl_{k}_ld < {limit};
        kl_{k}_p = kl_p00 + (int)(threadIdx.x / {chunks}) * (int)kl_{k}_ld + (int)(threadIdx.x % {chunks}) * {CHUNK};
    }}
"""


def _cp_async(dst: str, src: str) -> str:
    return (
        'asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" ::"r"'
        f'(static_cast<unsigned>(__cvta_generic_to_shared({dst}))), "l"({src}));'
    )


def _stage(t: _Tile, elem: str, zero: str) -> str:
    """Stage buffer `kl_s` of `t` for slice `kl_kt` (at `kl_k0`): the block's fast path when the
    slice is in range and the layout allows, else 16-byte cp.async chunks where the addresses
    allow and element by element (zero outside) elsewhere."""
    chunks = t.cols // CHUNK
    assert THREADS % chunks == 0 and t.rows % (THREADS // chunks) == 0, (t, THREADS)
    per_pass = THREADS // chunks
    head = f"""        for (int kl_e = threadIdx.x; kl_e < {t.rows * chunks}; kl_e += {THREADS}) {{
            const int kl_r = kl_e / {chunks}, kl_c = (kl_e % {chunks}) * {CHUNK};
            {elem}* kl_dst = &{t.name}[kl_s][kl_r][kl_c];
"""
    elements = f"""for (int kl_i = 0; kl_i < {CHUNK}; ++kl_i) {{
                    {_at(t, "kl_r", "kl_c + kl_i")}
                    kl_dst[kl_i] = ({t.ok}) ? {t.raw} : {zero};
                }}"""
    addr = address(t.raw)
    if addr is None:  # no address to copy from: element by element
        return f"{head}            {elements}\n        }}\n"
    general = f"""{head}            bool kl_in = true;
            const {elem}* kl_first = nullptr;
            const {elem}* kl_last = nullptr;
#pragma unroll
            for (int kl_i = 0; kl_i < {CHUNK}; ++kl_i) {{
                {_at(t, "kl_r", "kl_c + kl_i")}
                kl_in = kl_in && ({t.ok});
            }}
            if (kl_in) {{
                {{ {_at(t, "kl_r", "kl_c")} kl_first = {addr}; }}
                {{ {_at(t, "kl_r", f"kl_c + {CHUNK - 1}")} kl_last = {addr}; }}
            }}
            if (kl_in && kl_last == kl_first + {CHUNK - 1} && (reinterpret_cast<size_t>(kl_first) & 15) == 0) {{
                {_cp_async("kl_dst", "kl_first")}
            }} else {{
                {elements}
            }}
        }}
"""
    if t.full is None:
        return general
    k = t.key
    fast = f"""        if (kl_{k}_ok && {t.full}) {{  // the whole slice in range: no test per element
            const {elem}* kl_src = kl_{k}_p + kl_kt * kl_{k}_step;
            {elem}* kl_dst = &{t.name}[kl_s][threadIdx.x / {chunks}][(threadIdx.x % {chunks}) * {CHUNK}];
            const int kl_ld32 = (int)kl_{k}_ld;
#pragma unroll
            for (int kl_i = 0; kl_i < {t.rows // per_pass}; ++kl_i) {{
                {_cp_async(f"kl_dst + kl_i * {per_pass * t.ld}", f"kl_src + kl_i * {per_pass} * kl_ld32")}
            }}
        }} else {{
{_indent(general)}        }}
"""
    return fast


def body(g: GemmLoop) -> str:
    """The tensor-core kernel body for the naive loop `g` (why_not(g) is None)."""
    (_, elem, zero), _ = element(g.a), element(g.b)  # type: ignore[misc]
    ptx = PTX_TYPES[elem]
    a, b = _tiles(g, elem)
    row_t, col_t = (x.type.replace("const", "").strip() for x in (g.row, g.col))
    uniform = "".join(f"    {u}\n" for u in g.uniform)
    derived = "".join(f"                    {d}\n" for d in g.derived)
    epilogue = "".join(f"                    {s}\n" for s in g.epilogue)
    fast = "".join(f for t in (a, b) if (f := _fast(t, elem)) is not None)
    stages = _stage(a, elem, zero) + _stage(b, elem, zero)
    a_ld, a_off = _ldmatrix(a, "kl_wm + kl_i * 16")
    b_ld, b_off = _ldmatrix(b, "kl_wn + kl_j * 16")
    regs = '"=r"({0}[0]), "=r"({0}[1]), "=r"({0}[2]), "=r"({0}[3])'

    def view(t: _Tile, offset: int) -> str:  # the ring of `t` as an array of stages
        stage = f"{t.name}_stage"
        return (
            f"    typedef {elem} {stage}[{t.rows}][{t.ld}];\n"
            f"    {stage}* {t.name} = reinterpret_cast<{stage}*>(kl_smem + {offset});\n"
        )

    return f"""{{
{uniform}    extern __shared__ __align__(128) unsigned char kl_smem[];  // {STAGES} stages of A, then of B
{view(a, 0)}{view(b, STAGES * a.stage_elems * ELEM_BYTES)}    const int kl_warp = threadIdx.x / 32, kl_lane = threadIdx.x % 32;
    const int kl_wm = (kl_warp / {WARPS_N}) * {16 * FM}, kl_wn = (kl_warp % {WARPS_N}) * {16 * FN};
    const int kl_row0 = blockIdx.y * {BM}, kl_col0 = blockIdx.x * {BN};
{fast}    float kl_acc[{FM}][{2 * FN}][4];  // m16n8 tiles: rows lane / 4 (+ 8), columns 2 * (lane % 4) (+ 1)
#pragma unroll
    for (int kl_i = 0; kl_i < {FM}; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < {2 * FN}; ++kl_j)
#pragma unroll
            for (int kl_e = 0; kl_e < 4; ++kl_e) kl_acc[kl_i][kl_j][kl_e] = 0.0f;
    for (int kl_kt = 0; kl_kt < {STAGES - 1}; ++kl_kt) {{  // slices 0 .. {STAGES - 2} into stages 0 .. {STAGES - 2}
        const int kl_s = kl_kt, kl_k0 = kl_kt * {BK};
        if (kl_k0 < {paren(g.k_extent)}) {{
{_indent(stages)}        }}
        asm volatile("cp.async.commit_group;\\n" ::);
    }}
    for (int kl_k = 0; kl_k < {paren(g.k_extent)}; kl_k += {BK}) {{
        const int kl_t = kl_k / {BK}, kl_cur = kl_t % {STAGES};
        asm volatile("cp.async.wait_group {STAGES - 2};\\n" ::: "memory");  // slice kl_t has landed
        __syncthreads();  // ... for every thread, and stage kl_t - 1 is free again
        {{  // slice kl_t + {STAGES - 1} into the stage slice kl_t - 1 used, while slice kl_t is multiplied
            const int kl_kt = kl_t + {STAGES - 1}, kl_s = kl_kt % {STAGES}, kl_k0 = kl_kt * {BK};
            if (kl_k0 < {paren(g.k_extent)}) {{
{_indent(_indent(stages))}            }}
            asm volatile("cp.async.commit_group;\\n" ::);
        }}
        const unsigned kl_as = static_cast<unsigned>(__cvta_generic_to_shared(&kl_As[kl_cur][0][0]));
        const unsigned kl_bs = static_cast<unsigned>(__cvta_generic_to_shared(&kl_Bs[kl_cur][0][0]));
#pragma unroll
        for (int kl_kk = 0; kl_kk < {BK}; kl_kk += 16) {{
            unsigned kl_af[{FM}][4], kl_bf[{FN}][4];  // A: 16 x 16 a tile; B: two 16 x 8 tiles
#pragma unroll
            for (int kl_i = 0; kl_i < {FM}; ++kl_i)
                asm volatile("{a_ld} {{%0, %1, %2, %3}}, [%4];\\n"
                             : {regs.format("kl_af[kl_i]")}
                             : "r"(kl_as + {ELEM_BYTES} * ({a_off})));
#pragma unroll
            for (int kl_j = 0; kl_j < {FN}; ++kl_j)
                asm volatile("{b_ld} {{%0, %1, %2, %3}}, [%4];\\n"
                             : {regs.format("kl_bf[kl_j]")}
                             : "r"(kl_bs + {ELEM_BYTES} * ({b_off})));
#pragma unroll
            for (int kl_i = 0; kl_i < {FM}; ++kl_i)
#pragma unroll
                for (int kl_j = 0; kl_j < {2 * FN}; ++kl_j)
                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{ptx}.{ptx}.f32 "
                                 "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n"
                                 : "+f"(kl_acc[kl_i][kl_j][0]), "+f"(kl_acc[kl_i][kl_j][1]),
                                   "+f"(kl_acc[kl_i][kl_j][2]), "+f"(kl_acc[kl_i][kl_j][3])
                                 : "r"(kl_af[kl_i][0]), "r"(kl_af[kl_i][1]), "r"(kl_af[kl_i][2]), "r"(kl_af[kl_i][3]),
                                   "r"(kl_bf[kl_j / 2][(kl_j % 2) * 2]), "r"(kl_bf[kl_j / 2][(kl_j % 2) * 2 + 1]));
        }}
    }}
    asm volatile("cp.async.wait_group 0;\\n" ::: "memory");
#pragma unroll
    for (int kl_i = 0; kl_i < {FM}; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < {2 * FN}; ++kl_j)
#pragma unroll
            for (int kl_e = 0; kl_e < 4; ++kl_e) {{
                const {row_t} {g.row.name} = kl_row0 + kl_wm + kl_i * 16 + kl_lane / 4 + (kl_e / 2) * 8;
                const {col_t} {g.col.name} = kl_col0 + kl_wn + kl_j * 8 + (kl_lane % 4) * 2 + kl_e % 2;
{derived}                if ({g.guard}) continue;
                {g.acc.type} {g.acc.name} = kl_acc[kl_i][kl_j][kl_e];
{epilogue}            }}
}}"""


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in text.splitlines())
