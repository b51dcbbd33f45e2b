"""Inline PTX the emulator runs: an `asm(...)` statement becomes a GNU statement expression that
calls the runtime (gates/emu/runtime/src/klemu_tc.cpp).

Operands are moved into 64-bit "registers" `_r[i]` (numbered as in the template: outputs first, an
in-out "+" operand once), the template's instructions are translated one by one, and the outputs
are written back. Recognised instructions:
  mma.sync.aligned.m16n8k16 / m16n8k8 .row.col, f16 or bf16 inputs, f32 or f16 accumulators;
  ldmatrix / stmatrix .sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared{,::cta}.b16;
  cp.async.{ca,cg}.shared{,::cta}.global [dst], [src], 4|8|16 {, src-size} (+ L2 hints, ignored),
  cp.async.commit_group, cp.async.wait_group N, cp.async.wait_all;
  cvta.to.shared.{u32,u64}, cvt.u32.u64 / cvt.u64.u32, mov.{b,u,s}{32,64}, ex2.approx{,.ftz}.f32,
  and `.reg` declarations of scalar temporaries.
Anything else raises `Unsupported` naming the instruction and its line.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

import tree_sitter as ts

from klineage.gates.emu import ptx_hopper
from klineage.gates.emu.unsupported import LABEL_AND_GUARD, Unsupported, describe_asm

#: first-mnemonic prefixes this module handles (registered in unsupported.ASM_HANDLERS)
PREFIXES = (
    "mma.sync.aligned.m16n8k16.",
    "mma.sync.aligned.m16n8k8.",
    "ldmatrix.sync.aligned.m8n8.",
    "stmatrix.sync.aligned.m8n8.",
    "cp.async.ca.shared",
    "cp.async.cg.shared",
    "cp.async.commit_group",
    "cp.async.wait_group",
    "cp.async.wait_all",
    "cvta.to.shared",
    "ex2.approx",
)
#: instructions that are warp collectives or waits (a kernel using them runs its threads as fibers)
WARP_PREFIXES = ("mma.", "ldmatrix.", "stmatrix.", *ptx_hopper.WAITING_PREFIXES)


#: `NAME:` at the start of a statement (a label; not `mapa.shared::cluster`, whose name has a dot)
LABEL = re.compile(r"^([A-Za-z_$][\w$]*)\s*:(?!:)\s*(.*)$", re.S)

#: special registers a template may read (`%%laneid`, `%%tid.x`): C++ for each; `{}` takes the axis
SPECIAL_REGISTERS = {
    "laneid": "::klemu::g_cur->lane",
    "warpid": "::klemu::g_cur->warp",
    "tid": "threadIdx.{}",
    "ntid": "blockDim.{}",
    "ctaid": "blockIdx.{}",
    "nctaid": "gridDim.{}",
    # a launch is a cluster of one block (gates/emu/runtime/include/klemu/hopper.h)
    "cluster_ctarank": "0",
    "cluster_nctarank": "1",
    "cluster_ctaid": "0 * blockIdx.{}",
    "cluster_nctaid": "1 + 0 * blockIdx.{}",
    "clusterid": "blockIdx.{}",
    "nclusterid": "gridDim.{}",
    "is_explicit_cluster": "0",
    "dynamic_smem_size": "::klemu::dyn_smem_size()",
    "lanemask_lt": "__lanemask_lt()",
    "lanemask_le": "__lanemask_le()",
    "lanemask_eq": "__lanemask_eq()",
    "lanemask_gt": "__lanemask_gt()",
    "lanemask_ge": "__lanemask_ge()",
    "clock64": "clock64()",
    "globaltimer": "clock64()",
}

#: further instruction translators (gates/emu/ptx_hopper.py): (asm, mnemonic, operands, statement)
#: -> C++, or None when the instruction is not theirs
StatementTranslator = Callable[["Asm", str, list[str], str], "str | None"]
STATEMENT_TRANSLATORS: list[StatementTranslator] = [ptx_hopper.translate]


def _line(src: bytes, n: ts.Node) -> int:
    return src.count(b"\n", 0, n.start_byte) + 1


def template_text(node: ts.Node, src: bytes) -> str | None:
    """The asm template with C escapes decoded; None when it is not a string literal."""
    code = node.child_by_field_name("assembly_code")
    if code is None:
        return None
    lits = (
        [code] if code.type == "string_literal" else [c for c in code.children if c.type == "string_literal"]
    )
    if not lits or (code.type not in ("string_literal", "concatenated_string")):
        return None
    out = []
    for lit in lits:
        for c in lit.children:
            t = src[c.start_byte : c.end_byte].decode(errors="replace")
            if c.type == "string_content":
                out.append(t)
            elif c.type == "escape_sequence":
                out.append(codecs.decode(t, "unicode_escape"))
    return "".join(out)


def statements(template: str) -> list[str]:
    out = []
    for part in re.split(r"[;\n]", template):
        s = part.strip()
        s = re.sub(r"^\{\s*(?=[A-Za-z_.@])", "", s).strip()
        if s in ("", "{", "}") or s.startswith("//"):
            continue
        if s.endswith("}") and s.count("{") < s.count("}"):
            s = s[:-1].strip()
        out.append(s)
    return out


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


class Asm:
    """One inline `asm` statement being translated (operands, temporaries, labels)."""

    def __init__(self, node: ts.Node, src: bytes) -> None:
        self.node, self.src = node, src
        self.line = _line(src, node)
        self.temps: set[str] = set()
        self.labels: set[str] = set()  # every label of the template (gotos may jump forward)
        self.ops: list[tuple[str, str, bool]] = []  # (constraint letter, expression, is output)
        for field, is_out in (("output_operands", True), ("input_operands", False)):
            lst = node.child_by_field_name(field)
            if lst is None:
                continue
            for op in lst.children_by_field_name("operand"):
                c = op.child_by_field_name("constraint")
                v = op.child_by_field_name("value")
                ctext = src[c.start_byte : c.end_byte].decode().strip('"') if c is not None else ""
                vtext = src[v.start_byte : v.end_byte].decode(errors="replace") if v is not None else "0"
                self.ops.append((ctext, vtext, is_out))

    def unsupported(self, what: str) -> Unsupported:
        return Unsupported(
            describe_asm(what.split()[0] if what.split() else what) + f" in `{what}`", self.line
        )

    # ---- operands ----
    def val(self, tok: str, stmt: str) -> str:
        tok = tok.strip()
        special = re.fullmatch(r"%%?([a-z_0-9]+)(?:\.([xyz]))?", tok)
        if special and not special.group(1).isdigit():
            expr = SPECIAL_REGISTERS.get(special.group(1))
            axis = special.group(2)
            if expr is None or (("{}" in expr) != (axis is not None)):
                raise self.unsupported(stmt)
            return f"((uint64_t){expr.format(axis)})"
        m = re.fullmatch(r"%(\d+)", tok)
        if m:
            i = int(m.group(1))
            if i >= len(self.ops):
                raise self.unsupported(stmt)
            return f"_r[{i}]"
        if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)[uU]?", tok):
            return f"((uint64_t){tok.rstrip('uU')})"
        if re.fullmatch(r"[A-Za-z_$][\w$]*", tok) and tok in self.temps:
            return f"_t_{tok.replace('$', '_')}"
        m = re.fullmatch(r"(.+?)\s*([+-])\s*(\d+|0[xX][0-9a-fA-F]+)", tok)
        if m:
            return f"({self.val(m.group(1), stmt)} {m.group(2)} {m.group(3)})"
        raise self.unsupported(stmt)

    def addr(self, tok: str, stmt: str) -> str:
        tok = tok.strip()
        if not (tok.startswith("[") and tok.endswith("]")):
            raise self.unsupported(stmt)
        return self.val(tok[1:-1], stmt)

    def vec(self, tok: str, stmt: str, n: int) -> list[str]:
        tok = tok.strip()
        if not (tok.startswith("{") and tok.endswith("}")):
            raise self.unsupported(stmt)
        items = [self.val(t, stmt) for t in tok[1:-1].split(",")]
        if len(items) != n:
            raise self.unsupported(stmt)
        return items

    # ---- instructions ----
    def reg_names(self, rest: str, stmt: str) -> list[str]:
        """The temporaries a `.reg` declaration names (`.reg .pred p, q;`, `.reg .b32 r<4>;` refused)."""
        names = [nm.strip() for nm in re.sub(r"^(\.\w+\s+)+", "", rest).split(",")]
        if not all(re.fullmatch(r"[A-Za-z_$][\w$]*", nm) for nm in names):
            raise self.unsupported(stmt)
        return names

    def temp(self, name: str) -> str:
        return f"_t_{name.replace('$', '_')}"

    def stmt(self, s: str) -> str:
        label = LABEL.match(s)
        if label:  # `NAME:` (a loop's head), possibly followed by an instruction on the same line
            rest = label.group(2).strip()
            return f"{label.group(1)}: ;" + (f" {self.stmt(rest)}" if rest else "")
        guard = re.match(r"@(!?)([A-Za-z_$][\w$]*)\s+(.*)$", s, re.S)
        if guard:  # a predicated instruction
            if guard.group(2) not in self.temps:
                raise self.unsupported(s)
            return f"if ({guard.group(1)}{self.temp(guard.group(2))}) {{ {self.stmt(guard.group(3))} }}"
        m = re.match(r"(\S+)\s*(.*)$", s, re.S)
        mn, rest = m.group(1), m.group(2)
        ops = _split_top(rest)
        L = self.line
        if mn == ".reg":
            self.reg_names(rest, s)  # declared at the top of the translation (gotos may cross them)
            return ""
        if re.fullmatch(r"bra(\.uni)?", mn) and len(ops) == 1 and ops[0] in self.labels:
            return f"goto {ops[0]};"
        cmp = re.fullmatch(r"setp\.(eq|ne|lt|le|gt|ge|lo|ls|hi|hs)\.([bsu](16|32|64)|f32)", mn)
        if cmp and len(ops) == 3 and ops[0] in self.temps:
            op = {
                "eq": "==",
                "ne": "!=",
                "lt": "<",
                "le": "<=",
                "gt": ">",
                "ge": ">=",
                "lo": "<",
                "ls": "<=",
                "hi": ">",
                "hs": ">=",
            }[cmp.group(1)]
            kind = cmp.group(2)
            a, b = self.val(ops[1], s), self.val(ops[2], s)
            if kind == "f32":
                a, b = f"::klemu::f_reg({a})", f"::klemu::f_reg({b})"
            else:
                ctype = f"{'int' if kind[0] == 's' else 'uint'}{kind[1:]}_t"
                a, b = f"({ctype}){a}", f"({ctype}){b}"
            return f"{self.temp(ops[0])} = ({a} {op} {b});"
        if re.fullmatch(r"selp\.([bsu](16|32|64)|f32)", mn) and len(ops) == 4 and ops[3] in self.temps:
            return f"{self.val(ops[0], s)} = {self.temp(ops[3])} ? {self.val(ops[1], s)} : {self.val(ops[2], s)};"
        for translate in STATEMENT_TRANSLATORS:
            out = translate(self, mn, ops, s)
            if out is not None:
                return out
        parts = mn.split(".")
        if mn.startswith("mma.sync.aligned.m16n8k"):
            mm = re.fullmatch(
                r"mma\.sync\.aligned\.m16n8k(16|8)\.row\.col\.(f32|f16)\.(f16|bf16)\.(f16|bf16)\.(f32|f16)",
                mn,
            )
            if not mm or mm.group(3) != mm.group(4) or len(ops) != 4:
                raise self.unsupported(s)
            k16, dt, at, ct = mm.group(1) == "16", mm.group(2), mm.group(3), mm.group(5)
            if dt != ct:
                raise self.unsupported(s)
            kind = (1 if k16 else 0) | (2 if at == "bf16" else 0) | (4 if dt == "f32" else 0)
            nacc = 4 if dt == "f32" else 2
            d = self.vec(ops[0], s, nacc)
            a = self.vec(ops[1], s, 4 if k16 else 2)
            b = self.vec(ops[2], s, 2 if k16 else 1)
            c = self.vec(ops[3], s, nacc)

            def arr(name: str, xs: list[str]) -> str:
                return f"uint32_t {name}[{len(xs)}] = {{{', '.join(f'(uint32_t){x}' for x in xs)}}};"

            back = " ".join(f"{x} = _d[{i}];" for i, x in enumerate(d))
            return (
                f"{{ {arr('_a', a)} {arr('_b', b)} {arr('_c', c)} uint32_t _d[4]; "
                f"::klemu::mma_sync({kind}, _d, _a, _b, _c, {L}); {back} }}"
            )
        if mn.startswith("ldmatrix."):
            mm = re.fullmatch(r"ldmatrix\.sync\.aligned\.m8n8\.x(1|2|4)(\.trans)?\.shared(::cta)?\.b16", mn)
            if not mm or len(ops) != 2:
                raise self.unsupported(s)
            n = int(mm.group(1))
            d = self.vec(ops[0], s, n) if ops[0].startswith("{") else [self.val(ops[0], s)]
            if len(d) != n:
                raise self.unsupported(s)
            back = " ".join(f"{x} = _d[{i}];" for i, x in enumerate(d))
            return (
                f"{{ uint32_t _d[4]; ::klemu::ldmatrix({n}, {1 if mm.group(2) else 0}, _d, "
                f"(uint64_t)(uint32_t){self.addr(ops[1], s)}, {L}); {back} }}"
            )
        if mn.startswith("stmatrix."):
            mm = re.fullmatch(r"stmatrix\.sync\.aligned\.m8n8\.x(1|2|4)(\.trans)?\.shared(::cta)?\.b16", mn)
            if not mm or len(ops) != 2:
                raise self.unsupported(s)
            n = int(mm.group(1))
            v = self.vec(ops[1], s, n) if ops[1].startswith("{") else [self.val(ops[1], s)]
            if len(v) != n:
                raise self.unsupported(s)
            return (
                f"{{ uint32_t _v[4] = {{{', '.join(f'(uint32_t){x}' for x in v)}}}; ::klemu::stmatrix({n}, "
                f"{1 if mm.group(2) else 0}, _v, (uint64_t)(uint32_t){self.addr(ops[0], s)}, {L}); }}"
            )
        if mn.startswith(("cp.async.ca.", "cp.async.cg.")):
            mm = re.fullmatch(
                r"cp\.async\.(ca|cg)\.shared(::cta)?\.global((\.L2::(64B|128B|256B))|(\.L2::cache_hint))*", mn
            )
            if not mm:
                raise self.unsupported(s)
            if ".L2::cache_hint" in mn:
                ops = ops[:-1]
            if len(ops) not in (3, 4):
                raise self.unsupported(s)
            size = self.val(ops[2], s)
            src_size = self.val(ops[3], s) if len(ops) == 4 else size
            return (
                f"::klemu::cp_async((uint64_t){self.addr(ops[0], s)}, (const void*)(uintptr_t){self.addr(ops[1], s)}, "
                f"(int){size}, (int){src_size}, {L});"
            )
        if mn == "cp.async.commit_group" and not ops:
            return "::klemu::cp_async_commit();"
        if mn == "cp.async.wait_group" and len(ops) == 1:
            return f"::klemu::cp_async_wait((int){self.val(ops[0], s)});"
        if mn == "cp.async.wait_all" and not ops:
            return "::klemu::cp_async_wait_all();"
        if mn in ("cvta.to.shared.u64", "cvta.to.shared.u32") and len(ops) == 2:
            return f"{self.val(ops[0], s)} = ::klemu::cvta_shared((const void*)(uintptr_t){self.val(ops[1], s)}, {L});"
        if mn in ("cvt.u32.u64", "cvt.u64.u32") and len(ops) == 2:
            return f"{self.val(ops[0], s)} = (uint32_t){self.val(ops[1], s)};"
        if re.fullmatch(r"mov\.[bus](32|64)", mn) and len(ops) == 2:
            cast = "(uint32_t)" if parts[1].endswith("32") else ""
            return f"{self.val(ops[0], s)} = {cast}{self.val(ops[1], s)};"
        if mn in ("ex2.approx.f32", "ex2.approx.ftz.f32") and len(ops) == 2:
            return f"{self.val(ops[0], s)} = ::klemu::reg_f(exp2f(::klemu::f_reg({self.val(ops[1], s)})));"
        raise self.unsupported(s)

    def translate(self) -> str:
        tmpl = template_text(self.node, self.src)
        if tmpl is None:
            raise Unsupported("inline PTX asm whose template is not a string literal", self.line)
        stmts = statements(tmpl.replace("%=", ""))
        for st in stmts:  # temporaries and labels first: a branch may jump forward
            if st.startswith(".reg"):
                self.temps.update(self.reg_names(st[4:].strip(), st))
            if label := LABEL.match(st):
                self.labels.add(label.group(1))
        body = [self.stmt(s) for s in stmts]
        body = [f"uint64_t {self.temp(t)} = 0;" for t in sorted(self.temps)] + body
        # local labels (GNU): each expansion of the statement has its own; declared first in the block
        labels = f"__label__ {', '.join(sorted(self.labels))}; " if self.labels else ""
        loads, stores = [], []
        for i, (c, e, is_out) in enumerate(self.ops):
            letter = c.lstrip("=+&")[:1]
            if letter not in "rnlhfic" or not letter:
                raise Unsupported(f'inline PTX operand constraint "{c}"', self.line)
            if not is_out or "+" in c:
                loads.append(
                    f"_r[{i}] = ::klemu::reg_f((float)({e}));"
                    if letter == "f"
                    else f"_r[{i}] = (uint64_t)({e});"
                )
            if is_out:
                if letter == "f":
                    stores.append(f"({e}) = ::klemu::f_reg(_r[{i}]);")
                else:
                    cast = "(uint32_t)" if letter == "r" else "(uint16_t)" if letter == "h" else ""
                    stores.append(f"({e}) = (std::remove_reference_t<decltype({e})>){cast}_r[{i}];")
        regs = f"uint64_t _r[{len(self.ops)}] = {{}}; " if self.ops else ""
        text = f"({{ {labels}{regs}{' '.join(loads)} {' '.join(body)} {' '.join(stores)} (void)0; }})"
        nl = self.src.count(b"\n", self.node.start_byte, self.node.end_byte)
        return text + "\n" * nl


def translate_asm(node: ts.Node, src: bytes) -> str:
    return Asm(node, src).translate()


def is_warp_collective(node: ts.Node, src: bytes) -> bool:
    tmpl = template_text(node, src) or ""
    return any(LABEL_AND_GUARD.sub("", s).startswith(WARP_PREFIXES) for s in statements(tmpl))


def _register() -> None:
    from klineage.gates.emu.unsupported import ASM_HANDLERS

    for p in ("", *PREFIXES, *ptx_hopper.PREFIXES):  # "": an empty template, a compiler fence
        ASM_HANDLERS.setdefault(p, translate_asm)


_register()
