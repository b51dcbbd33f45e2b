"""Write flash_fusion's fused kernel on tensor cores, for a three-phase attention whose query, key
and term elements are 16-bit (half or bf16).

Same tiling, online softmax, mask-tile skipping and per-element lambdas as `_flash_emit`, but the
staged tiles hold the 16-bit elements (the lambdas' float values converted back, exact since they
were converted from 16-bit), the score tile Q K^T and the product P V are WMMA 16x16x16 products
with float accumulators, and the softmax weights are also kept in 16-bit for the second product.
Head sizes are padded to a multiple of 16 with zeros in shared memory, so any launch-time size is
computed correctly; the accumulators and the running max and sum stay fp32.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from klineage.deopt import _threads as T
from klineage.deopt._flash_emit import (
    BK,
    BR,
    THREADS,
    lambdas,
    online_softmax,
    row_state,
    score_loop_head,
    tile_mask,
)
from klineage.deopt._three_phase import ThreePhase

SMEM_LIMIT = 227 * 1024  # bytes of dynamic shared memory one block may opt in to (sm_90)
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


def padded(size: str) -> str:
    return f"(({size} + 15) / 16 * 16)"


def smem_bytes(dq: str, dv: str) -> str:
    """Dynamic shared memory of the tensor-core kernel in bytes, for head sizes `dq` and `dv`."""
    dq, dv = T.paren(dq), T.paren(dv)
    dqp, dvp = padded(dq), padded(dv)
    floats = f"({BR} * {dvp} + {BR * BK} + {BR * (BK + 1)} + {3 * BR})"
    halves = f"({BR} * {dqp} + {BK} * {dqp} + {BK} * {dvp} + {BR * BK})"
    return f"({floats} * 4 + {halves} * 2)"


def smem_value(dq: int, dv: int) -> int:
    """`smem_bytes` for sizes known in the source."""
    dqp, dvp = (dq + 15) // 16 * 16, (dv + 15) // 16 * 16
    floats = BR * dvp + BR * BK + BR * (BK + 1) + 3 * BR
    return floats * 4 + (BR * dqp + BK * dqp + BK * dvp + BR * BK) * 2


def kernel(tp: ThreePhase, name: str, params: str, el: Element) -> str:
    """The tensor-core fused kernel's text."""
    p, c, s = tp.producer, tp.consumer, tp.softmax
    e, h, cv, w = s.exp, el.type, el.convert, "nvcuda::wmma"
    frag = f"{w}::fragment"
    keep_p = f"            kl_ph[kl_rr * {BK} + kl_lane] = {cv}(kl_p);\n"  # P in 16-bit for P V
    return f"""__global__ void {name}({params}) {{
    extern __shared__ __align__(128) unsigned char kl_tsm[];
{lambdas(tp)}    const int kl_dq = (int)({p.extent});
    const int kl_dv = (int)({c.columns});
    const int kl_dqp = (kl_dq + 15) / 16 * 16, kl_dvp = (kl_dv + 15) / 16 * 16;
    const long long kl_len = (long long)({tp.length});
    const long long kl_r0 = (long long)blockIdx.x * {BR};
    float* kl_os = reinterpret_cast<float*>(kl_tsm);
    float* kl_sc = kl_os + {BR} * kl_dvp;
    float* kl_ps = kl_sc + {BR * BK};
    float* kl_m = kl_ps + {BR * (BK + 1)};
    float* kl_l = kl_m + {BR};
    float* kl_al = kl_l + {BR};
    {h}* kl_qh = reinterpret_cast<{h}*>(kl_al + {BR});
    {h}* kl_kh = kl_qh + {BR} * kl_dqp;
    {h}* kl_vh = kl_kh + {BK} * kl_dqp;
    {h}* kl_ph = kl_vh + {BK} * kl_dvp;
{row_state(f"{BR} * kl_dvp")}    if (kl_qok)
        for (int kl_e = kl_t; kl_e < {BR} * kl_dqp; kl_e += {THREADS}) {{
            const long long kl_r = kl_r0 + kl_e / kl_dqp;
            const int kl_d = kl_e % kl_dqp;
            kl_qh[kl_e] = {cv}(kl_d < kl_dq && kl_rowok(kl_r) ? kl_qry(kl_r * kl_len, kl_d) : 0.0f);
        }}
    for (long long kl_j0 = 0; kl_j0 < kl_len; kl_j0 += {BK}) {{
{tile_mask()}        if (kl_uni) {{
            for (int kl_e = kl_t; kl_e < {BK} * kl_dqp; kl_e += {THREADS}) {{
                const long long kl_j = kl_j0 + kl_e / kl_dqp;
                const int kl_d = kl_e % kl_dqp;
                kl_kh[kl_e] = {cv}(kl_j < kl_len && kl_d < kl_dq ? kl_key(kl_r0 * kl_len + kl_j, kl_d) : 0.0f);
            }}
            for (int kl_e = kl_t; kl_e < {BK} * kl_dvp; kl_e += {THREADS}) {{
                const long long kl_j = kl_j0 + kl_e / kl_dvp;
                const int kl_c = kl_e % kl_dvp;
                kl_vh[kl_e] = {cv}(kl_j < kl_len && kl_c < kl_dv ? kl_term(kl_r0 * kl_dv + kl_c, kl_j) : 0.0f);
            }}
        }}
        __syncthreads();
        if (kl_uni && kl_qok && kl_warp < {(BR // 16) * (BK // 16)}) {{
            const int kl_wr = kl_warp / {BK // 16}, kl_wc = kl_warp % {BK // 16};
            {frag}<{w}::accumulator, 16, 16, 16, float> kl_acc;
            {w}::fill_fragment(kl_acc, 0.0f);
            for (int kl_kk = 0; kl_kk < kl_dqp; kl_kk += 16) {{
                {frag}<{w}::matrix_a, 16, 16, 16, {h}, {w}::row_major> kl_a;
                {frag}<{w}::matrix_b, 16, 16, 16, {h}, {w}::col_major> kl_b;
                {w}::load_matrix_sync(kl_a, kl_qh + kl_wr * 16 * kl_dqp + kl_kk, kl_dqp);
                {w}::load_matrix_sync(kl_b, kl_kh + kl_wc * 16 * kl_dqp + kl_kk, kl_dqp);
                {w}::mma_sync(kl_acc, kl_a, kl_b, kl_acc);
            }}
            {w}::store_matrix_sync(kl_sc + kl_wr * 16 * {BK} + kl_wc * 16, kl_acc, {BK}, {w}::mem_row_major);
        }}
        __syncthreads();
{score_loop_head()}            *kl_s = kl_uni && kl_qok ? kl_val(kl_x, kl_sc[kl_e]) : kl_direct(kl_x);
        }}
        __syncthreads();
{online_softmax(e, keep_p)}        __syncthreads();
        if (kl_uni) {{
            for (int kl_e = kl_t; kl_e < {BR} * kl_dvp; kl_e += {THREADS}) kl_os[kl_e] *= kl_al[kl_e / kl_dvp];
            __syncthreads();
            for (int kl_tile = kl_warp; kl_tile < {BR // 16} * (kl_dvp / 16); kl_tile += {THREADS // 32}) {{
                const int kl_wr = kl_tile / (kl_dvp / 16), kl_wc = kl_tile % (kl_dvp / 16);
                float* kl_o = kl_os + kl_wr * 16 * kl_dvp + kl_wc * 16;
                {frag}<{w}::accumulator, 16, 16, 16, float> kl_acc;
                {w}::load_matrix_sync(kl_acc, kl_o, kl_dvp, {w}::mem_row_major);
                for (int kl_kk = 0; kl_kk < {BK}; kl_kk += 16) {{
                    {frag}<{w}::matrix_a, 16, 16, 16, {h}, {w}::row_major> kl_a;
                    {frag}<{w}::matrix_b, 16, 16, 16, {h}, {w}::row_major> kl_b;
                    {w}::load_matrix_sync(kl_a, kl_ph + kl_wr * 16 * {BK} + kl_kk, {BK});
                    {w}::load_matrix_sync(kl_b, kl_vh + kl_kk * kl_dvp + kl_wc * 16, kl_dvp);
                    {w}::mma_sync(kl_acc, kl_a, kl_b, kl_acc);
                }}
                {w}::store_matrix_sync(kl_o, kl_acc, kl_dvp, {w}::mem_row_major);
            }}
        }} else {{
            for (int kl_e = kl_t; kl_e < {BR} * kl_dv; kl_e += {THREADS}) {{
                const int kl_rr = kl_e / kl_dv, kl_c = kl_e % kl_dv;
                const float* kl_w = &kl_ps[kl_rr * {BK + 1}];
                float kl_a = kl_os[kl_rr * kl_dvp + kl_c] * kl_al[kl_rr];
                for (int kl_jj = 0; kl_jj < {BK} && kl_j0 + kl_jj < kl_len; ++kl_jj)
                    if (kl_w[kl_jj] != 0.0f) kl_a += kl_w[kl_jj] * kl_term((kl_r0 + kl_rr) * kl_dv + kl_c, kl_j0 + kl_jj);
                kl_os[kl_rr * kl_dvp + kl_c] = kl_a;
            }}
        }}
        __syncthreads();
    }}
    for (int kl_e = kl_t; kl_e < {BR} * kl_dv; kl_e += {THREADS}) {{
        const long long kl_r = kl_r0 + kl_e / kl_dv;
        if (kl_rowok(kl_r)) kl_out(kl_r * kl_dv + kl_e % kl_dv, kl_os[(kl_e / kl_dv) * kl_dvp + kl_e % kl_dv] / kl_l[kl_e / kl_dv]);
    }}
}}
"""
