"""Hopper's inline PTX on the emulator: each instruction becomes a call of the runtime
(gates/emu/runtime/src/klemu_hopper.cpp, declared in include/klemu/hopper.h).

  mbarrier.init / arrive (count, expect_tx) / expect_tx / complete_tx / try_wait / test_wait (parity or state
  token) / inval; bar.sync / bar.arrive / barrier.sync / barrier.arrive (named barriers);
  barrier.cluster.arrive / wait, mapa, elect.sync (a launch is a cluster of one block);
  wgmma.mma_async m64nNk16 (f16/bf16 inputs, f32 or f16 accumulators, SS and RS forms), and its
  fence / commit_group / wait_group; cp.async.bulk.tensor 1-5-D tiled loads (multicast included)
  and stores, cp.async.bulk loads and stores, their commit and wait groups;
  fences, setmaxnreg, prefetches and griddepcontrol (no effect on the emulator: its threads are
  cooperative fibers and its launches run one after another).

Forms outside these (im2col, reductions, tf32/fp8/int8 wgmma, distributed shared memory stores)
stay `unsupported`, naming the instruction and line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # ptx.py imports this module and hands each statement's Asm to `translate`
    from klineage.gates.emu.ptx import Asm

#: first-mnemonic prefixes handled here (registered in unsupported.ASM_HANDLERS by ptx.py)
PREFIXES = (
    "mbarrier.",
    "fence.",
    "setmaxnreg.",
    "wgmma.",
    "cp.async.bulk.",
    "prefetch.",
    "bar.sync",
    "bar.arrive",
    "bar.cta.",
    "barrier.sync",
    "barrier.arrive",
    "barrier.cta.",
    "barrier.cluster.",
    "mapa.",
    "elect.sync",
    "griddepcontrol.",
    "mov.",
    "setp.",
    "selp.",
)
#: instructions that wait or rendezvous (a kernel using them runs its threads as fibers)
WAITING_PREFIXES = ("mbarrier.", "bar.", "barrier.", "wgmma.mma_async", "elect.sync")

_WGMMA = re.compile(
    r"wgmma\.mma_async\.sync\.aligned\.m64n(?P<n>\d+)k16\.(?P<acc>f32|f16)\.(?P<ta>bf16|f16)\.(?P<tb>bf16|f16)"
)
_TENSOR_LOAD = re.compile(
    r"cp\.async\.bulk\.tensor\.(?P<rank>[1-5])d\.shared::(?:cluster|cta)\.global(?:\.tile)?"
    r"\.mbarrier::complete_tx::bytes(?P<mc>\.multicast::cluster)?(?P<hint>\.L2::cache_hint)?"
)
_TENSOR_STORE = re.compile(
    r"cp\.async\.bulk\.tensor\.(?P<rank>[1-5])d\.global\.shared::cta(?:\.tile)?\.bulk_group(?P<hint>\.L2::cache_hint)?"
)
_BULK_LOAD = re.compile(
    r"cp\.async\.bulk\.shared::(?:cluster|cta)\.global\.mbarrier::complete_tx::bytes(?P<hint>\.L2::cache_hint)?"
)
_BULK_STORE = re.compile(r"cp\.async\.bulk\.global\.shared::cta\.bulk_group(?P<hint>\.L2::cache_hint)?")
#: instructions without an effect here
_NO_EFFECT = re.compile(
    r"fence\..*|wgmma\.fence\.sync\.aligned|cp\.async\.bulk\.(commit_group|wait_group(\.read)?)"
    r"|cp\.async\.bulk\.prefetch\..*|prefetch\..*|griddepcontrol\.(wait|launch_dependents)"
)


def _shared(asm: Asm, tok: str, stmt: str) -> str:
    """A shared address operand `[x]`: a 32-bit shared address, or a generic pointer (64 bits)."""
    return f"::klemu::as_shared((uint64_t){asm.addr(tok, stmt)}, {asm.line})"


def _pred_or_sink(asm: Asm, tok: str) -> str | None:
    """The C++ lvalue of a predicate destination, or None for the sink `_`."""
    tok = tok.strip()
    if tok == "_":
        return None
    if tok not in asm.temps:
        raise asm.unsupported(tok)
    return asm.temp(tok)


def _assign(asm: Asm, tok: str, expr: str, stmt: str) -> str:
    """`dst = expr;` for a register destination, or the bare call for the sink `_`."""
    if tok.strip() == "_":
        return f"(void){expr};"
    return f"{asm.val(tok, stmt)} = {expr};"


def _mbarrier(asm: Asm, mn: str, ops: list[str], s: str) -> str | None:
    L = asm.line
    if re.fullmatch(r"mbarrier\.init(\.shared(::cta)?)?\.b64", mn) and len(ops) == 2:
        return f"::klemu::mbar_init({_shared(asm, ops[0], s)}, (uint32_t){asm.val(ops[1], s)}, {L});"
    if re.fullmatch(r"mbarrier\.inval(\.shared(::cta)?)?\.b64", mn) and len(ops) == 1:
        return f"::klemu::mbar_inval({_shared(asm, ops[0], s)}, {L});"
    arrive = re.fullmatch(
        r"mbarrier\.arrive(?P<tx>\.expect_tx)?(\.release)?(\.cta|\.cluster)?(\.shared(::cta|::cluster)?)?\.b64",
        mn,
    )
    if arrive and len(ops) in (2, 3):
        bar = _shared(asm, ops[1], s)
        if arrive.group("tx"):
            if len(ops) != 3:
                raise asm.unsupported(s)
            pre = f"::klemu::mbar_expect_tx({bar}, (uint32_t){asm.val(ops[2], s)}, {L}); "
            count = "1"
        else:
            pre, count = "", f"(uint32_t){asm.val(ops[2], s)}" if len(ops) == 3 else "1"
        return pre + _assign(asm, ops[0], f"::klemu::mbar_arrive({bar}, {count}, {L})", s)
    if (
        re.fullmatch(
            r"mbarrier\.expect_tx(\.relaxed)?(\.cta|\.cluster)?(\.shared(::cta|::cluster)?)?\.b64", mn
        )
        and len(ops) == 2
    ):
        return f"::klemu::mbar_expect_tx({_shared(asm, ops[0], s)}, (uint32_t){asm.val(ops[1], s)}, {L});"
    if (
        re.fullmatch(
            r"mbarrier\.complete_tx(\.relaxed)?(\.cta|\.cluster)?(\.shared(::cta|::cluster)?)?\.b64", mn
        )
        and len(ops) == 2
    ):
        return f"::klemu::mbar_complete_tx({_shared(asm, ops[0], s)}, (uint32_t){asm.val(ops[1], s)}, {L});"
    wait = re.fullmatch(
        r"mbarrier\.(?P<kind>try_wait|test_wait)(?P<parity>\.parity)?(\.acquire|\.relaxed)?(\.cta|\.cluster)?"
        r"(\.shared(::cta)?)?\.b64",
        mn,
    )
    if wait and len(ops) in (3, 4):
        dst = _pred_or_sink(asm, ops[0])
        block = 1 if wait.group("kind") == "try_wait" else 0
        fn = "mbar_wait_parity" if wait.group("parity") else "mbar_wait_token"
        call = f"::klemu::{fn}({_shared(asm, ops[1], s)}, {asm.val(ops[2], s)}, {block}, {L})"
        return f"{dst} = {call};" if dst else f"(void){call};"
    return None


def _barriers(asm: Asm, mn: str, ops: list[str], s: str) -> str | None:
    L = asm.line
    named = re.fullmatch(r"(bar|barrier)(\.cta)?\.(sync|arrive)(\.aligned)?", mn)
    if named and len(ops) in (1, 2):
        count = f"(uint32_t){asm.val(ops[1], s)}" if len(ops) == 2 else "0u"
        wait = 1 if named.group(3) == "sync" else 0
        if wait and len(ops) == 1 and ops[0].strip() == "0":  # barrier 0 of the whole block: __syncthreads
            return f'::klemu::barrier(0, 0, {L}, "bar.sync 0");'

        if not wait and len(ops) != 2:
            raise asm.unsupported(s)  # bar.arrive needs its thread count
        return f"::klemu::bar_named((uint32_t){asm.val(ops[0], s)}, {count}, {wait}, {L});"
    if re.fullmatch(r"barrier\.cluster\.arrive(\.release|\.relaxed)?(\.aligned)?", mn) and not ops:
        return f"::klemu::cluster_arrive({L});"
    if re.fullmatch(r"barrier\.cluster\.wait(\.acquire)?(\.aligned)?", mn) and not ops:
        return f"::klemu::cluster_wait({L});"
    if re.fullmatch(r"mapa(\.shared::cluster)?\.u(32|64)", mn) and len(ops) == 3:
        addr = asm.val(ops[1], s)
        if ".shared::cluster" not in mn:  # a generic address: the same block's
            return f"{asm.val(ops[0], s)} = ::klemu::mapa((uint64_t){addr}, (uint32_t){asm.val(ops[2], s)}, {L});"
        return (
            f"{asm.val(ops[0], s)} = ::klemu::mapa(::klemu::as_shared((uint64_t){addr}, {L}), "
            f"(uint32_t){asm.val(ops[2], s)}, {L});"
        )
    if mn == "elect.sync" and len(ops) == 2 and "|" in ops[0]:
        reg, pred = (t.strip() for t in ops[0].split("|", 1))
        p = _pred_or_sink(asm, pred)
        out = [
            f"{{ uint32_t _lead = 0; int _won = ::klemu::elect((uint32_t){asm.val(ops[1], s)}, &_lead, {L});"
        ]
        if reg != "_":
            out.append(f"{asm.val(reg, s)} = _lead;")
        out.append(f"{p} = _won; }}" if p else "(void)_won; }")
        return " ".join(out)
    return None


def _wgmma(asm: Asm, mn: str, ops: list[str], s: str) -> str | None:
    m = _WGMMA.fullmatch(mn)
    if not m:
        return None
    n, f32 = int(m.group("n")), m.group("acc") == "f32"
    if m.group("ta") != m.group("tb") or n % 8 or not 8 <= n <= 256 or (not f32 and m.group("ta") != "f16"):
        raise asm.unsupported(s)
    regs_a = ops[1].startswith("{") if len(ops) > 1 else False
    if len(ops) != (7 if regs_a else 8):
        raise asm.unsupported(s)
    d = asm.vec(ops[0], s, n // 2 if f32 else n // 4)
    a = asm.vec(ops[1], s, 4) if regs_a else []
    desc_a = "0" if regs_a else asm.val(ops[1], s)
    scale_d = ops[3].strip()
    scale = asm.temp(scale_d) if scale_d in asm.temps else asm.val(scale_d, s)
    imms = [asm.val(t, s) for t in ops[4:]]
    neg_a, neg_b = (f"((int64_t){x} < 0)" for x in imms[:2])
    trans_a, trans_b = ("0", imms[2]) if regs_a else (imms[2], imms[3])
    kind = (1 if m.group("ta") == "bf16" else 0) | (2 if f32 else 0) | (4 if regs_a else 0)
    regs = d + a
    load = " ".join(f"_w[{i}] = {x};" for i, x in enumerate(regs))
    back = " ".join(f"{x} = _w[{i}];" for i, x in enumerate(d))
    return (
        f"{{ uint64_t _w[{len(regs)}]; {load} ::klemu::wgmma({kind}, {n}, _w, 0, {len(d)}, (uint64_t){desc_a}, "
        f"(uint64_t){asm.val(ops[2], s)}, (int)({scale} != 0), {neg_a}, {neg_b}, (int){trans_a}, (int){trans_b}, "
        f"{asm.line}); {back} }}"
    )


def _tensor_operand(asm: Asm, tok: str, rank: int, stmt: str) -> tuple[str, list[str]]:
    """`[map, {c0, c1, ...}]`: the tensor map's address and the coordinates."""
    tok = tok.strip()
    if not (tok.startswith("[") and tok.endswith("]")):
        raise asm.unsupported(stmt)
    parts = [p.strip() for p in re.split(r",(?![^{]*})", tok[1:-1], maxsplit=1)]
    if len(parts) != 2:
        raise asm.unsupported(stmt)
    return asm.val(parts[0], stmt), asm.vec(parts[1], stmt, rank)


def _coords(coords: list[str]) -> str:
    """The C++ array `_c` of a bulk tensor copy's coordinates (innermost first)."""
    return f"int32_t _c[{len(coords)}] = {{{', '.join(f'(int32_t){c}' for c in coords)}}};"


def _bulk(asm: Asm, mn: str, ops: list[str], s: str) -> str | None:
    L = asm.line
    m = _TENSOR_LOAD.fullmatch(mn)
    if m:
        rank = int(m.group("rank"))
        want = 3 + (1 if m.group("mc") else 0) + (1 if m.group("hint") else 0)
        if len(ops) != want:
            raise asm.unsupported(s)
        tmap, coords = _tensor_operand(asm, ops[1], rank, s)
        mask = f"(uint32_t){asm.val(ops[3], s)}" if m.group("mc") else "~0u"
        return (
            f"{{ {_coords(coords)} ::klemu::tma_load("
            f"{_shared(asm, ops[0], s)}, (const void*)(uintptr_t){tmap}, _c, {rank}, {_shared(asm, ops[2], s)}, "
            f"{mask}, {L}); }}"
        )
    m = _TENSOR_STORE.fullmatch(mn)
    if m:
        rank = int(m.group("rank"))
        if len(ops) != 2 + (1 if m.group("hint") else 0):
            raise asm.unsupported(s)
        tmap, coords = _tensor_operand(asm, ops[0], rank, s)
        return (
            f"{{ {_coords(coords)} ::klemu::tma_store("
            f"(const void*)(uintptr_t){tmap}, _c, {rank}, {_shared(asm, ops[1], s)}, {L}); }}"
        )
    m = _BULK_LOAD.fullmatch(mn)
    if m:
        if len(ops) != 4 + (1 if m.group("hint") else 0):
            raise asm.unsupported(s)
        return (
            f"::klemu::bulk_load({_shared(asm, ops[0], s)}, (const void*)(uintptr_t){asm.addr(ops[1], s)}, "
            f"(uint32_t){asm.val(ops[2], s)}, {_shared(asm, ops[3], s)}, {L});"
        )
    m = _BULK_STORE.fullmatch(mn)
    if m:
        if len(ops) != 3 + (1 if m.group("hint") else 0):
            raise asm.unsupported(s)
        return (
            f"::klemu::bulk_store((void*)(uintptr_t){asm.addr(ops[0], s)}, {_shared(asm, ops[1], s)}, "
            f"(uint32_t){asm.val(ops[2], s)}, {L});"
        )
    return None


def _misc(asm: Asm, mn: str, ops: list[str], s: str) -> str | None:
    if mn == "wgmma.commit_group.sync.aligned" and not ops:
        return "::klemu::wgmma_commit();"
    if mn == "wgmma.wait_group.sync.aligned" and len(ops) == 1:
        return f"::klemu::wgmma_wait((int){asm.val(ops[0], s)}, {asm.line});"
    if _NO_EFFECT.fullmatch(mn):
        return "__atomic_signal_fence(__ATOMIC_SEQ_CST);"
    reg = re.fullmatch(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32", mn)
    if reg and len(ops) == 1:
        n = ops[0].strip()
        if n.isdigit() and not (24 <= int(n) <= 256 and int(n) % 8 == 0):
            raise asm.unsupported(s)  # ptxas refuses it; the emulator does not guess
        return "(void)0;"
    return None


def translate(asm: Asm, mn: str, ops: list[str], s: str) -> str | None:
    for part in (_mbarrier, _barriers, _wgmma, _bulk, _misc):
        out = part(asm, mn, ops, s)
        if out is not None:
            return out
    return None
