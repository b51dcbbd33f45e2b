"""Write flash_fusion's fused kernel on tensor cores, for a three-phase attention whose query, key
and term elements are 16-bit (half or bf16).

Same online softmax, per-element lambdas and head-spanning fallback as `_flash_emit`, on a larger
tile: a block of 4 warps owns 64 query rows, each warp 16 of them, and the warps share one stage
of 64 keys. Each warp works on `mma.sync.m16n8k16` (fp32 accumulators) with documented fragment
layouts, so nothing round-trips through shared memory: the warp's Q fragments (up to 128 columns)
are loaded once by ldmatrix and kept in registers; per key tile, Q K^T goes into 8 accumulator
tiles with K fragments by ldmatrix, each score passes through the producer's value lambda in
place, the online softmax reduces each row over the quad of lanes that holds it (fp32 running max
and sum in registers), the weights are packed to 16-bit pairs as the A operand of P V (two
adjacent 8-key accumulator tiles are one 16-key A tile) and P V adds into the output tile in
registers (up to 128 value columns; wider ones in chunks through an fp32 tile in shared memory)
with V^T fragments by ldmatrix.trans. Padded smem rows (16 bytes) keep ldmatrix conflict-free.

K and V are copied with cp.async one tile ahead of the products (two stages, when they fit the
shared-memory limit; one otherwise). Once a tile has masked a whole row, the block probes each
next tile with the value lambda (masked at both 0 and 1 for every score): a dead tile, above a
causal diagonal, is neither staged nor multiplied. A warp whose scores are all masked skips P V.

Staging reads the 16-bit elements as stored, through one pointer per row taken from the address
lambdas, when the source's value is a plain conversion of the element read (so the raw element is
the value) and each row's first and last element addresses are a contiguous run: 16-byte vector
loads when every row pointer is 16-byte aligned and the head sizes are multiples of 8, element
loads otherwise; any other tile goes through the per-element lambdas as before. Head sizes are
zero-padded to 16 in shared memory, so any launch-time size is computed correctly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from klineage.deopt import _flash_mma as M
from klineage.deopt import _threads as T
from klineage.deopt._flash_emit import lam, lambdas, same_tile
from klineage.deopt._flash_index import Coordinates, coordinates
from klineage.deopt._three_phase import ThreePhase

SMEM_LIMIT = 227 * 1024  # bytes of dynamic shared memory one block may opt in to (sm_90)
BR, BK, WARPS = 64, 64, 4  # query rows and keys of a tile; warps of a block (16 query rows each)
THREADS = 32 * WARPS
SLD = BK + 4  # padded row stride of the fp32 weight tile (the fallback's P)
HPAD, OPAD = 8, 4  # row padding (16 bytes) of the 16-bit Q, K, V tiles and the fp32 output tile
PTRS = max(BR, BK)  # row pointers a staging pass keeps in shared memory (K and V each, per stage)
OREG = 8  # 16-column output tiles a warp keeps in registers (head sizes up to 16 * OREG)
_TO_FLOAT = r"(?:__half2float|__bfloat162float|\(float\)|static_cast<float>)"
_SIXTEEN = {"__half": "__float2half_rn", "half": "__float2half_rn", "__nv_bfloat16": "__float2bfloat16_rn"}


@dataclass(frozen=True)
class Element:
    """The 16-bit element type of the staged tiles and its conversion from float."""

    type: str
    convert: str


def _read_type(kernel_text: str, read: str) -> str | None:
    """The pointee type of the pointer an element read `X[e]` (or `*(X ...)`) indexes."""
    m = re.match(r"\s*\*?\s*\(?\s*([A-Za-z_]\w*)", read)
    if m is None:
        return None
    name = m.group(1)
    decl = re.search(
        rf"(?:const\s+)?([\w:]+)\s*(?:const\s*)?\*\s*(?:const\s+)?(?:__restrict__\s+)?{name}\b", kernel_text
    )
    return decl.group(1) if decl else None


def element(tp: ThreePhase, texts: tuple[str, str]) -> Element | None:
    """The common 16-bit type of the query, key and term reads; None when any is not 16-bit or
    they differ (`texts`: producer and consumer kernel texts)."""
    p, c = tp.producer, tp.consumer
    types = {
        _read_type(texts[0], p.query_read),
        _read_type(texts[0], p.key_read),
        _read_type(texts[1], c.term_read),
    }
    if len(types) != 1:
        return None
    ty = types.pop()
    return Element(ty, _SIXTEEN[ty]) if ty in _SIXTEEN else None


def plain(tp: ThreePhase) -> bool:
    """Whether the query, key and term values are the elements they read, only converted to float
    (then the raw 16-bit element is what the staged tile must hold)."""
    p, c = tp.producer, tp.consumer
    pairs = ((p.query, p.query_read), (p.key, p.key_read), (c.term, c.term_read))
    return all(re.fullmatch(rf"\s*{_TO_FLOAT}\s*\(\s*{re.escape(r)}\s*\)\s*", v) for v, r in pairs)


def padded(size: str) -> str:
    return f"(({size} + 15) / 16 * 16)"


def _layout(dqp: str, dvp: str, stages: str) -> str:
    """Dynamic shared memory in bytes for padded head sizes and `stages` K/V buffers: the fp32
    weights of the fallback path, the fp32 output tile past the register columns, the row
    pointers (two stages), the 16-bit Q tile and the K and V stages."""
    floats = f"({BR * SLD} + ({dvp} > {16 * OREG} ? {BR} * ({dvp} + {OPAD}) : 0))"
    halves = f"({BR} * ({dqp} + {HPAD}) + {stages} * {BK} * ({dqp} + {HPAD} + {dvp} + {HPAD}))"
    return f"({floats} * 4 + {2 * 2 * PTRS * 8} + {halves} * 2)"


def stages(dqp: str, dvp: str) -> str:
    """Two K/V stages (the next tile's copy in flight during this tile's products) when they fit
    the shared-memory limit, else one (the copy then lands before the products)."""
    return f"({_layout(dqp, dvp, '2')} <= {SMEM_LIMIT} ? 2 : 1)"


def smem_bytes(dq: str, dv: str) -> str:
    """Dynamic shared memory of the tensor-core kernel in bytes, for head sizes `dq` and `dv`."""
    dqp, dvp = padded(T.paren(dq)), padded(T.paren(dv))
    return _layout(dqp, dvp, stages(dqp, dvp))


def smem_value(dq: int, dv: int, n: int = 1) -> int:
    """Bytes of the layout with `n` stages, for sizes known in the source (one stage: the least
    the kernel runs with)."""
    dqp, dvp = (dq + 15) // 16 * 16, (dv + 15) // 16 * 16
    floats = BR * SLD + (BR * (dvp + OPAD) if dvp > 16 * OREG else 0)
    halves = BR * (dqp + HPAD) + n * BK * (dqp + HPAD + dvp + HPAD)
    return floats * 4 + 2 * 2 * PTRS * 8 + halves * 2


def _addresses(tp: ThreePhase) -> str:
    """Lambdas giving the address of the query and key element read at a (scratch index, column)."""
    p = tp.producer
    args = f"{p.k.tid_type} {p.k.tid}, {p.var_type} {p.var}"
    return "".join(
        lam(name, args, "const void*", p.prelude, "nullptr", f"return (const void*)&({read});")
        for name, read in (("kl_qat", p.query_read), ("kl_kat", p.key_read))
    )


def _row_pointer(h: str, slot: str, ok: str, first: str, last: str, n: str, pad: str) -> str:
    """One thread's row: its first element's address in `slot` (nullptr when `ok` fails: a zero
    row), and whether its elements are a contiguous run (`kl_cont`), 16-byte aligned (`kl_a16`)."""
    return f"""{pad}{{
{pad}    const {h}* kl_ptr = nullptr;
{pad}    if ({ok}) {{
{pad}        kl_ptr = (const {h}*){first};
{pad}        kl_cont &= kl_ptr != nullptr && (const {h}*){last} == kl_ptr + ({n} - 1);
{pad}        kl_a16 &= (reinterpret_cast<unsigned long long>(kl_ptr) & 15ull) == 0;
{pad}    }}
{pad}    {slot} = kl_ptr;
{pad}}}
"""


def _stage(dst: str, ptrs: str, rows: int, n: str, np: str, zero: str, fallback: str, copy: bool) -> str:
    """Copy `rows` rows of `n` elements from the row pointers into `dst` (row stride `np` + HPAD,
    zeros from `n` to `np`): 16-byte vectors when aligned and `n` is a multiple of 8 (`copy`:
    asynchronous, landing at the loop's wait), else elements; `fallback` (the per-element
    lambdas) when a row is not one contiguous run."""
    vec = f"({ptrs}[kl_i] + kl_c)"
    put = (
        f"""if ({ptrs}[kl_i] != nullptr && kl_c < {n}) {M.cp_async16("kl_dst", vec)}
                    else *reinterpret_cast<uint4*>(kl_dst) = make_uint4(0u, 0u, 0u, 0u);"""
        if copy
        else f"""uint4 kl_u = make_uint4(0u, 0u, 0u, 0u);
                    if ({ptrs}[kl_i] != nullptr && kl_c < {n}) kl_u = *reinterpret_cast<const uint4*>{vec};
                    *reinterpret_cast<uint4*>(kl_dst) = kl_u;"""
    )
    return f"""            if (kl_cont && kl_a16 && kl_vec) {{
                for (int kl_e = kl_t; kl_e < {rows} * ({np} / 8); kl_e += {THREADS}) {{
                    const int kl_i = kl_e / ({np} / 8), kl_c = kl_e % ({np} / 8) * 8;
                    auto* kl_dst = {dst} + kl_i * ({np} + {HPAD}) + kl_c;
                    {put}
                }}
            }} else if (kl_cont) {{
                for (int kl_e = kl_t; kl_e < {rows} * {np}; kl_e += {THREADS}) {{
                    const int kl_i = kl_e / {np}, kl_c = kl_e % {np};
                    {dst}[kl_i * ({np} + {HPAD}) + kl_c] = {ptrs}[kl_i] != nullptr && kl_c < {n} ? {ptrs}[kl_i][kl_c] : {zero};
                }}
            }} else {{
{fallback}            }}
"""


def _per_element(dst: str, rows: int, n: str, np: str, value: str, cv: str, ok: str) -> str:
    """The staging loop through the lambdas (`value` of `kl_i`, `kl_c`; `ok` of `kl_i`)."""
    return f"""                for (int kl_e = kl_t; kl_e < {rows} * {np}; kl_e += {THREADS}) {{
                    const int kl_i = kl_e / {np}, kl_c = kl_e % {np};
                    {dst}[kl_i * ({np} + {HPAD}) + kl_c] = {cv}(kl_c < {n} && {ok} ? {value} : 0.0f);
                }}
"""


def _stage_q(tp: ThreePhase, el: Element) -> str:
    """The query tile's staging (once, synchronous; row pointers in `kl_kp`)."""
    h, cv = el.type, el.convert
    slow = _per_element(
        "kl_qh", BR, "kl_dq", "kl_dqp", "kl_qry((kl_r0 + kl_i) * kl_len, kl_c)", cv, "kl_rowok(kl_r0 + kl_i)"
    )
    if not plain(tp):
        return slow
    qrow = _row_pointer(h, "kl_kp[kl_t]", "kl_rowok(kl_r0 + kl_t)", "kl_qat((kl_r0 + kl_t) * kl_len, 0)",
                        "kl_qat((kl_r0 + kl_t) * kl_len, kl_dq - 1)", "kl_dq", " " * 12)  # fmt: skip
    return f"""        int kl_cont = 1, kl_a16 = 1;
        if (kl_t < {BR}) {{
{qrow}        }}
        kl_cont = __syncthreads_and(kl_cont);
        kl_a16 = __syncthreads_and(kl_a16);
        {{
{_stage("kl_qh", "kl_kp", BR, "kl_dq", "kl_dqp", f"{cv}(0.0f)", slow, False)}        }}
"""


def _stage_kv(tp: ThreePhase, el: Element, at: Coordinates) -> str:
    """The key and term tiles' staging into buffer `kl_kb`/`kl_vb` with row pointers `kl_kq`/`kl_vq`
    (the tile at `kl_j0`; `kl_cont`, `kl_a16` reduced over the block first)."""
    h, cv = el.type, el.convert
    on = "kl_j0 + kl_i < kl_len"
    k_slow = _per_element(
        "kl_kb", BK, "kl_dq", "kl_dqp", "kl_key(kl_r0 * kl_len + kl_j0 + kl_i, kl_c)", cv, on
    )
    v_slow = _per_element(
        "kl_vb", BK, "kl_dv", "kl_dvp", "kl_term(kl_r0 * kl_dv + kl_c, kl_j0 + kl_i)", cv, on
    )
    if not plain(tp):
        return f"{k_slow}{v_slow}", ""
    j, on = "kl_j0 + kl_jj", "kl_j0 + kl_jj < kl_len"
    krow = _row_pointer(h, "kl_kq[kl_jj]", on, at.key_at("kl_r0", j, "0"), at.key_at("kl_r0", j, "kl_dq - 1"),
                        "kl_dq", " " * 16)  # fmt: skip
    vrow = _row_pointer(h, "kl_vq[kl_jj]", on, at.term_at("kl_r0", "0", j), at.term_at("kl_r0", "kl_dv - 1", j),
                        "kl_dv", " " * 16)  # fmt: skip
    zero = f"{cv}(0.0f)"
    rows = f"""            if (kl_t >= {THREADS - BK}) {{
                const int kl_jj = kl_t - {THREADS - BK};
{krow}{vrow}            }}
"""
    copy = _stage("kl_kb", "kl_kq", BK, "kl_dq", "kl_dqp", zero, k_slow, True) + _stage(
        "kl_vb", "kl_vq", BK, "kl_dv", "kl_dvp", zero, v_slow, True
    )
    return copy, rows


def _masked(at: Coordinates, m: str | None = None) -> str:
    """Whether the producer masks score (`kl_r`, `kl_j`) whatever the product (-inf at 0 and 1;
    `m`: the row modulo the score's X, when precomputed)."""
    if at.value:
        return f"{at.score('kl_r', 'kl_j', '0.0f', m)} == -INFINITY && {at.score('kl_r', 'kl_j', '1.0f', m)} == -INFINITY"
    return (
        "kl_val(kl_r * kl_len + kl_j, 0.0f) == -INFINITY && kl_val(kl_r * kl_len + kl_j, 1.0f) == -INFINITY"
    )


def _prefetch(tp: ThreePhase, el: Element, at: Coordinates) -> str:
    """Per key tile, one tile ahead of the products when two stages fit: whether every row of the
    block reads the tile its first row reads (`kl_nu`), whether every score of the tile is masked
    (`kl_nd`; probed only once a tile has masked a whole row, so an unmasked attention pays
    nothing), the row pointers, and the copy into buffer `kl_sb` (skipped for a dead tile)."""
    copy, rows = _stage_kv(tp, el, at)
    pm = (
        f"                    const long long kl_pm = kl_rok ? kl_r % {at.row_mod} : 0;\n"
        if at.value and at.row_mod
        else ""
    )
    return f"""        if (kl_jp < kl_len) {{
            const long long kl_j0 = kl_jp;  // the tile this pass stages (the loop's kl_j0 is the one it multiplies)
            const long long kl_jl = min(kl_j0 + {BK - 1}, kl_len - 1);
            int kl_uni = 1, kl_cont = 1, kl_a16 = 1, kl_all = 1;
            const {el.type}** kl_kq = kl_kp + kl_sb * {PTRS};
            const {el.type}** kl_vq = kl_vp + kl_sb * {PTRS};
            {el.type}* kl_kb = kl_kh + kl_sb * {BK} * kl_dqs;
            {el.type}* kl_vb = kl_vh + kl_sb * {BK} * kl_dvs;
{same_tile(BR, lambda r, j: at.key_at(r, j, "0"), at.term_at)}{rows}            if (__syncthreads_count(kl_saw || !(kl_uni && kl_cont && kl_a16)) == 0) {{
                kl_nu = 1;  // one barrier in the common case: the block's tile, contiguous rows, nothing masked yet
                kl_nd = 0;
            }} else {{
                kl_saw = __syncthreads_or(kl_saw);
                if (kl_saw) {{
                    const long long kl_r = kl_r0 + kl_t / 2;
                    const bool kl_rok = kl_rowok(kl_r);
{pm}                    for (int kl_jj = kl_t % 2; kl_jj < {BK} && kl_all; kl_jj += 2) {{
                        const long long kl_j = kl_j0 + kl_jj;
                        kl_all = !kl_rok || kl_j >= kl_len || ({_masked(at, "kl_pm" if pm else None)});
                    }}
                }}
                kl_nd = kl_saw ? __syncthreads_and(kl_all) : 0;
                kl_nu = __syncthreads_and(kl_uni);
                kl_cont = __syncthreads_and(kl_cont);
                kl_a16 = __syncthreads_and(kl_a16);
            }}
            if (kl_nu && !kl_nd) {{
{copy}            }}
        }}
"""


QREG = 8  # 16-column Q fragments a warp keeps in registers (dot lengths up to 16 * QREG)
_LANE = """    const int kl_g = kl_lane / 4, kl_c2 = kl_lane % 4 * 2;  // mma.sync fragment: row group, column pair
    const int kl_lr = (kl_lane & 7) + ((kl_lane >> 3) & 1) * 8, kl_lc = (kl_lane >> 4) * 8;  // ldmatrix A / V^T rows
    const int kl_kr = (kl_lane & 7) + (kl_lane >> 4) * 8, kl_kc = ((kl_lane >> 3) & 1) * 8;  // ldmatrix K rows
"""


def _qk_step(h: str, a: str, kk: str) -> str:
    regs = tuple(f"kl_b[{i}]" for i in range(4))
    return f"""{{
                        #pragma unroll
                        for (int kl_p = 0; kl_p < {BK // 16}; ++kl_p) {{
                            unsigned kl_b[4];
                            {M.ldmatrix_x4(regs, f"kl_kb + (kl_p * 16 + kl_kr) * kl_dqs + {kk} + kl_kc")}
                            {M.mma(h, "kl_s[2 * kl_p]", tuple(f"{a}[{i}]" for i in range(4)), regs[:2])}
                            {M.mma(h, "kl_s[2 * kl_p + 1]", tuple(f"{a}[{i}]" for i in range(4)), regs[2:])}
                        }}
                    }}"""


def _scores(h: str, score: str, at: Coordinates) -> str:
    """The warp's 16 x 64 scores in the mma accumulator layout: Q K^T on tensor cores from the
    register Q fragments and ldmatrix'd K rows, each passed through the producer's value lambda;
    a tile that is not the block's (or rows that do not share one query) through the direct
    score, element by element via the fp32 tile in shared memory."""
    nf = BK // 8
    qa = tuple(f"kl_a[{i}]" for i in range(4))
    return f"""            float kl_s[{nf}][4];
            #pragma unroll
            for (int kl_f = 0; kl_f < {nf}; ++kl_f)
                #pragma unroll
                for (int kl_e = 0; kl_e < 4; ++kl_e) kl_s[kl_f][kl_e] = 0.0f;
            if (kl_uni && kl_qok) {{
                #pragma unroll
                for (int kl_q = 0; kl_q < {QREG}; ++kl_q)
                    if (kl_q * 16 < kl_dqp) {_qk_step(h, "kl_qf[kl_q]", "kl_q * 16")}
                for (int kl_kk = {16 * QREG}; kl_kk < kl_dqp; kl_kk += 16) {{
                    unsigned kl_a[4];
                    {M.ldmatrix_x4(qa, "kl_qh + (kl_w0 + kl_lr) * kl_dqs + kl_kk + kl_lc")}
                    {_qk_step(h, "kl_a", "kl_kk")}
                }}
                #pragma unroll
                for (int kl_f = 0; kl_f < {nf}; ++kl_f)
                    #pragma unroll
                    for (int kl_e = 0; kl_e < 4; ++kl_e) {{
                        const long long kl_r = kl_ra + (kl_e >> 1) * 8, kl_j = kl_j0 + kl_f * 8 + kl_c2 + (kl_e & 1);
                        const float kl_d = kl_s[kl_f][kl_e];
                        kl_s[kl_f][kl_e] = kl_rk[kl_e >> 1] && kl_j < kl_len ? {score} : -INFINITY;
                    }}
            }} else {{
                for (int kl_e = kl_lane; kl_e < 16 * {BK}; kl_e += 32) {{
                    const int kl_rr = kl_w0 + kl_e / {BK}, kl_jj = kl_e % {BK};
                    const long long kl_r = kl_r0 + kl_rr, kl_j = kl_j0 + kl_jj;
                    float kl_v = -INFINITY;
                    if (kl_rowok(kl_r) && kl_j < kl_len && !({_masked(at)})) kl_v = kl_direct(kl_r * kl_len + kl_j);
                    kl_sc[kl_rr * {SLD} + kl_jj] = kl_v;
                }}
                __syncwarp();
                #pragma unroll
                for (int kl_f = 0; kl_f < {nf}; ++kl_f)
                    #pragma unroll
                    for (int kl_e = 0; kl_e < 4; ++kl_e)
                        kl_s[kl_f][kl_e] = kl_sc[(kl_w0 + kl_g + (kl_e >> 1) * 8) * {SLD} + kl_f * 8 + kl_c2 + (kl_e & 1)];
                __syncwarp();
            }}
"""


def _softmax(e: str) -> str:
    """Online softmax of the warp's rows on the registers: each lane holds 16 scores of rows g and
    g + 8, the quad of lanes sharing a row reduces max and sum with two shuffles; weights in fp32
    in place, running max `kl_m`, sum `kl_l`, rescale `kl_al` per row; `kl_live` whether any of
    the warp's scores is unmasked, `kl_saw` whether a row's scores are all masked (the dead-tile
    probe's trigger: a tile past a causal diagonal), `kl_rescale` whether any factor is not 1."""
    nf = BK // 8
    return f"""            float kl_mt[2] = {{-INFINITY, -INFINITY}}, kl_sum[2] = {{0.0f, 0.0f}}, kl_al[2];
            #pragma unroll
            for (int kl_f = 0; kl_f < {nf}; ++kl_f)
                #pragma unroll
                for (int kl_e = 0; kl_e < 4; ++kl_e) kl_mt[kl_e >> 1] = fmaxf(kl_mt[kl_e >> 1], kl_s[kl_f][kl_e]);
            #pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i) {{
                kl_mt[kl_i] = fmaxf(kl_mt[kl_i], __shfl_xor_sync(0xffffffffu, kl_mt[kl_i], 1));
                kl_mt[kl_i] = fmaxf(kl_mt[kl_i], __shfl_xor_sync(0xffffffffu, kl_mt[kl_i], 2));
                const float kl_mo = kl_m[kl_i], kl_mn = fmaxf(kl_mo, kl_mt[kl_i]);
                kl_al[kl_i] = kl_mn == -INFINITY ? 1.0f : {e}(kl_mo - kl_mn);
                kl_m[kl_i] = kl_mn;
            }}
            kl_saw |= kl_mt[0] == -INFINITY || kl_mt[1] == -INFINITY;  // a row of the tile masked whole
            const int kl_live = __any_sync(0xffffffffu, kl_mt[0] != -INFINITY || kl_mt[1] != -INFINITY);
            const int kl_rescale = __any_sync(0xffffffffu, kl_al[0] != 1.0f || kl_al[1] != 1.0f);
            #pragma unroll
            for (int kl_f = 0; kl_f < {nf}; ++kl_f)
                #pragma unroll
                for (int kl_e = 0; kl_e < 4; ++kl_e) {{
                    const float kl_sv = kl_s[kl_f][kl_e], kl_mr = kl_m[kl_e >> 1];
                    const float kl_p = kl_sv == -INFINITY ? 0.0f : {e}(kl_sv - kl_mr);
                    kl_s[kl_f][kl_e] = kl_p;
                    kl_sum[kl_e >> 1] += kl_p;
                }}
            #pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i) {{
                kl_sum[kl_i] += __shfl_xor_sync(0xffffffffu, kl_sum[kl_i], 1);
                kl_sum[kl_i] += __shfl_xor_sync(0xffffffffu, kl_sum[kl_i], 2);
                kl_l[kl_i] = kl_l[kl_i] * kl_al[kl_i] + kl_sum[kl_i];
            }}
"""


def _o_move(op: str) -> str:
    """Load the warp's output elements of column chunk `kl_c0` from `kl_os`, or store them (`op`),
    when the value head size exceeds the register columns."""
    elem = "kl_os[(kl_w0 + kl_g + (kl_e >> 1) * 8) * kl_dos + kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1)]"
    move = f"kl_o[kl_n][kl_e] = {elem};" if op == "load" else f"{elem} = kl_o[kl_n][kl_e];"
    return f"""if (!kl_oreg) {{
                    #pragma unroll
                    for (int kl_n = 0; kl_n < {2 * OREG}; ++kl_n)
                        #pragma unroll
                        for (int kl_e = 0; kl_e < 4; ++kl_e)
                            if (kl_c0 + kl_n * 8 < kl_dvp) {move}
                }}"""


def _weighted(el: Element) -> str:
    """The tile's weighted values into the warp's output registers: each row rescaled by its
    factor, the weights packed in registers as the A operand (two 8-key score tiles are one
    16-key A tile) and P V on tensor cores with V^T fragments by ldmatrix.trans; a tile that is
    not the block's goes element by element through the term lambda with the weights in shared
    memory. Column chunks past the register columns go through `kl_os`."""
    h, cv, nk = el.type, el.convert, BK // 16
    pk = (
        f"kl_pa[kl_k][0] = {M.pack(h, cv, 'kl_s[2 * kl_k][0]', 'kl_s[2 * kl_k][1]')};\n"
        f"                    kl_pa[kl_k][1] = {M.pack(h, cv, 'kl_s[2 * kl_k][2]', 'kl_s[2 * kl_k][3]')};\n"
        f"                    kl_pa[kl_k][2] = {M.pack(h, cv, 'kl_s[2 * kl_k + 1][0]', 'kl_s[2 * kl_k + 1][1]')};\n"
        f"                    kl_pa[kl_k][3] = {M.pack(h, cv, 'kl_s[2 * kl_k + 1][2]', 'kl_s[2 * kl_k + 1][3]')};"
    )
    regs = tuple(f"kl_b[{i}]" for i in range(4))
    pa = tuple(f"kl_pa[kl_k][{i}]" for i in range(4))
    return f"""            if (kl_live) {{
                unsigned kl_pa[{nk}][4];
                #pragma unroll
                for (int kl_k = 0; kl_k < {nk}; ++kl_k) {{
                    {pk}
                }}
                if (!kl_uni) {{
                    #pragma unroll
                    for (int kl_f = 0; kl_f < {BK // 8}; ++kl_f)
                        #pragma unroll
                        for (int kl_e = 0; kl_e < 4; ++kl_e)
                            kl_sc[(kl_w0 + kl_g + (kl_e >> 1) * 8) * {SLD} + kl_f * 8 + kl_c2 + (kl_e & 1)] = kl_s[kl_f][kl_e];
                    __syncwarp();
                }}
                for (int kl_c0 = 0; kl_c0 < kl_dvp; kl_c0 += {16 * OREG}) {{
                    {_o_move("load")}
                    if (kl_rescale)  // exact to skip: every factor of the warp is 1
                        #pragma unroll
                        for (int kl_n = 0; kl_n < {2 * OREG}; ++kl_n)
                            #pragma unroll
                            for (int kl_e = 0; kl_e < 4; ++kl_e) kl_o[kl_n][kl_e] *= kl_al[kl_e >> 1];
                    if (kl_uni) {{
                        #pragma unroll
                        for (int kl_k = 0; kl_k < {nk}; ++kl_k)
                            #pragma unroll
                            for (int kl_n = 0; kl_n < {OREG}; ++kl_n)
                                if (kl_c0 + kl_n * 16 < kl_dvp) {{
                                    unsigned kl_b[4];
                                    {M.ldmatrix_x4(regs, "kl_vb + (kl_k * 16 + kl_lr) * kl_dvs + kl_c0 + kl_n * 16 + kl_lc", trans=True)}
                                    {M.mma(h, "kl_o[2 * kl_n]", pa, regs[:2])}
                                    {M.mma(h, "kl_o[2 * kl_n + 1]", pa, regs[2:])}
                                }}
                    }} else {{
                        for (int kl_n = 0; kl_n < {2 * OREG}; ++kl_n) {{  // rolled: the term lambda written 4 times, not 64
                            float kl_t4[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
                            #pragma unroll
                            for (int kl_e = 0; kl_e < 4; ++kl_e) {{
                                const int kl_c = kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1), kl_rr = kl_w0 + kl_g + (kl_e >> 1) * 8;
                                if (kl_c >= kl_dv) continue;
                                for (int kl_jj = 0; kl_jj < {BK} && kl_j0 + kl_jj < kl_len; ++kl_jj) {{
                                    const float kl_w = kl_sc[kl_rr * {SLD} + kl_jj];
                                    if (kl_w != 0.0f) kl_t4[kl_e] += kl_w * kl_term((kl_r0 + kl_rr) * kl_dv + kl_c, kl_j0 + kl_jj);
                                }}
                            }}
                            #pragma unroll
                            for (int kl_m2 = 0; kl_m2 < {2 * OREG}; ++kl_m2)
                                if (kl_m2 == kl_n)
                                    #pragma unroll
                                    for (int kl_e = 0; kl_e < 4; ++kl_e) kl_o[kl_m2][kl_e] += kl_t4[kl_e];
                        }}
                    }}
                    {_o_move("store")}
                }}
                __syncwarp();
            }}
"""


def kernel(tp: ThreePhase, name: str, params: str, el: Element) -> str:
    """The tensor-core fused kernel's text."""
    p, c, s = tp.producer, tp.consumer, tp.softmax
    h = el.type
    at = coordinates(tp)
    score = (
        at.score("kl_r", "kl_j", "kl_d", "kl_rm[kl_e >> 1]")
        if at.value
        else "kl_val(kl_r * kl_len + kl_j, kl_d)"
    )
    rm = (
        f"    const long long kl_rm[2] = {{kl_rk[0] ? kl_ra % {at.row_mod} : 0, kl_rk[1] ? (kl_ra + 8) % {at.row_mod} : 0}};  // the rows modulo {at.row_mod}\n"
        if at.value and at.row_mod
        else ""
    )
    qf = tuple(f"kl_qf[kl_q][{i}]" for i in range(4))
    return f"""__global__ void {name}({params}) {{
    extern __shared__ __align__(128) unsigned char kl_tsm[];
{lambdas(tp)}{_addresses(tp)}    const int kl_dq = (int)({p.extent});
    const int kl_dv = (int)({c.columns});
    const int kl_dqp = (kl_dq + 15) / 16 * 16, kl_dvp = (kl_dv + 15) / 16 * 16;
    const int kl_dqs = kl_dqp + {HPAD}, kl_dvs = kl_dvp + {HPAD}, kl_dos = kl_dvp + {OPAD};  // padded row strides
    const int kl_vec = kl_dq % 8 == 0 && kl_dv % 8 == 0;
    const bool kl_oreg = kl_dvp <= {16 * OREG};  // the output tile lives in registers
    const int kl_nst = {stages("kl_dqp", "kl_dvp")};  // K/V stages
    const long long kl_len = (long long)({tp.length});
    const long long kl_r0 = (long long)blockIdx.x * {BR};
{at.text}    float* kl_sc = reinterpret_cast<float*>(kl_tsm);
    float* kl_os = kl_sc + {BR * SLD};
    const {h}** kl_kp = reinterpret_cast<const {h}**>(kl_os + (kl_oreg ? 0 : {BR} * kl_dos));
    const {h}** kl_vp = kl_kp + {2 * PTRS};
    {h}* kl_qh = reinterpret_cast<{h}*>(kl_vp + {2 * PTRS});
    {h}* kl_kh = kl_qh + {BR} * kl_dqs;
    {h}* kl_vh = kl_kh + kl_nst * {BK} * kl_dqs;
    const int kl_t = threadIdx.x, kl_lane = kl_t % 32, kl_warp = kl_t / 32;
    const int kl_w0 = kl_warp * 16;  // the warp's first query row in the tile
{_LANE}    if (!kl_oreg)
        for (int kl_e = kl_t; kl_e < {BR} * kl_dos; kl_e += {THREADS}) kl_os[kl_e] = 0.0f;
    int kl_qok = 1;
    if (kl_t < {BR} && kl_rowok(kl_r0 + kl_t))
        kl_qok = kl_qadr((kl_r0 + kl_t) * kl_len) == kl_qadr((kl_r0 + kl_t) * kl_len + kl_len - 1);
    kl_qok = __syncthreads_and(kl_qok);
    if (kl_qok) {{
{_stage_q(tp, el)}    }}
    __syncthreads();
    unsigned kl_qf[{QREG}][4];
    if (kl_qok) {{
        #pragma unroll
        for (int kl_q = 0; kl_q < {QREG}; ++kl_q)
            if (kl_q * 16 < kl_dqp) {M.ldmatrix_x4(qf, "kl_qh + (kl_w0 + kl_lr) * kl_dqs + kl_q * 16 + kl_lc")}
    }}
    const long long kl_ra = kl_r0 + kl_w0 + kl_g;  // the lane's rows: kl_ra and kl_ra + 8
    const bool kl_rk[2] = {{kl_rowok(kl_ra), kl_rowok(kl_ra + 8)}};
{rm}    float kl_m[2] = {{-INFINITY, -INFINITY}}, kl_l[2] = {{0.0f, 0.0f}}, kl_o[{2 * OREG}][4];
    #pragma unroll
    for (int kl_n = 0; kl_n < {2 * OREG}; ++kl_n)
        #pragma unroll
        for (int kl_e = 0; kl_e < 4; ++kl_e) kl_o[kl_n][kl_e] = 0.0f;
    int kl_saw = 0, kl_pu = 0, kl_pd = 1;  // a tile masked a whole row; the previous pass's tile: uniform, dead
    const long long kl_jb = -(long long)(kl_nst - 1) * {BK};  // with two stages the first pass only stages
    for (long long kl_j0 = kl_jb; kl_j0 < kl_len; kl_j0 += {BK}) {{
        const long long kl_jp = kl_j0 + (kl_nst - 1) * {BK};  // the tile staged in this pass
        const int kl_sb = (int)(kl_jp / {BK} % kl_nst);
        int kl_nu = 0, kl_nd = 1;
{_prefetch(tp, el, at)}        {M.COMMIT}
        const int kl_uni = kl_nst == 1 ? kl_nu : kl_pu, kl_dead = kl_nst == 1 ? kl_nd : kl_pd;
        kl_pu = kl_nu;
        kl_pd = kl_nd;
        if (kl_j0 < 0) continue;
        if (kl_nst == 1) {M.wait(0)}
        else {M.wait(1)}
        __syncthreads();
        if (!kl_dead) {{
            const int kl_cb = (int)(kl_j0 / {BK} % kl_nst);
            const {h}* kl_kb = kl_kh + kl_cb * {BK} * kl_dqs;
            const {h}* kl_vb = kl_vh + kl_cb * {BK} * kl_dvs;
{_scores(h, score, at)}{_softmax(s.exp)}{_weighted(el)}        }} else {{
            kl_saw = 1;
        }}
        __syncthreads();
    }}
    {M.wait(0)}
    for (int kl_c0 = 0; kl_c0 < kl_dvp; kl_c0 += {16 * OREG}) {{
        {_o_move("load")}
        #pragma unroll
        for (int kl_n = 0; kl_n < {2 * OREG}; ++kl_n)
            #pragma unroll
            for (int kl_e = 0; kl_e < 4; ++kl_e) {{
                const int kl_c = kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1);
                const long long kl_r = kl_ra + (kl_e >> 1) * 8;
                if (kl_c < kl_dv && kl_rk[kl_e >> 1]) kl_out(kl_r * kl_dv + kl_c, kl_o[kl_n][kl_e] / kl_l[kl_e >> 1]);
            }}
    }}
}}
"""
