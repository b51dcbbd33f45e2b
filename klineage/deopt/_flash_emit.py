"""Write the fused kernel of flash_fusion from a ThreePhase reading.

A block owns BR consecutive scratch rows (query rows) and walks the keys in tiles of BK: the query
factor of its rows is staged once in shared memory, per tile the key factor and the consumer's
term are staged (as float, from the block's first row), then each (row, key) score is the dot of
the staged rows passed through the producer's own value expression, an online softmax per row
(warp per row: running max, rescale by exp(m_old - m_new), running sum) turns the tile into
weights, and each (row, column) accumulator in shared memory is rescaled and takes the weighted
terms. Tiles whose every score the producer masks (its value is -inf whatever the dot) are skipped.

The producer's and consumer's per-element code is kept verbatim inside lambdas of the scratch
index (so any coordinate derivation, mask or epilogue they wrote is what runs); staging from the
block's first row is used only when the elements read for every row of the block are the same
addresses (checked per tile), otherwise the block reads them through the lambdas directly.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from klineage.deopt import _threads as T
from klineage.deopt._three_phase import ThreePhase

BR, BK, THREADS = 32, 32, 256


def _returns(stmts: tuple[str, ...], value: str) -> str:
    """The statements with every bare `return;` returning `value`."""
    body = "\n".join(stmts)
    return re.sub(r"\breturn\s*;", f"return {value};", body) if value else body


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + ln if ln.strip() else ln for ln in text.splitlines())


def lam(name: str, args: str, ret: str, stmts: tuple[str, ...], default: str, last: str) -> str:
    """A kernel-local lambda `name(args) -> ret` running `stmts` (a bare `return;` in them returns
    `default`), then `last`."""
    body = _indent(_returns(stmts, default) + ("\n" + last if last else ""), " " * 8)
    return f"    auto {name} = [&]({args}) -> {ret} {{\n{body}\n    }};\n"


def lambdas(tp: ThreePhase) -> str:
    """The per-element lambdas of the fused kernel (kernel-local, capturing the parameters)."""
    p, c, s = tp.producer, tp.consumer, tp.softmax
    it, ct = p.k.tid_type, c.k.tid_type

    d_at = (f"const {p.var_type} {p.var} = 0;",)
    return "".join(
        (
            lam("kl_rowok", f"{s.k.tid_type} {s.k.tid}", "bool", (), "", f"return !({s.guard});"),
            lam("kl_qry", f"{it} {p.k.tid}, {p.var_type} {p.var}", "float", p.prelude, "0.0f", f"return {p.query};"),
            lam("kl_key", f"{it} {p.k.tid}, {p.var_type} {p.var}", "float", p.prelude, "0.0f", f"return {p.key};"),
            lam("kl_qadr", f"{it} {p.k.tid}", "const void*", p.prelude + d_at, "nullptr",
                f"return (const void*)&({p.query_read});"),
            lam("kl_kadr", f"{it} {p.k.tid}", "const void*", p.prelude + d_at, "nullptr",
                f"return (const void*)&({p.key_read});"),
            lam("kl_val", f"{it} {p.k.tid}, float {p.acc}", "float", p.prelude, "-INFINITY", f"return {p.value};"),
            lam("kl_direct", f"{it} {p.k.tid}", "float", (*p.prelude, p.acc_decl, p.loop), "-INFINITY",
                f"return {p.value};"),
            lam("kl_term", f"{ct} {c.k.tid}, {c.var_type} {c.var}", "float", c.prelude, "0.0f", f"return {c.term};"),
            lam("kl_vadr", f"{ct} {c.k.tid}, {c.var_type} {c.var}", "const void*", c.prelude, "nullptr",
                f"return (const void*)&({c.term_read});"),
            lam("kl_out", f"{ct} {c.k.tid}, float {c.acc}", "void", (*c.prelude, *c.post), "", ""),
        )
    )  # fmt: skip


def smem_floats(dq: str, dv: str) -> str:
    """Dynamic shared memory of the fused kernel, in floats, for head sizes `dq` and `dv`."""
    return f"({BR} * {dq} + {BK} * ({dq} + 1) + {BK} * {dv} + {BR} * {BK + 1} + {BR} * {dv} + {3 * BR})"


def row_state(outputs: str, br: int = BR, threads: int = THREADS) -> str:
    """Thread and warp ids, the running max, sum and `outputs` accumulators zeroed, and whether
    every query row of the block (`br` rows, `threads` threads) reads one query vector for all its
    keys (`kl_qok`)."""
    return f"""    const int kl_t = threadIdx.x, kl_lane = kl_t % 32, kl_warp = kl_t / 32;
    for (int kl_e = kl_t; kl_e < {br}; kl_e += {threads}) {{
        kl_m[kl_e] = -INFINITY;
        kl_l[kl_e] = 0.0f;
    }}
    for (int kl_e = kl_t; kl_e < {outputs}; kl_e += {threads}) kl_os[kl_e] = 0.0f;
    int kl_qok = 1;
    if (kl_t < {br} && kl_rowok(kl_r0 + kl_t))
        kl_qok = kl_qadr((kl_r0 + kl_t) * kl_len) == kl_qadr((kl_r0 + kl_t) * kl_len + kl_len - 1);
    kl_qok = __syncthreads_and(kl_qok);
"""


def _key_adr(r: str, j: str) -> str:
    return f"kl_kadr({r} * kl_len + {j})"


def _term_adr(r: str, c: str, j: str) -> str:
    return f"kl_vadr({r} * kl_dv{' + ' + c if c != '0' else ''}, {j})"


def same_tile(
    br: int = BR,
    key: Callable[[str, str], str] = _key_adr,
    term: Callable[[str, str, str], str] = _term_adr,
) -> str:
    """Each of the block's `br` rows: whether it reads the key and term tile the block's first row
    reads (first and last key, first and last column), into `kl_uni`; `key(row, key)` and
    `term(row, column, key)` give the addresses."""
    k, v = key, term
    return f"""        if (kl_t < {br} && kl_rowok(kl_r0 + kl_t)) {{
            const long long kl_r = kl_r0 + kl_t;
            kl_uni = {k("kl_r", "kl_j0")} == {k("kl_r0", "kl_j0")} &&
                     {k("kl_r", "kl_jl")} == {k("kl_r0", "kl_jl")} &&
                     {v("kl_r", "0", "kl_j0")} == {v("kl_r0", "0", "kl_j0")} &&
                     {v("kl_r", "kl_dv - 1", "kl_jl")} == {v("kl_r0", "kl_dv - 1", "kl_jl")};
        }}
"""


def tile_mask() -> str:
    """Per key tile: which (row, key) scores the producer leaves unmasked (`kl_ps` 0 or -inf), and
    whether the block's rows read one key and term tile (`kl_uni`); masked-out tiles are skipped."""
    return f"""        const long long kl_jl = min(kl_j0 + {BK - 1}, kl_len - 1);
        int kl_live = 0, kl_uni = 1;
        for (int kl_e = kl_t; kl_e < {BR * BK}; kl_e += {THREADS}) {{
            const long long kl_r = kl_r0 + kl_e / {BK}, kl_j = kl_j0 + kl_e % {BK}, kl_x = kl_r * kl_len + kl_j;
            const bool kl_on = kl_j < kl_len && kl_rowok(kl_r) &&
                               !(kl_val(kl_x, 0.0f) == -INFINITY && kl_val(kl_x, 1.0f) == -INFINITY);
            kl_ps[(kl_e / {BK}) * {BK + 1} + kl_e % {BK}] = kl_on ? 0.0f : -INFINITY;
            kl_live |= kl_on;
        }}
{same_tile()}        kl_live = __syncthreads_or(kl_live);
        kl_uni = __syncthreads_and(kl_uni);
        if (!kl_live) continue;
"""


def score_loop_head() -> str:
    """Opens the loop over a tile's (row, key) scores that the mask left live (`kl_s`), with the
    scratch index of each (`kl_x`): the score itself is the emitter's (SIMT dot, or a tensor-core
    product staged in shared memory)."""
    return f"""        for (int kl_e = kl_t; kl_e < {BR * BK}; kl_e += {THREADS}) {{
            const int kl_rr = kl_e / {BK}, kl_jj = kl_e % {BK};
            float* kl_s = &kl_ps[kl_rr * {BK + 1} + kl_jj];
            if (*kl_s == -INFINITY) continue;
            const long long kl_x = (kl_r0 + kl_rr) * kl_len + kl_j0 + kl_jj;
"""


def online_softmax(e: str, extra: str) -> str:
    """A warp per row turns the tile's scores into weights against the running max and sum;
    `extra` (statements over `kl_rr`, `kl_lane`, `kl_p`) also stores each weight elsewhere."""
    return f"""        for (int kl_rr = kl_warp; kl_rr < {BR}; kl_rr += {THREADS // 32}) {{
            const float kl_s = kl_ps[kl_rr * {BK + 1} + kl_lane];
            float kl_mt = kl_s;
            for (int kl_o = 16; kl_o > 0; kl_o >>= 1) kl_mt = fmaxf(kl_mt, __shfl_xor_sync(0xffffffffu, kl_mt, kl_o));
            const float kl_mo = kl_m[kl_rr], kl_mn = fmaxf(kl_mo, kl_mt);
            const float kl_p = kl_s == -INFINITY ? 0.0f : {e}(kl_s - kl_mn);
            float kl_sum = kl_p;
            for (int kl_o = 16; kl_o > 0; kl_o >>= 1) kl_sum += __shfl_xor_sync(0xffffffffu, kl_sum, kl_o);
            kl_ps[kl_rr * {BK + 1} + kl_lane] = kl_p;
{extra}            __syncwarp();
            if (kl_lane == 0) {{
                const float kl_a = kl_mn == -INFINITY ? 1.0f : {e}(kl_mo - kl_mn);
                kl_al[kl_rr] = kl_a;
                kl_l[kl_rr] = kl_l[kl_rr] * kl_a + kl_sum;
                kl_m[kl_rr] = kl_mn;
            }}
        }}
"""


def kernel(tp: ThreePhase, name: str, params: str) -> str:
    """The fused kernel's text."""
    p, c, s = tp.producer, tp.consumer, tp.softmax
    e = s.exp
    return f"""__global__ void {name}({params}) {{
    extern __shared__ float kl_smem[];
{lambdas(tp)}    const int kl_dq = (int)({p.extent});
    const int kl_dv = (int)({c.columns});
    const long long kl_len = (long long)({tp.length});
    const long long kl_r0 = (long long)blockIdx.x * {BR};
    float* kl_qs = kl_smem;
    float* kl_ks = kl_qs + {BR} * kl_dq;
    float* kl_vs = kl_ks + {BK} * (kl_dq + 1);
    float* kl_ps = kl_vs + {BK} * kl_dv;
    float* kl_os = kl_ps + {BR} * {BK + 1};
    float* kl_m = kl_os + {BR} * kl_dv;
    float* kl_l = kl_m + {BR};
    float* kl_al = kl_l + {BR};
{row_state(f"{BR} * kl_dv")}    if (kl_qok)
        for (int kl_e = kl_t; kl_e < {BR} * kl_dq; kl_e += {THREADS}) {{
            const long long kl_r = kl_r0 + kl_e / kl_dq;
            kl_qs[kl_e] = kl_rowok(kl_r) ? kl_qry(kl_r * kl_len, kl_e % kl_dq) : 0.0f;
        }}
    for (long long kl_j0 = 0; kl_j0 < kl_len; kl_j0 += {BK}) {{
{tile_mask()}        if (kl_uni) {{
            for (int kl_e = kl_t; kl_e < {BK} * kl_dq; kl_e += {THREADS}) {{
                const long long kl_j = kl_j0 + kl_e / kl_dq;
                kl_ks[(kl_e / kl_dq) * (kl_dq + 1) + kl_e % kl_dq] =
                    kl_j < kl_len ? kl_key(kl_r0 * kl_len + kl_j, kl_e % kl_dq) : 0.0f;
            }}
            for (int kl_e = kl_t; kl_e < {BK} * kl_dv; kl_e += {THREADS}) {{
                const long long kl_j = kl_j0 + kl_e / kl_dv;
                kl_vs[kl_e] = kl_j < kl_len ? kl_term(kl_r0 * kl_dv + kl_e % kl_dv, kl_j) : 0.0f;
            }}
        }}
        __syncthreads();
{score_loop_head()}            if (kl_uni && kl_qok) {{
                float kl_a = 0.0f;
                for (int kl_d = 0; kl_d < kl_dq; ++kl_d) kl_a += kl_qs[kl_rr * kl_dq + kl_d] * kl_ks[kl_jj * (kl_dq + 1) + kl_d];
                *kl_s = kl_val(kl_x, kl_a);
            }} else {{
                *kl_s = kl_direct(kl_x);
            }}
        }}
        __syncthreads();
{online_softmax(e, "")}        __syncthreads();
        for (int kl_e = kl_t; kl_e < {BR} * kl_dv; kl_e += {THREADS}) {{
            const int kl_rr = kl_e / kl_dv, kl_c = kl_e % kl_dv;
            const float* kl_w = &kl_ps[kl_rr * {BK + 1}];
            float kl_a = kl_os[kl_e] * kl_al[kl_rr];
            if (kl_uni) {{
                for (int kl_jj = 0; kl_jj < {BK}; ++kl_jj) kl_a += kl_w[kl_jj] * kl_vs[kl_jj * kl_dv + kl_c];
            }} else {{
                for (int kl_jj = 0; kl_jj < {BK} && kl_j0 + kl_jj < kl_len; ++kl_jj)
                    if (kl_w[kl_jj] != 0.0f) kl_a += kl_w[kl_jj] * kl_term((kl_r0 + kl_rr) * kl_dv + kl_c, kl_j0 + kl_jj);
            }}
            kl_os[kl_e] = kl_a;
        }}
        __syncthreads();
    }}
    for (int kl_e = kl_t; kl_e < {BR} * kl_dv; kl_e += {THREADS}) {{
        const long long kl_r = kl_r0 + kl_e / kl_dv;
        if (kl_rowok(kl_r)) kl_out(kl_r * kl_dv + kl_e % kl_dv, kl_os[kl_e] / kl_l[kl_e / kl_dv]);
    }}
}}
"""


def smem(dq_host: str, dv_host: str) -> str:
    """The fp32 kernel's dynamic shared memory in bytes (launcher side)."""
    return f"(size_t){smem_floats(T.paren(dq_host), T.paren(dv_host))} * sizeof(float)"


def launch(
    tp: ThreePhase, name: str, args: str, smem: str, stream: str, br: int = BR, threads: int = THREADS
) -> str:
    """The launcher's statements that replace the three launches (`smem`: bytes, launcher side;
    a block of `threads` threads per `br` query rows)."""
    rows = T.paren(tp.rows_host)
    return (
        f"{{\n        const size_t kl_smem = {smem};\n"
        f"        cudaFuncSetAttribute({name}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kl_smem);\n"
        f"        {name}<<<(unsigned)(({rows} + {br - 1}) / {br}), {threads}, kl_smem{', ' + stream if stream else ''}>>>({args});\n"
        "    }"
    )
