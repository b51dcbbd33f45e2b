"""Write flash_fusion's fused kernel on tensor cores, for a three-phase attention whose query, key
and term elements are 16-bit (half or bf16).

Same online softmax, per-element lambdas and head-spanning fallback as `_flash_emit`, on a larger
tile: a block of 4 warps owns 64 query rows, each warp 16 of them (one WMMA row of tiles), and the
warps share one stage of 64 keys. Per key tile the block stages K and V once; then each warp on its
own (warp syncs only) takes its Q K^T tiles (WMMA 16x16x16, fp32 accumulators), passes each score
through the producer's value lambda (masked scores come back -inf; a warp whose tile is all -inf
skips the rest), runs the online softmax of its rows (fp32 running max and sum, weights also in
16-bit) and adds P V into its rows of the fp32 output tile in shared memory.

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

from klineage.deopt import _threads as T
from klineage.deopt._flash_emit import lam, lambdas, row_state, same_tile
from klineage.deopt._flash_index import Coordinates, coordinates
from klineage.deopt._three_phase import ThreePhase

SMEM_LIMIT = 227 * 1024  # bytes of dynamic shared memory one block may opt in to (sm_90)
BR, BK, WARPS = 64, 64, 4  # query rows and keys of a tile; warps of a block (16 query rows each)
THREADS = 32 * WARPS
SLD, PLD = BK + 4, BK + 8  # padded row strides of the fp32 score tile and the 16-bit weight tile
HPAD, OPAD = 8, 4  # row padding (16 bytes) of the 16-bit Q, K, V tiles and the fp32 output tile
PTRS = max(BR, BK)  # row pointers a staging pass keeps in shared memory (K and V each)
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


def smem_bytes(dq: str, dv: str) -> str:
    """Dynamic shared memory of the tensor-core kernel in bytes, for head sizes `dq` and `dv`."""
    dq, dv = T.paren(dq), T.paren(dv)
    dqp, dvp = padded(dq), padded(dv)
    floats = f"({BR} * ({dvp} + {OPAD}) + {BR * SLD} + {3 * BR})"
    halves = f"({BR} * ({dqp} + {HPAD}) + {BK} * ({dqp} + {HPAD}) + {BK} * ({dvp} + {HPAD}) + {BR * PLD})"
    return f"({floats} * 4 + {2 * PTRS * 8} + {halves} * 2)"


def smem_value(dq: int, dv: int) -> int:
    """`smem_bytes` for sizes known in the source."""
    dqp, dvp = (dq + 15) // 16 * 16, (dv + 15) // 16 * 16
    floats = BR * (dvp + OPAD) + BR * SLD + 3 * BR
    halves = BR * (dqp + HPAD) + BK * (dqp + HPAD) + BK * (dvp + HPAD) + BR * PLD
    return floats * 4 + 2 * PTRS * 8 + halves * 2


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


def _stage(dst: str, ptrs: str, rows: int, n: str, np: str, zero: str, fallback: str) -> str:
    """Copy `rows` rows of `n` elements from the row pointers into `dst` (row stride `np` + HPAD,
    zeros from `n` to `np`): 16-byte vectors when aligned and `n` is a multiple of 8, else elements; `fallback`
    (the per-element lambdas) when a row is not one contiguous run."""
    return f"""            if (kl_cont && kl_a16 && kl_vec) {{
                for (int kl_e = kl_t; kl_e < {rows} * ({np} / 8); kl_e += {THREADS}) {{
                    const int kl_i = kl_e / ({np} / 8), kl_c = kl_e % ({np} / 8) * 8;
                    uint4 kl_u = make_uint4(0u, 0u, 0u, 0u);
                    if ({ptrs}[kl_i] != nullptr && kl_c < {n}) kl_u = *reinterpret_cast<const uint4*>({ptrs}[kl_i] + kl_c);
                    *reinterpret_cast<uint4*>({dst} + kl_i * ({np} + {HPAD}) + kl_c) = kl_u;
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


def _staging(tp: ThreePhase, el: Element, at: Coordinates) -> tuple[str, str]:
    """(the query tile's staging, the key and term tiles' staging) of the kernel."""
    h, cv, fast = el.type, el.convert, plain(tp)
    zero = f"{cv}(0.0f)"
    q_slow = _per_element(
        "kl_qh", BR, "kl_dq", "kl_dqp", "kl_qry((kl_r0 + kl_i) * kl_len, kl_c)", cv, "kl_rowok(kl_r0 + kl_i)"
    )
    k_slow = _per_element(
        "kl_kh",
        BK,
        "kl_dq",
        "kl_dqp",
        "kl_key(kl_r0 * kl_len + kl_j0 + kl_i, kl_c)",
        cv,
        "kl_j0 + kl_i < kl_len",
    )
    v_slow = _per_element("kl_vh", BK, "kl_dv", "kl_dvp", "kl_term(kl_r0 * kl_dv + kl_c, kl_j0 + kl_i)", cv,
                          "kl_j0 + kl_i < kl_len")  # fmt: skip
    if not fast:
        return q_slow, f"        if (kl_uni) {{\n{k_slow}{v_slow}        }}\n"
    qrow = _row_pointer(
        h,
        "kl_kp[kl_t]",
        "kl_rowok(kl_r0 + kl_t)",
        "kl_qat((kl_r0 + kl_t) * kl_len, 0)",
        "kl_qat((kl_r0 + kl_t) * kl_len, kl_dq - 1)",
        "kl_dq",
        " " * 12,
    )
    j, on = "kl_j0 + kl_jj", "kl_j0 + kl_jj < kl_len"
    krow = _row_pointer(
        h,
        "kl_kp[kl_jj]",
        on,
        at.key_at("kl_r0", j, "0"),
        at.key_at("kl_r0", j, "kl_dq - 1"),
        "kl_dq",
        " " * 12,
    )
    vrow = _row_pointer(h, "kl_vp[kl_jj]", on, at.term_at("kl_r0", "0", j), at.term_at("kl_r0", "kl_dv - 1", j),
                        "kl_dv", " " * 12)  # fmt: skip
    q = f"""        int kl_cont = 1, kl_a16 = 1;
        if (kl_t < {BR}) {{
{qrow}        }}
        kl_cont = __syncthreads_and(kl_cont);
        kl_a16 = __syncthreads_and(kl_a16);
        {{
{_stage("kl_qh", "kl_kp", BR, "kl_dq", "kl_dqp", zero, q_slow)}        }}
"""
    kv = f"""        if (kl_t >= {THREADS - BK}) {{
            const int kl_jj = kl_t - {THREADS - BK};
{krow}{vrow}        }}
        kl_cont = __syncthreads_and(kl_cont);
        kl_a16 = __syncthreads_and(kl_a16);
        if (kl_uni) {{
{_stage("kl_kh", "kl_kp", BK, "kl_dq", "kl_dqp", zero, k_slow)}{_stage("kl_vh", "kl_vp", BK, "kl_dv", "kl_dvp", zero, v_slow)}        }}
"""
    return q, kv


def _uniform(at: Coordinates) -> str:
    """Per key tile: whether every row of the block reads the key and term tile its first row
    reads (`kl_uni`; first and last key, first and last column)."""
    return f"""        const long long kl_jl = min(kl_j0 + {BK - 1}, kl_len - 1);
        int kl_uni = 1, kl_cont = 1, kl_a16 = 1;
{same_tile(BR, lambda r, j: at.key_at(r, j, "0"), at.term_at)}        kl_uni = __syncthreads_and(kl_uni);
"""


def _softmax(e: str, cv: str, score: str) -> str:
    """The warp's 16 rows, two lanes a row (keys alternating between them): each score through the
    producer's value lambda (on the staged Q K^T, or the direct score when the tile is not the
    block's; -inf when masked) and the row's running max, then the weights against it, kept in
    fp32 (in place) and in 16-bit (`kl_ph`, for P V), the running sum and the row's rescale factor
    (`kl_al`); `kl_live` whether any of the warp's scores is unmasked. `score`: the value of the
    staged product `kl_d` at row `kl_r`, key `kl_j` (scratch index `kl_x`)."""
    return f"""        const int kl_rr = kl_w0 + kl_lane / 2, kl_h = kl_lane % 2;
        const long long kl_r = kl_r0 + kl_rr;
        const bool kl_rok = kl_rowok(kl_r);
        float* kl_row = &kl_sc[kl_rr * {SLD}];
        float kl_mt = -INFINITY;
        for (int kl_jj = kl_h; kl_jj < {BK}; kl_jj += 2) {{
            const long long kl_j = kl_j0 + kl_jj, kl_x = kl_r * kl_len + kl_j;
            float kl_v = -INFINITY;
            if (kl_rok && kl_j < kl_len) {{
                if (kl_uni && kl_qok) {{
                    const float kl_d = kl_row[kl_jj];
                    kl_v = {score};
                }} else if (!(kl_val(kl_x, 0.0f) == -INFINITY && kl_val(kl_x, 1.0f) == -INFINITY)) {{
                    kl_v = kl_direct(kl_x);
                }}
            }}
            kl_row[kl_jj] = kl_v;
            kl_mt = fmaxf(kl_mt, kl_v);
        }}
        kl_mt = fmaxf(kl_mt, __shfl_xor_sync(0xffffffffu, kl_mt, 1));
        const int kl_live = __any_sync(0xffffffffu, kl_mt != -INFINITY);
        const float kl_mo = kl_m[kl_rr], kl_mn = fmaxf(kl_mo, kl_mt);
        float kl_sum = 0.0f;
        for (int kl_jj = kl_h; kl_jj < {BK}; kl_jj += 2) {{
            const float kl_s = kl_row[kl_jj];
            const float kl_p = kl_s == -INFINITY ? 0.0f : {e}(kl_s - kl_mn);
            kl_sum += kl_p;
            kl_row[kl_jj] = kl_p;
            kl_ph[kl_rr * {PLD} + kl_jj] = {cv}(kl_p);
        }}
        kl_sum += __shfl_xor_sync(0xffffffffu, kl_sum, 1);
        if (kl_h == 0) {{
            const float kl_a = kl_mn == -INFINITY ? 1.0f : {e}(kl_mo - kl_mn);
            kl_al[kl_rr] = kl_a;
            kl_l[kl_rr] = kl_l[kl_rr] * kl_a + kl_sum;
            kl_m[kl_rr] = kl_mn;
        }}
        __syncwarp();
"""


OREG = 8  # output column tiles a warp keeps in registers (head sizes up to 16 * OREG)
_W = "nvcuda::wmma"
_ACC = f"{_W}::fragment<{_W}::accumulator, 16, 16, 16, float>"


def _o_setup() -> str:
    """The warp's output tile in WMMA accumulators when the value head size allows (`kl_oreg`),
    and `kl_rid`, an accumulator whose every element holds its own row: WMMA leaves the element
    mapping unspecified, so the per-row rescale reads each element's row from it."""
    return f"""    const bool kl_oreg = kl_dvp <= {16 * OREG};
    {_ACC} kl_oacc[{OREG}], kl_rid;
    #pragma unroll
    for (int kl_f = 0; kl_f < {OREG}; ++kl_f) {_W}::fill_fragment(kl_oacc[kl_f], 0.0f);
    for (int kl_e = kl_lane; kl_e < 256; kl_e += 32) kl_sc[(kl_w0 + kl_e / 16) * {SLD} + kl_e % 16] = (float)(kl_e / 16);
    __syncwarp();
    {_W}::load_matrix_sync(kl_rid, kl_sc + kl_w0 * {SLD}, {SLD}, {_W}::mem_row_major);
    __syncwarp();
"""


def _o_regs(op: str) -> str:
    """Store the register output tile to its rows of `kl_os`, or load it back (`op`)."""
    call = (
        f"{_W}::store_matrix_sync(kl_os + kl_w0 * kl_dos + kl_f * 16, kl_oacc[kl_f], kl_dos, {_W}::mem_row_major)"
        if op == "store"
        else f"{_W}::load_matrix_sync(kl_oacc[kl_f], kl_os + kl_w0 * kl_dos + kl_f * 16, kl_dos, {_W}::mem_row_major)"
    )
    return f"""{{
        #pragma unroll
        for (int kl_f = 0; kl_f < {OREG}; ++kl_f)
            if (kl_f * 16 < kl_dvp) {call};
    }}
"""


def _weighted(h: str) -> str:
    """The warp's rows take the tile's weighted values: each row rescaled by its factor, then
    P V on tensor cores into the register tile (or, past OREG column tiles, into `kl_os`, loaded,
    multiplied and stored per column tile); a tile that spans heads goes element by element
    through the term lambda on `kl_os`."""
    w, nf = _W, BK // 16
    frag = f"{w}::fragment"
    a_frag, b_frag = (f"{frag}<{w}::{m}, 16, 16, 16, {h}, {w}::row_major>" for m in ("matrix_a", "matrix_b"))
    return f"""            if (kl_uni) {{
                {a_frag} kl_pa[{nf}];
                #pragma unroll
                for (int kl_f = 0; kl_f < {nf}; ++kl_f) {w}::load_matrix_sync(kl_pa[kl_f], kl_ph + kl_w0 * {PLD} + kl_f * 16, {PLD});
                if (kl_oreg) {{
                    if (__any_sync(0xffffffffu, kl_lane < 16 && kl_al[kl_w0 + kl_lane] != 1.0f)) {{
                        float kl_ai[sizeof(kl_rid.x) / sizeof(float)];
                        #pragma unroll
                        for (int kl_i = 0; kl_i < (int)(sizeof(kl_rid.x) / sizeof(float)); ++kl_i) kl_ai[kl_i] = kl_al[kl_w0 + (int)kl_rid.x[kl_i]];
                        #pragma unroll
                        for (int kl_f = 0; kl_f < {OREG}; ++kl_f)
                            #pragma unroll
                            for (int kl_i = 0; kl_i < (int)(sizeof(kl_rid.x) / sizeof(float)); ++kl_i) kl_oacc[kl_f].x[kl_i] *= kl_ai[kl_i];
                    }}
                    #pragma unroll
                    for (int kl_c = 0; kl_c < {OREG}; ++kl_c) {{
                        if (kl_c * 16 >= kl_dvp) break;
                        #pragma unroll
                        for (int kl_f = 0; kl_f < {nf}; ++kl_f) {{
                            {b_frag} kl_b;
                            {w}::load_matrix_sync(kl_b, kl_vh + kl_f * 16 * kl_dvs + kl_c * 16, kl_dvs);
                            {w}::mma_sync(kl_oacc[kl_c], kl_pa[kl_f], kl_b, kl_oacc[kl_c]);
                        }}
                    }}
                }} else {{
                    for (int kl_i = 0; kl_i < 16; ++kl_i) {{
                        const float kl_a = kl_al[kl_w0 + kl_i];
                        if (kl_a != 1.0f)
                            for (int kl_c = kl_lane; kl_c < kl_dvp; kl_c += 32) kl_os[(kl_w0 + kl_i) * kl_dos + kl_c] *= kl_a;
                    }}
                    __syncwarp();
                    for (int kl_c = 0; kl_c < kl_dvp; kl_c += 16) {{
                        float* kl_o = kl_os + kl_w0 * kl_dos + kl_c;
                        {_ACC} kl_acc;
                        {w}::load_matrix_sync(kl_acc, kl_o, kl_dos, {w}::mem_row_major);
                        #pragma unroll
                        for (int kl_f = 0; kl_f < {nf}; ++kl_f) {{
                            {b_frag} kl_b;
                            {w}::load_matrix_sync(kl_b, kl_vh + kl_f * 16 * kl_dvs + kl_c, kl_dvs);
                            {w}::mma_sync(kl_acc, kl_pa[kl_f], kl_b, kl_acc);
                        }}
                        {w}::store_matrix_sync(kl_o, kl_acc, kl_dos, {w}::mem_row_major);
                    }}
                }}
            }} else {{
                if (kl_oreg) {_o_regs("store")}
                __syncwarp();
                for (int kl_e = kl_lane; kl_e < 16 * kl_dv; kl_e += 32) {{
                    const int kl_rr = kl_w0 + kl_e / kl_dv, kl_c = kl_e % kl_dv;
                    const float* kl_w = &kl_sc[kl_rr * {SLD}];
                    float kl_a = kl_os[kl_rr * kl_dos + kl_c] * kl_al[kl_rr];
                    for (int kl_jj = 0; kl_jj < {BK} && kl_j0 + kl_jj < kl_len; ++kl_jj)
                        if (kl_w[kl_jj] != 0.0f) kl_a += kl_w[kl_jj] * kl_term((kl_r0 + kl_rr) * kl_dv + kl_c, kl_j0 + kl_jj);
                    kl_os[kl_rr * kl_dos + kl_c] = kl_a;
                }}
                __syncwarp();
                if (kl_oreg) {_o_regs("load")}
            }}
"""


def kernel(tp: ThreePhase, name: str, params: str, el: Element) -> str:
    """The tensor-core fused kernel's text."""
    p, c, s = tp.producer, tp.consumer, tp.softmax
    h, cv, w = el.type, el.convert, "nvcuda::wmma"
    frag = f"{w}::fragment"
    at = coordinates(tp)
    stage_q, stage_kv = _staging(tp, el, at)
    nf = BK // 16
    score = "kl_vrk(kl_r, kl_j, kl_d)" if at.value else "kl_val(kl_x, kl_d)"
    return f"""__global__ void {name}({params}) {{
    extern __shared__ __align__(128) unsigned char kl_tsm[];
{lambdas(tp)}{_addresses(tp)}    const int kl_dq = (int)({p.extent});
    const int kl_dv = (int)({c.columns});
    const int kl_dqp = (kl_dq + 15) / 16 * 16, kl_dvp = (kl_dv + 15) / 16 * 16;
    const int kl_dqs = kl_dqp + {HPAD}, kl_dvs = kl_dvp + {HPAD}, kl_dos = kl_dvp + {OPAD};  // padded row strides
    const int kl_vec = kl_dq % 8 == 0 && kl_dv % 8 == 0;
    const long long kl_len = (long long)({tp.length});
    const long long kl_r0 = (long long)blockIdx.x * {BR};
{at.text}    float* kl_os = reinterpret_cast<float*>(kl_tsm);
    float* kl_sc = kl_os + {BR} * kl_dos;
    float* kl_m = kl_sc + {BR * SLD};
    float* kl_l = kl_m + {BR};
    float* kl_al = kl_l + {BR};
    const {h}** kl_kp = reinterpret_cast<const {h}**>(kl_al + {BR});
    const {h}** kl_vp = kl_kp + {PTRS};
    {h}* kl_qh = reinterpret_cast<{h}*>(kl_vp + {PTRS});
    {h}* kl_kh = kl_qh + {BR} * kl_dqs;
    {h}* kl_vh = kl_kh + {BK} * kl_dqs;
    {h}* kl_ph = kl_vh + {BK} * kl_dvs;
{row_state(f"{BR} * kl_dos", BR, THREADS)}    const int kl_w0 = kl_warp * 16;  // the warp's first query row in the tile
    if (kl_qok) {{
{stage_q}    }}
{_o_setup()}    __syncthreads();
    for (long long kl_j0 = 0; kl_j0 < kl_len; kl_j0 += {BK}) {{
{_uniform(at)}{stage_kv}        __syncthreads();
        if (kl_uni && kl_qok) {{
            {frag}<{w}::accumulator, 16, 16, 16, float> kl_acc[{nf}];
            #pragma unroll
            for (int kl_f = 0; kl_f < {nf}; ++kl_f) {w}::fill_fragment(kl_acc[kl_f], 0.0f);
            for (int kl_kk = 0; kl_kk < kl_dqp; kl_kk += 16) {{
                {frag}<{w}::matrix_a, 16, 16, 16, {h}, {w}::row_major> kl_a;
                {w}::load_matrix_sync(kl_a, kl_qh + kl_w0 * kl_dqs + kl_kk, kl_dqs);
                #pragma unroll
                for (int kl_f = 0; kl_f < {nf}; ++kl_f) {{
                    {frag}<{w}::matrix_b, 16, 16, 16, {h}, {w}::col_major> kl_b;
                    {w}::load_matrix_sync(kl_b, kl_kh + kl_f * 16 * kl_dqs + kl_kk, kl_dqs);
                    {w}::mma_sync(kl_acc[kl_f], kl_a, kl_b, kl_acc[kl_f]);
                }}
            }}
            #pragma unroll
            for (int kl_f = 0; kl_f < {nf}; ++kl_f)
                {w}::store_matrix_sync(kl_sc + kl_w0 * {SLD} + kl_f * 16, kl_acc[kl_f], {SLD}, {w}::mem_row_major);
        }}
        __syncwarp();
{_softmax(s.exp, cv, score)}        if (kl_live) {{
{_weighted(h)}        }}
        __syncthreads();
    }}
    if (kl_oreg) {_o_regs("store")}
    __syncwarp();
    for (int kl_e = kl_lane; kl_e < 16 * kl_dv; kl_e += 32) {{
        const int kl_rr = kl_w0 + kl_e / kl_dv, kl_c = kl_e % kl_dv;
        const long long kl_r = kl_r0 + kl_rr;
        if (kl_rowok(kl_r)) kl_out(kl_r * kl_dv + kl_c, kl_os[kl_rr * kl_dos + kl_c] / kl_l[kl_rr]);
    }}
}}
"""
