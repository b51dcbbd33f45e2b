"""Hopper warpgroup MMAs: `wgmma.mma_async` back to per-warp `mma.sync`.

A wgmma (sm_90a) multiplies a 64 x N x 16 product for a warpgroup (four consecutive warps),
asynchronously, reading B (and A, in the SS form) from shared memory through 64-bit matrix
descriptors: start address, leading and stride byte offsets, a swizzle mode. Its accumulator
fragment is, warp by warp, exactly mma.sync m16n8k16's: warp w of the group holds rows
16 w .. 16 w + 15, and for each 8 columns j a thread holds (g, 8j + 2t), (g, 8j + 2t + 1),
(g + 8, 8j + 2t), (g + 8, 8j + 2t + 1) with g = lane / 4, t = lane % 4. The register form (RS)
takes A as mma.sync's A fragment of the warp's rows.

Removal (one site per file, since fences, commits and waits only mean something together with every
MMA) rewrites each `wgmma.mma_async` asm statement into a call of `kl_wgmma_sync`, inserted once
after the includes: each warp does its 16 rows now with N / 8 mma.sync m16n8k16, gathering the
operands from shared memory through the same descriptors (any of the four swizzle modes, K-major
operands; MN-major operands with a swizzle). `wgmma.fence`, `commit_group` and `wait_group` go, and so do `fence.proxy.async` statements when no bulk copy
(the other async-proxy reader) is left in the file.
That keeps the function for the reason an async copy made synchronous does: an asynchronous MMA may
read its operands and write its accumulators any time between issue and wait, so code that is
correct with it is correct when it happens at issue. The scale-d predicate (`setp.ne.b32 p, %k, 0`
in the same asm, the common idiom), the operand negations and the transposes are carried over.

f16 accumulators (f16 inputs) go to mma.sync's f16-accumulator form, two registers of two halves
per 8 columns. Refused, with the reason: an asm block with other instructions beside the wgmma,
input types other than f16/bf16 (tf32, fp8: k8/k32 shapes this reading does not know), a wgmma
form it does not know. At run time the helper traps on a descriptor with
a base offset or an MN-major operand without swizzle (layouts not modelled), so a gate fails the
step rather than computing something else.

The forward step (mma.sync -> wgmma) needs the operands laid out in shared memory in a canonical
wgmma layout and the block regrouped into warpgroups: no mechanical `apply`; an LLM provider must
write it.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Site
from klineage.source import edit
from klineage.source.model import CudaSource

#: the asynchronous MMA: shape, accumulator and input types, then the operand list
MMA = re.compile(
    r"wgmma\.mma_async\.sync\.aligned\.m64n(?P<n>\d+)k16\.(?P<acc>f32|f16)\.(?P<ta>bf16|f16)\.(?P<tb>bf16|f16)"
    r"\s+\{(?P<d>[^}]*)\}\s*,\s*(?P<a>\{[^}]*\}|%\d+)\s*,\s*(?P<b>%\d+)\s*,\s*(?P<rest>[^;]*);"
)
#: fences, commits and waits of the asynchronous MMAs
SYNC = re.compile(r"^\s*wgmma\.(?:fence|commit_group|wait_group)\.sync\.aligned(?:\s+(?:%\d+|\d+))?\s*;?\s*$")
#: the scale-d predicate's idiom: `setp.ne.b32 p, %k, 0;` (or .s32/.u32)
SETP = re.compile(r"setp\.ne\.[bsu]32\s+(?P<p>\w+)\s*,\s*%(?P<k>\d+)\s*,\s*0\s*;")
#: what else an asm block holding one wgmma may say: braces, its predicate's declaration
ALLOWED = re.compile(r"^\s*(?:\{|\}|\.reg\s+\.pred\s+\w+\s*;)\s*$")

HELPER = r"""
// KLineage wgmma (see deopt/wgmma.py): one warpgroup MMA m64nNk16 done now, warp by warp, with
// mma.sync m16n8k16; shared-memory operands are read through the wgmma matrix descriptors.
#include <stdint.h>
extern __shared__ __align__(16) unsigned char kl_wgmma_dynamic[];
// Element (mn, k) of an operand (mn along M or N, k along K): 16 bits of shared memory.
__device__ __forceinline__ uint32_t kl_wgmma_elem(uint64_t desc, int mn, int k, int mn_major) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4;
    const uint32_t lead = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
    const uint32_t stride = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    const int mode = (int)(desc >> 62);  // 0: no swizzle, 1: 128-byte, 2: 64-byte, 3: 32-byte
    if ((desc >> 49) & 7) __trap();      // a base offset: not modelled
    uint32_t a;
    if (mode == 0) {                     // 8 x 16-byte core matrices: SBO along M/N, LBO along K
        if (mn_major) __trap();          // MN-major without swizzle: not modelled
        a = start + (mn / 8) * stride + (k / 8) * lead + (mn % 8) * 16 + (k % 8) * 2;
    } else {                             // swizzle atoms of 8 rows x `row` bytes
        const uint32_t row = 256u >> mode;
        const int outer = mn_major ? k : mn, inner = mn_major ? mn : k;
        a = start + (outer / 8) * stride + (outer % 8) * row + (inner * 2) % row + (inner * 2) / row * lead;
        a ^= ((a >> 7) & (row / 16 - 1)) << 4;
    }
#ifdef KLEMU  // the emulator numbers shared regions above bit 24 and a descriptor keeps 18 bits:
              // there the operands must lie in dynamic shared memory (as a Hopper kernel's do)
    const size_t window = __cvta_generic_to_shared(kl_wgmma_dynamic) & ~(size_t)0x3FFFF;
#else
    const size_t window = 0;
#endif
    return *reinterpret_cast<const uint16_t*>(__cvta_shared_to_generic(window | a));
}
// This warp's A fragment (mma.sync m16n8k16's, rows 16 w .. 16 w + 15) and B fragment of columns
// 8 j .. 8 j + 7: from the registers (RS form) or through the descriptors; negated on request.
__device__ __forceinline__ void kl_wgmma_frag_a(uint32_t (&a)[4], uint64_t desc_a, const uint32_t* regs_a,
                                               int trans_a, int scale_a) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, rows = ((threadIdx.x / 32) % 4) * 16;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = rows + g + (i % 2) * 8, k = 2 * t + (i / 2) * 8;
        a[i] = (regs_a ? regs_a[i]
                       : kl_wgmma_elem(desc_a, m, k, trans_a) | (kl_wgmma_elem(desc_a, m, k + 1, trans_a) << 16)) ^
               (scale_a < 0 ? 0x80008000u : 0u);
    }
}
__device__ __forceinline__ void kl_wgmma_frag_b(uint32_t (&b)[2], uint64_t desc_b, int j, int trans_b, int scale_b) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int n = 8 * j + g, k = 2 * t + i * 8;
        b[i] = (kl_wgmma_elem(desc_b, n, k, trans_b) | (kl_wgmma_elem(desc_b, n, k + 1, trans_b) << 16)) ^
               (scale_b < 0 ? 0x80008000u : 0u);
    }
}
// f32 accumulators: kN / 2 floats a thread, four per 8 columns.
template <int kN, bool kBf16>
__device__ __forceinline__ void kl_wgmma_sync(float* d, uint64_t desc_a, const uint32_t* regs_a, uint64_t desc_b,
                                              bool scale_d, int scale_a, int scale_b, int trans_a, int trans_b) {
    if (!scale_d) {
#pragma unroll
        for (int i = 0; i < kN / 2; ++i) d[i] = 0.f;
    }
    uint32_t a[4];
    kl_wgmma_frag_a(a, desc_a, regs_a, trans_a, scale_a);
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
        uint32_t b[2];
        kl_wgmma_frag_b(b, desc_b, j, trans_b, scale_b);
        float* c = d + 4 * j;
        if (kBf16)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                         "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                         : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        else
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                         "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                         : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}
// f16 accumulators (f16 inputs): kN / 4 registers a thread of two halves, two per 8 columns.
template <int kN>
__device__ __forceinline__ void kl_wgmma_sync_f16(uint32_t* d, uint64_t desc_a, const uint32_t* regs_a,
                                                  uint64_t desc_b, bool scale_d, int scale_a, int scale_b,
                                                  int trans_a, int trans_b) {
    if (!scale_d) {
#pragma unroll
        for (int i = 0; i < kN / 4; ++i) d[i] = 0u;
    }
    uint32_t a[4];
    kl_wgmma_frag_a(a, desc_a, regs_a, trans_a, scale_a);
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
        uint32_t b[2];
        kl_wgmma_frag_b(b, desc_b, j, trans_b, scale_b);
        uint32_t* c = d + 2 * j;
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, "
                     "{%0, %1};\n"
                     : "+r"(c[0]), "+r"(c[1])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}
"""


_Mma = X.AsmRewrite  # a wgmma statement and its call of the helper


def _value(ops: list[X.AsmOperand], token: str) -> str | None:
    """An immediate of the instruction: a literal, or an `n`-constrained operand's expression."""
    token = token.strip()
    if re.fullmatch(r"-?\d+", token):
        return token
    op = X.asm_operand(ops, token)
    return f"({op.expr})" if op is not None and op.constraint == "n" else None


def _accumulators(exprs: list[str], ctype: str) -> tuple[str, str, str]:
    """(pointer to pass, copy-in, copy-out) for the accumulator expressions: `&d[0]` when they are
    d[0], d[1], ... of one array, else a local copy."""
    m = [re.fullmatch(r"(.+?)\s*\[\s*(\d+)\s*\]", e.strip()) for e in exprs]
    if all(x is not None for x in m) and len({x.group(1) for x in m if x}) == 1:
        if [int(x.group(2)) for x in m if x] == list(range(len(exprs))):
            return f"&({m[0].group(1)})[0]", "", ""  # type: ignore[union-attr]
    n = len(exprs)
    copy_in = f"{ctype} kl_wg_d[{n}] = {{{', '.join(exprs)}}};\n"
    copy_out = "".join(f"{e} = kl_wg_d[{i}]; " for i, e in enumerate(exprs))
    return "kl_wg_d", copy_in, copy_out


def _mma(src: CudaSource, asm: ts.Node, body: str) -> _Mma:
    stmt = X.asm_statement(asm)
    m = MMA.search(body)
    assert m is not None
    others = [
        line
        for line in (body[: m.start()] + body[m.end() :]).split("\n")
        if line.strip() and not ALLOWED.match(line) and not SETP.search(line)
    ]
    if others:
        return _Mma(stmt, "", f"other instructions beside the wgmma: `{others[0].strip()[:40]}`")
    if m.group("ta") != m.group("tb"):
        return _Mma(stmt, "", "mixed input types")
    half_acc = m.group("acc") == "f16"
    if half_acc and m.group("ta") != "f16":
        return _Mma(stmt, "", "f16 accumulators with bf16 inputs")
    n = int(m.group("n"))
    regs = n // 4 if half_acc else n // 2  # accumulator registers a thread
    ops = X.asm_operands(src, asm)
    d = [X.asm_operand(ops, t) for t in m.group("d").split(",")]
    if len(d) != regs or any(o is None or not o.constraint.startswith("+") for o in d):
        return _Mma(stmt, "", f"the accumulator list is not {regs} read-write operands")
    rest = [t.strip() for t in m.group("rest").split(",")]
    regs_form = m.group("a").startswith("{")
    if len(rest) != (4 if regs_form else 5):
        return _Mma(
            stmt,
            "",
            f"{len(rest)} operands after B (the {'RS' if regs_form else 'SS'} form has {4 if regs_form else 5})",
        )
    scale = rest[0]
    setp = next((s for s in SETP.finditer(body) if s.group("p") == scale), None)
    if setp is not None and (op := X.asm_operand(ops, "%" + setp.group("k"))) is not None:
        scale_d = f"({op.expr}) != 0"
    elif scale in ("0", "1"):
        scale_d = "true" if scale == "1" else "false"
    else:
        return _Mma(stmt, "", f"scale-d `{scale}` is not set by `setp.ne.b32 {scale}, %k, 0` in the block")
    imms = [_value(ops, t) for t in rest[1:]]
    if any(v is None for v in imms):
        return _Mma(stmt, "", "an immediate operand is not a literal or an `n` operand")
    scale_a, scale_b = imms[0], imms[1]
    trans_a, trans_b = ("0", imms[2]) if regs_form else (imms[2], imms[3])
    b = X.asm_operand(ops, m.group("b"))
    if b is None:
        return _Mma(stmt, "", "descriptor B is not an operand")
    if regs_form:
        regs = [X.asm_operand(ops, t) for t in m.group("a").strip("{}").split(",")]
        if len(regs) != 4 or any(r is None for r in regs):
            return _Mma(stmt, "", "the A registers are not four operands")
        a_desc = "0"
        a_regs = "kl_wg_a"
        pre = f"const uint32_t kl_wg_a[4] = {{{', '.join(f'(uint32_t)({r.expr})' for r in regs if r)}}};\n"
    else:
        a_op = X.asm_operand(ops, m.group("a"))
        if a_op is None:
            return _Mma(stmt, "", "descriptor A is not an operand")
        a_desc, a_regs, pre = f"({a_op.expr})", "nullptr", ""
    ptr, copy_in, copy_out = _accumulators([o.expr for o in d if o], "uint32_t" if half_acc else "float")
    bf16 = "true" if m.group("ta") == "bf16" else "false"
    fn = f"kl_wgmma_sync_f16<{n}>" if half_acc else f"kl_wgmma_sync<{n}, {bf16}>"
    call = (
        f"{{ {pre}{copy_in}{fn}({ptr}, {a_desc}, {a_regs}, ({b.expr}), {scale_d}, "
        f"{scale_a}, {scale_b}, {trans_a}, {trans_b}); {copy_out}}}"
    )
    return _Mma(stmt, call)


def _sites(src: CudaSource) -> tuple[list[_Mma], list[ts.Node], list[str]]:
    """(the MMAs, the fence/commit/wait statements, other wgmma asm it does not know) of the file."""
    mmas: list[_Mma] = []
    syncs: list[ts.Node] = []
    unknown: list[str] = []
    for fn in X.code_functions(src):
        for asm in (n for n in X.walk(fn) if n.type == "gnu_asm_expression"):
            body = X.asm_template(src, asm)
            if "wgmma" not in body:
                continue
            if MMA.search(body):
                mmas.append(_mma(src, asm, body))
            elif SYNC.match(body):
                syncs.append(X.asm_statement(asm))
            else:
                unknown.append(f"line {asm.start_point.row + 1}: `{body.strip()[:50]}`")
    return mmas, syncs, unknown


class Wgmma(Operator):
    name = "wgmma"
    category = "specialized_instruction"
    intent = (
        "Multiply with Hopper's asynchronous warpgroup MMAs (wgmma.mma_async m64nNk16), operands read "
        "from swizzled shared memory through matrix descriptors, instead of per-warp mma.sync fed by "
        "register fragments; fences, commit groups and waits keep the next loads in flight."
    )

    def find(self, src: CudaSource) -> list[Site]:
        mmas, syncs, unknown = _sites(src)
        if not mmas and not syncs and not unknown:
            return []
        fns = X.code_functions(src)
        first = min((m.stmt for m in mmas), key=lambda s: s.start_byte, default=None) or fns[0]
        refused = [f"line {m.stmt.start_point.row + 1}: {m.why}" for m in mmas if m.why]
        return [
            self.site(
                src,
                first,
                f"{len(mmas)} wgmma MMA(s), {len(syncs)} fence/commit/wait(s)",
                mmas=str(len(mmas)),
                refused=" | ".join(refused + unknown),
            )
        ]

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        mmas, _, unknown = _sites(src)
        refused = [f"line {m.stmt.start_point.row + 1}: {m.why}" for m in mmas if m.why] + unknown
        return [
            Precondition(
                "known_wgmma_forms",
                not refused,
                "every wgmma is an f32-accumulating m64nNk16 (SS or RS) with its scale-d set in its block"
                if not refused
                else "; ".join(refused),
                "Hardware",
            ),
            Precondition("has_mma", bool(mmas), "a wgmma.mma_async to rewrite", "Hardware"),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        mmas, syncs, _ = _sites(src)
        edits = [edit.replace(m.stmt, m.text) for m in mmas]
        edits += [edit.delete(src, s) for s in syncs]
        if "cp.async.bulk" not in src.text:  # no async-proxy reader is left: its fences go too
            edits += [edit.delete(src, s) for s in X.async_proxy_fences(src)]
        if "kl_wgmma_sync" not in src.text:
            pos = X.after_includes(src)
            edits.append(edit.Edit(pos, pos, HELPER))
        return edit.apply_edits(src, edits)
