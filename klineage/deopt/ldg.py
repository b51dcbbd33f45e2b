"""Read-only loads through `__ldg`: the load goes through the non-coherent read-only data cache,
which is valid only when the memory is not written while the kernel runs (a `const __restrict__`
parameter). Sites are grouped per function: the skill is "route this kernel's read-only inputs
through the read-only path", not one call at a time."""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Site
from klineage.deopt.window import window_loop
from klineage.source import edit
from klineage.source.model import CudaSource

#: element types `__ldg` has overloads for (CUDA 12/13 headers)
LDG_TYPES = frozenset(
    {
        "float",
        "double",
        "int",
        "unsigned",
        "char",
        "short",
        "long",
        "float2",
        "float4",
        "double2",
        "int2",
        "int4",
        "uint2",
        "uint4",
        "char2",
        "char4",
        "uchar2",
        "uchar4",
        "short2",
        "short4",
        "ushort2",
        "ushort4",
        "longlong2",
        "ulonglong2",
        "__half",
        "__half2",
        "__nv_bfloat16",
        "__nv_bfloat162",
        "half",
        "half2",
        "int8_t",
        "uint8_t",
        "int16_t",
        "uint16_t",
        "int32_t",
        "uint32_t",
        "int64_t",
        "uint64_t",
        "long long",
        "unsigned int",
    }
)


def _plain_load(src: CudaSource, call: ts.Node) -> str:
    """`__ldg(&a[i])` -> `a[i]`, `__ldg(p + i)` -> `p[i]`, `__ldg(p)` -> `*p` (nested __ldg too)."""

    def rw(n: ts.Node) -> str | None:
        return _plain_load(src, n) if n.type == "call_expression" and X.callee_name(n) == "__ldg" else None

    (arg,) = X.call_args(call)
    if arg.type == "pointer_expression" and arg.children[0].type == "&":
        inner = arg.child_by_field_name("argument")
        assert inner is not None
        out = X.render(src, inner, rw)
        plain = inner.type in X.PRIMARY
    elif (
        arg.type == "binary_expression"
        and src.text_of(arg.children[1]) == "+"
        and arg.child_by_field_name("left").type in X.PRIMARY
    ):
        left, right = arg.child_by_field_name("left"), arg.child_by_field_name("right")
        out, plain = f"{X.render(src, left, rw)}[{X.render(src, right, rw)}]", True
    elif arg.type in X.PRIMARY:
        out, plain = f"*{X.render(src, arg, rw)}", False
    else:
        out, plain = f"*({X.render(src, arg, rw)})", False
    return out if plain or not X.needs_outer_parens(call) else f"({out})"


def _ldg_calls(fn: ts.Node) -> list[ts.Node]:
    return X.calls_in(fn, {"__ldg"})


def _ancestors(n: ts.Node) -> list[ts.Node]:
    out, p = [], n.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


def _elem_type(type_text: str) -> str:
    words = [
        w
        for w in re.findall(r"[\w]+", type_text)
        if w not in ("const", "volatile", "__restrict__", "__restrict")
    ]
    t = " ".join(words)
    return "unsigned" if t == "unsigned int" else t


def _derived_pointers(src: CudaSource, fn: ts.Node) -> list[tuple[str, str, str]]:
    """(local, origin parameter, element type) for `const T* local = <expr based on origin>`."""
    out = []
    for decl in (n for n in X.walk(fn) if n.type == "declaration"):
        t = decl.child_by_field_name("type")
        quals = " ".join(src.text_of(c) for c in decl.children if c.type == "type_qualifier")
        for d in decl.children_by_field_name("declarator"):
            if d.type != "init_declarator":
                continue
            target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if target is None or target.type != "pointer_declarator" or value is None or t is None:
                continue
            inner = value
            while (
                inner.type == "call_expression"
                and X.callee_name(inner).endswith("_cast")
                and X.call_args(inner)
            ):
                inner = X.call_args(inner)[0]
            base = X.pointer_base(inner)
            name, _, _ = X.declarator_name(target)
            if base is not None and name and "const" in quals.split():
                out.append((name, src.text_of(base), _elem_type(src.text_of(t))))
    return out


class Ldg(Operator):
    name = "ldg"
    category = "specialized_instruction"
    intent = (
        "Load a kernel's read-only inputs (const __restrict__ pointers) with __ldg so they go through "
        "the read-only data cache."
    )
    mechanical_apply = True

    # ---- backward ---------------------------------------------------------------------------
    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn in X.code_functions(src):
            calls = _ldg_calls(fn)
            if calls:
                bases = sorted(
                    {
                        b.text.decode()
                        for c in calls
                        if (b := X.pointer_base(X.call_args(c)[0])) is not None and b.text is not None
                    }
                )
                sites.append(
                    self.site(
                        src,
                        fn,
                        f"{len(calls)} __ldg load(s) in {X.N.func_name(fn)} (from {', '.join(bases) or '?'})",
                        function=X.N.func_name(fn),
                        count=str(len(calls)),
                        pointers=",".join(bases),
                    )
                )
        return sites

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        edits = [edit.replace(c, _plain_load(src, c)) for c in X.outermost(_ldg_calls(fn))]
        return edit.apply_edits(src, edits)

    # ---- forward ----------------------------------------------------------------------------
    def _read_only_params(self, src: CudaSource, fn: ts.Node) -> dict[str, str]:
        """Pointers that are read-only for the kernel's lifetime, with their element type: const
        __restrict__ parameters, and const local pointers derived from one (`x + off`, casts)."""
        f = next((f for f in src.kernels if src.node_for(f) == fn), None)
        if f is None:
            return {}
        ro = {
            p.name: _elem_type(p.type.replace("*", ""))
            for p in f.params
            if p.is_pointer and p.is_const and p.has_restrict
        }
        for name, origin, elem in _derived_pointers(src, fn):
            if origin in ro and name not in ro:
                ro[name] = elem
        return ro

    def _plain_reads(self, src: CudaSource, fn: ts.Node, names: set[str]) -> list[ts.Node]:
        """`p[e]` reads of the named pointers that are not written, address-taken or already __ldg."""
        out = []
        for n in X.walk(fn):
            if n.type != "subscript_expression":
                continue
            base = n.child_by_field_name("argument")
            if base is None or base.type != "identifier" or src.text_of(base) not in names:
                continue
            p = n.parent
            if p is None or (p.type == "pointer_expression" and p.children[0].type == "&"):
                continue
            if p.type == "assignment_expression" and p.child_by_field_name("left") == n:
                continue
            if p.type == "subscript_expression" and p.child_by_field_name("argument") == n:
                continue
            if any(a.type == "call_expression" and X.callee_name(a) == "__ldg" for a in _ancestors(n)):
                continue
            out.append(n)
        return out

    def _window_only(self, src: CudaSource, fn: ts.Node, name: str) -> list[ts.Node]:
        """The window loops of `name`'s plain reads when every one of them is a window read."""
        loops = [window_loop(src, r) for r in self._plain_reads(src, fn, {name})]
        return [lp for lp in loops if lp is not None] if loops and all(loops) else []

    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            ro = self._read_only_params(src, fn)
            reads = self._plain_reads(src, fn, set(ro))
            if reads:
                names = sorted({src.text_of(r.child_by_field_name("argument")) for r in reads})
                sites.append(
                    self.site(
                        src,
                        fn,
                        f"{len(reads)} plain load(s) of read-only {', '.join(names)} in {k.name}",
                        function=k.name,
                        pointers=",".join(names),
                    )
                )
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        if fn is None:
            return [Precondition("site_present", False, "the function is gone")]
        f = next((f for f in src.functions if src.node_for(f) == fn), None)
        params = {p.name: p for p in f.params} if f is not None else {}
        facts = []
        for name in filter(None, site.details.get("pointers", "").split(",")):
            p = params.get(name)
            if p is None:
                origin = next((o for n, o, _ in _derived_pointers(src, fn) if n == name), None)
                p = params.get(origin or "")
                if p is None:
                    facts.append(
                        Precondition(
                            f"read_only:{name}",
                            False,
                            f"{name} is not derived from a const __restrict__ parameter",
                            "Storage",
                        )
                    )
                    continue
            ok = p.is_pointer and p.is_const and p.has_restrict
            facts.append(
                Precondition(
                    f"read_only:{name}",
                    ok,
                    f"{name} is const __restrict__: not written by this kernel and not aliased by an output"
                    if ok
                    else f"{name} is not const __restrict__ ({p.type}); the read-only cache may go stale",
                    "Storage",
                )
            )
            windows = self._window_only(src, fn, name)
            facts.append(
                Precondition(
                    f"not_window_reads:{name}",
                    not windows,
                    f"every read of {name} moves with a fixed window's counter (line "
                    f"{windows[0].start_point.row + 1}): neighbouring threads' windows overlap and the "
                    "plain load path's L1 already serves the reuse; the read-only path buys nothing there"
                    if windows
                    else f"{name} is read outside a fixed window",
                    "Memory",
                )
            )
            et = _elem_type(p.type.replace("*", ""))
            facts.append(
                Precondition(
                    f"ldg_type:{name}",
                    et in LDG_TYPES,
                    f"element type {et} has an __ldg overload"
                    if et in LDG_TYPES
                    else f"element type {et} has no __ldg overload",
                    "Data types",
                )
            )
        return facts

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        ro = self._read_only_params(src, fn)
        ok = {n for n, t in ro.items() if t in LDG_TYPES}
        reads = X.outermost(self._plain_reads(src, fn, ok))
        return edit.apply_edits(src, [edit.replace(r, f"__ldg(&{src.text_of(r)})") for r in reads])
