"""Turn a .cu file into C++ that g++ compiles against the emulation runtime (gates/emu/runtime).

Most CUDA keywords are macros of the runtime header; the rewrite only edits what a macro cannot:
  - `__shared__` declarations become function-static storage plus a `SharedReg` that poisons them
    on first touch in every block (namespace-scope ones are poisoned by the runtime);
  - `extern __shared__ T s[];` becomes a pointer to the launch's dynamic shared buffer;
  - `k<...><<<g, b, smem, stream>>>(args)` becomes `::klemu::launch(info, g, b, smem, stream,
    [&](auto&&... a) { k<...>(a...); })(args)`, which evaluates every argument once.
Every edit keeps the number of newlines, so a single `#line 1 "file"` maps g++ diagnostics and
`__builtin_LINE()` back to the original .cu lines. Constructs that cannot be emulated raise
`Unsupported` (gates/emu/unsupported.py) before anything is compiled.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import tree_sitter as ts

from klineage.gates.emu import ptx as _ptx  # noqa: F401  (registers the PTX handlers)
from klineage.gates.emu.analysis import Function, collect_functions, needs_fibers, sync_macros
from klineage.gates.emu.unsupported import ASM_HANDLERS, Unsupported, asm_handler, asm_mnemonic, scan
from klineage.source.parser import parse

__all__ = ["Translation", "Unsupported", "translate", "ASM_HANDLERS"]

_ALIGN = re.compile(rb"__(?:builtin_)?align__\s*\(\s*[^()]*\)")


@dataclass
class Translation:
    text: str
    kernels: dict[str, bool] = field(default_factory=dict)  # kernel -> needs fibers
    launches: int = 0


@dataclass
class _Edit:
    start: int
    end: int
    text: str


def _mask_for_parse(src: bytes) -> bytes:
    """Blank `__align__(n)` (same length) so the grammar parses declarations that use it."""
    return _ALIGN.sub(lambda m: b" " * len(m.group(0)), src)


def _line_of(src: bytes, pos: int) -> int:
    return src.count(b"\n", 0, pos) + 1


def _text(src: bytes, n: ts.Node) -> str:
    return src[n.start_byte : n.end_byte].decode(errors="replace")


def _declarator_name(d: ts.Node, src: bytes) -> str:
    while d is not None and d.type not in ("identifier", "field_identifier"):
        nxt = d.child_by_field_name("declarator")
        if nxt is None:
            nxt = next(
                (c for c in d.named_children if c.type.endswith("declarator") or c.type == "identifier"), None
            )
        d = nxt
    return _text(src, d) if d is not None else ""


def _is_namespace_scope(n: ts.Node) -> bool:
    p = n.parent
    while p is not None:
        if p.type in ("compound_statement", "function_definition"):
            return False
        if p.type in ("translation_unit", "declaration_list"):
            return True
        p = p.parent
    return True


class _Rewriter:
    def __init__(self, src: bytes, filename: str) -> None:
        self.src = src
        self.filename = filename
        self.edits: list[_Edit] = []
        self.counter = 0
        self.launches = 0
        self.functions: list[Function] = []
        self.fibers: dict[str, bool] = {}

    # ---- __shared__ -----------------------------------------------------------------------------
    def shared_decl(self, decl: ts.Node) -> None:
        src = self.src
        quals = [c for c in decl.children if c.type in ("type_qualifier", "storage_class_specifier")]
        shared = [c for c in quals if _text(src, c) == "__shared__"]
        if not shared:
            return
        is_extern = any(_text(src, c) == "extern" for c in quals)
        if is_extern:
            self.dynamic_shared(decl, quals)
        else:
            self.static_shared(decl, shared[0], quals)

    def static_shared(self, decl: ts.Node, shared: ts.Node, quals: list[ts.Node]) -> None:
        src = self.src
        names = [_declarator_name(d, src) for d in decl.children_by_field_name("declarator")]
        has_static = any(_text(src, c) == "static" for c in quals)
        body = src[decl.start_byte : decl.end_byte].decode(errors="replace")
        rel = shared.start_byte - decl.start_byte
        body = (
            body[:rel]
            + " " * (shared.end_byte - shared.start_byte)
            + body[rel + shared.end_byte - shared.start_byte :]
        )
        prefix = "" if has_static else "static "
        regs = []
        glob = _is_namespace_scope(decl)
        for name in names:
            if not name:
                continue
            self.counter += 1
            reg = f"_klemu_shared_{self.counter}"
            regs.append(f" static ::klemu::SharedReg {reg} = {{&{name}, sizeof({name}), 0}};")
            if glob:
                regs.append(f" static ::klemu::SharedRegGlobal {reg}_g(&{reg});")
            else:
                regs.append(f" {reg}.touch();")
        text = f"{prefix}__attribute__((aligned(16))) {body}{''.join(regs)}"
        self.edits.append(_Edit(decl.start_byte, decl.end_byte, text))

    def dynamic_shared(self, decl: ts.Node, quals: list[ts.Node]) -> None:
        src = self.src
        type_node = decl.child_by_field_name("type")
        declarators = decl.children_by_field_name("declarator")
        if type_node is None or not declarators:
            return
        keep = " ".join(_text(src, q) for q in quals if _text(src, q) not in ("extern", "__shared__"))
        base_type = f"{keep} {_text(src, type_node)}".strip()
        outs = []
        for d in declarators:
            name = _declarator_name(d, src)
            dtext = _text(src, d)
            pat = re.compile(rf"\b{re.escape(name)}\s*\[\s*\]")
            as_ptr = pat.sub(f"(*const {name})", dtext, count=1)
            cast = pat.sub("(*)", dtext, count=1)
            if as_ptr == dtext:  # not an unsized array: still alias the buffer
                as_ptr, cast = f"(*const {name})", "(*)"
            if _is_namespace_scope(decl):
                outs.append((name, f"(({base_type} {cast})::klemu::dyn_smem())"))
            else:
                outs.append((name, f"{base_type} {as_ptr} = ({base_type} {cast})::klemu::dyn_smem();"))
        if _is_namespace_scope(decl):
            line = _line_of(src, decl.start_byte)
            defs = "".join(f"#define {n} {e}\n" for n, e in outs)
            text = f"\n{defs}#line {line} {json.dumps(self.filename)}\n"
            # the rest of the original line follows and must be numbered `line`
            self.edits.append(_Edit(decl.start_byte, decl.end_byte, text.rstrip("\n")))
        else:
            self.edits.append(_Edit(decl.start_byte, decl.end_byte, " ".join(t for _, t in outs)))

    # ---- launches ---------------------------------------------------------------------------------
    def launch(self, call: ts.Node, kcs: ts.Node) -> None:
        src = self.src
        fn = call.child_by_field_name("function")
        if fn is None:
            return
        encl = call.parent
        while encl is not None and encl.type != "function_definition":
            encl = encl.parent
        if encl is not None and any(c.type == "__global__" for c in encl.children):
            raise Unsupported(
                "dynamic parallelism (a kernel launch inside a __global__ function)",
                _line_of(src, call.start_byte),
                self.filename,
            )
        fn_text = _text(src, fn)
        cfg = [_text(src, c) for c in kcs.named_children if c.type != "comment"]
        if len(cfg) < 2:
            raise Unsupported(
                "kernel launch without grid and block", _line_of(src, call.start_byte), self.filename
            )
        info = self.kernel_info(fn, with_address=True)
        lam = f"[&](auto&&... _klemu_a) {{ {fn_text}(_klemu_a...); }}"
        text = f"::klemu::launch({info}, {', '.join(cfg)}, {lam})"
        self.edits.append(_Edit(call.start_byte, kcs.end_byte, text))
        self.launches += 1

    def kernel_info(self, fn: ts.Node, with_address: bool) -> str:
        """The `::klemu::KInfo{...}` of a launch of the kernel `fn` names: its name, whether it needs
        fibers, file and line, and (`with_address`, when the name picks one instantiation) its address
        and instantiation."""
        fn_text = _text(self.src, fn)
        base = fn if fn.type != "template_function" else fn.child_by_field_name("name")
        if base is not None and base.type == "qualified_identifier":
            base = base.child_by_field_name("name")
        name = _text(self.src, base) if base is not None else fn_text
        defs = [f for f in self.functions if f.name == name and f.is_global]
        fibers = self.fibers.get(name, True) if defs else True
        if with_address and len(defs) == 1 and (not defs[0].is_template or fn.type == "template_function"):
            addr = f"(const void*)&{fn_text}, ::klemu::instance_name<&{fn_text}>()"
        else:
            addr = "nullptr"
        return f"::klemu::KInfo{{{json.dumps(name)}, {int(fibers)}, {json.dumps(self.filename)}, __LINE__, {addr}}}"

    def launch_ex(self, call: ts.Node) -> None:
        """`cudaLaunchKernelEx(&cfg, kernel, args...)`: the kernel's name, line and instantiation go
        in front (`::klemu::launch_ex(info, &cfg, kernel, args...)`), as for a `<<<...>>>` launch."""
        fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        if (
            fn is None
            or args is None
            or _text(self.src, fn) not in ("cudaLaunchKernelEx", "::cudaLaunchKernelEx")
        ):
            return
        named = [c for c in args.named_children if c.type != "comment"]
        if len(named) < 2:
            return
        info = self.kernel_info(named[1], with_address=False)
        self.edits.append(_Edit(fn.start_byte, args.start_byte + 1, f"::klemu::launch_ex({info}, "))

    # ---- inline asm (extension point for issue 11) -------------------------------------------------
    def asm(self, node: ts.Node) -> None:
        handler = asm_handler(asm_mnemonic(node, self.src))
        if handler is not None:
            try:
                text = handler(node, self.src)
            except Unsupported as e:
                raise Unsupported(e.construct, e.line, self.filename, e.others) from None
            self.edits.append(_Edit(node.start_byte, node.end_byte, text))

    # ---- __launch_bounds__ -------------------------------------------------------------------------------
    def launch_bound(self, fn: Function) -> None:
        """First in the kernel's body: the check that its block fits its declared bound (a GPU refuses
        the launch otherwise; the emulator's `__launch_bounds__` macro expands to nothing)."""
        lb = next((c for c in fn.node.children if c.type == "launch_bounds"), None)
        body = fn.node.child_by_field_name("body")
        args = lb.named_children if lb is not None else []
        if body is None or not args:
            return
        expr = _text(self.src, args[0])
        at = body.start_byte + 1  # after `{`, on the same line: line numbers stay exact
        self.edits.append(
            _Edit(at, at, f" ::klemu::launch_bound(static_cast<long long>({expr}), {json.dumps(fn.name)});")
        )

    # ---- driver -----------------------------------------------------------------------------------------
    def run(self, root: ts.Node) -> None:
        self.functions = collect_functions(root, self.src)
        for fn in self.functions:
            if fn.is_global:
                self.launch_bound(fn)
        self.fibers = needs_fibers(self.functions, sync_macros(root, self.src))
        stack = [root]
        while stack:
            n = stack.pop()
            if n.type == "declaration":
                self.shared_decl(n)
            elif n.type == "call_expression":
                kcs = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
                if kcs is not None:
                    self.launch(n, kcs)
                    args = n.child_by_field_name("arguments")
                    if args is not None:
                        stack.append(args)
                    continue
                self.launch_ex(n)
            elif n.type == "gnu_asm_expression":
                self.asm(n)
                continue
            stack.extend(n.children)

    def apply(self) -> str:
        out = bytearray()
        pos = 0
        for e in sorted(self.edits, key=lambda e: e.start):
            if e.start < pos:
                continue  # nested edit inside an earlier one (cannot happen for the forms we edit)
            out += self.src[pos : e.start]
            out += e.text.encode()
            pos = e.end
        out += self.src[pos:]
        return out.decode(errors="replace")


def translate(source: str, filename: str = "kernel.cu") -> Translation:
    """The g++-ready text for `source`; raises Unsupported naming construct and file:line."""
    raw = source.encode()
    tree = parse(_mask_for_parse(raw))
    scan(tree.root_node, raw, filename)
    rw = _Rewriter(raw, filename)
    rw.run(tree.root_node)
    body = rw.apply()
    text = f"#line 1 {json.dumps(filename)}\n{body}"
    if not text.endswith("\n"):
        text += "\n"
    return Translation(text=text, kernels=dict(rw.fibers), launches=rw.launches)
