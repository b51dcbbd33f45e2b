"""Vectorized global loads and stores: one 64/128-bit access (float4, uint4, float2, int4, ...)
through a `reinterpret_cast` view instead of several scalar accesses to the same elements.

Four site kinds:
- `loop_with_tail` (the elementwise idiom): a loop over `i < n4` through vector views, followed by a
  scalar tail loop starting at `4 * n4 + s` over the same arrays. Removal deletes the vector loop and
  starts the tail loop at `s`, so the scalar loop covers every element. The forward step writes
  this idiom for a scalar elementwise float loop (`y[i] = f(a[i], b[i])`).
- `scalarize` (every other form, per function): each vector access becomes a scalar copy of the
  same elements through two small helpers inserted once at the top of the file
  (`kl_scalar_load<V>(p, i)` / `kl_scalar_store<V>(p, i, v)`), so the surrounding code is untouched.
  A view that is itself advanced (`x4 += k`) or whose origin pointer is not a plain name refuses.
- `aligned_dispatch`: an `if` testing that pointers are 16-byte aligned whose branch moves vectors,
  with a scalar fallback (its `else`, or the code after a branch that returns). Removal keeps the
  fallback. The forward steps of packs.py write this form: a one-thread-per-element kernel
  (`pack_per_thread`) or a row loop partitioned among threads (`row_loop_pack`) in 16-byte packs.
- `tile_load_pack` (forward only): a block's shared-memory tile staging loop over a global float
  array (tile_packs.py) gets a packed loop behind an alignment dispatch, each pack one float4 when
  its four lanes are in bounds, consecutive and aligned; its removal is `aligned_dispatch`'s.
Reinterpretations of registers (`reinterpret_cast<const __half2*>(&raw)`) are not memory
vectorization and are left alone.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.deopt import packs as pack
from klineage.deopt import strided_copy as SC
from klineage.deopt import tile_packs as TP
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.deopt.gemm_loop import GemmLoop, gemm_loops
from klineage.source import edit
from klineage.source.memo import per_text
from klineage.source.model import CudaSource
from klineage.source.syntax import squash, unparen_text

VECTOR_TYPES = frozenset(
    {
        "float2",
        "float4",
        "double2",
        "int2",
        "int4",
        "uint2",
        "uint4",
        "short2",
        "short4",
        "ushort2",
        "ushort4",
        "char2",
        "char4",
        "uchar2",
        "uchar4",
        "longlong2",
        "ulonglong2",
        "__half2",
        "half2",
        "__nv_bfloat162",
        "float8",
        "double4",
    }
)
_CAST_TYPE = re.compile(r"reinterpret_cast\s*<\s*(const\s+)?(?P<v>\w+)\s*(const\s*)?\*\s*>")
HELPERS = """
// KLineage vectorize: scalar copies of the elements a vector access would move (see deopt/vectorize.py).
template <typename V, typename S>
__device__ __forceinline__ V kl_scalar_load(const S* p, long long i = 0) {
    V v;
    S* d = reinterpret_cast<S*>(&v);
    p += i * static_cast<long long>(sizeof(V) / sizeof(S));
#pragma unroll
    for (int k = 0; k < static_cast<int>(sizeof(V) / sizeof(S)); ++k) d[k] = p[k];
    return v;
}
template <typename V, typename S>
__device__ __forceinline__ void kl_scalar_store(S* p, long long i, const V& v) {
    const S* s = reinterpret_cast<const S*>(&v);
    p += i * static_cast<long long>(sizeof(V) / sizeof(S));
#pragma unroll
    for (int k = 0; k < static_cast<int>(sizeof(V) / sizeof(S)); ++k) p[k] = s[k];
}
"""


def _cast_vector(src: CudaSource, node: ts.Node) -> tuple[str, ts.Node] | None:
    """For `reinterpret_cast<[const] V*>(p)` with V a vector type and p not `&local`: (V, p)."""
    if node.type != "call_expression" or not X.callee_name(node).startswith("reinterpret_cast"):
        return None
    m = _CAST_TYPE.match(src.text_of(node.child_by_field_name("function")))
    args = X.call_args(node)
    if m is None or m.group("v") not in VECTOR_TYPES or len(args) != 1:
        return None
    if (
        args[0].type == "pointer_expression"
        and args[0].children[0].type == "&"
        and (a := args[0].child_by_field_name("argument")) is not None
        and a.type == "identifier"
    ):
        return None  # a register or local variable reinterpreted in place (`&raw`), not a memory access
    return m.group("v"), args[0]


class _View:
    """`const V* name = reinterpret_cast<const V*>(origin);` declared in a function."""

    def __init__(self, name: str, vtype: str, origin: ts.Node, decl: ts.Node) -> None:
        self.name, self.vtype, self.origin, self.decl = name, vtype, origin, decl


def _views(src: CudaSource, fn: ts.Node) -> dict[str, _View]:
    out = {}
    for decl in (n for n in X.walk(fn) if n.type == "declaration"):
        for d in decl.children_by_field_name("declarator"):
            if d.type != "init_declarator" or (v := d.child_by_field_name("value")) is None:
                continue
            cv = _cast_vector(src, v)
            target = d.child_by_field_name("declarator")
            if cv is None or target is None or target.type != "pointer_declarator":
                continue
            name, _, _ = X.declarator_name(target)
            if name:
                out[name] = _View(name, cv[0], cv[1], decl)
    return out


class _Access:
    """One vector memory access: the node to replace and its replacement text."""

    def __init__(self, node: ts.Node, text: str, view: str | None) -> None:
        self.node, self.text, self.view = node, text, view


def _accesses(src: CudaSource, fn: ts.Node) -> tuple[list[_Access], list[str]]:
    """Vector accesses of `fn` rewritten to scalar helper calls, and reasons for any refused ones."""
    views = _views(src, fn)
    written = _rebound_names(fn)
    acc: list[_Access] = []
    refused: list[str] = []

    def origin_text(view: _View) -> str | None:
        o = view.origin
        if o.type == "identifier" and src.text_of(o) not in written:
            return src.text_of(o)
        if not X.has_side_effects(o) and not (X.identifiers(o) & written):
            return X.wrap(src, o)
        return None

    def vector_ref(n: ts.Node) -> tuple[str, str, str | None, str] | None:
        """(V, pointer text, index text, view) for a pointer expression to a vector element."""
        n = n.named_children[0] if n.type == "parenthesized_expression" and n.named_children else n
        cv = _cast_vector(src, n)
        if cv is not None:
            return cv[0], X.wrap(src, cv[1]), None, ""
        if n.type == "identifier" and src.text_of(n) in views:
            v = views[src.text_of(n)]
            return v.vtype, origin_text(v) or "", None, v.name
        if n.type == "binary_expression" and src.text_of(n.children[1]) == "+":
            base, off = n.child_by_field_name("left"), n.child_by_field_name("right")
            r = vector_ref(base) if base is not None else None
            if r is not None and off is not None and r[2] is None:
                return r[0], r[1], src.text_of(off), r[3]
        return None

    def element(n: ts.Node) -> tuple[str, str, str | None, str] | None:
        """For an lvalue/rvalue naming one vector element (`v4[i]`, `*p4`, `cast(p)[i]`)."""
        if n.type == "subscript_expression":
            base = n.child_by_field_name("argument")
            idx = _index(n)
            r = vector_ref(base) if base is not None else None
            if r is not None and r[2] is None and idx is not None:
                return r[0], r[1], src.text_of(idx), r[3]
        if n.type == "pointer_expression" and n.children[0].type == "*":
            arg = n.child_by_field_name("argument")
            return vector_ref(arg) if arg is not None else None
        return None

    done: set[tuple[int, int]] = set()
    for n in X.walk(fn):
        if (n.start_byte, n.end_byte) in done:
            continue
        el = None
        target = n
        if n.type == "call_expression" and X.callee_name(n) == "__ldg" and X.call_args(n):
            a = X.call_args(n)[0]
            if a.type == "pointer_expression" and a.children[0].type == "&":
                inner = a.child_by_field_name("argument")
                el = element(inner) if inner is not None else None
            else:
                el = vector_ref(a)
        elif n.type in ("subscript_expression", "pointer_expression"):
            el = element(n)
            p = n.parent
            if (
                el is not None
                and p is not None
                and p.type == "pointer_expression"
                and p.children[0].type == "&"
            ):
                continue  # an address, not an access
        if el is None:
            continue
        vtype, ptr, idx, view = el
        if view and not ptr:
            refused.append(
                f"view {view} (line {n.start_point.row + 1}) is advanced or its origin is not a plain pointer"
            )
            continue
        p = n.parent
        index = idx if idx is not None else "0"
        if p is not None and p.type == "assignment_expression" and p.child_by_field_name("left") == n:
            if src.text_of(p.children[1]) != "=":
                refused.append(f"compound assignment to a vector element at line {n.start_point.row + 1}")
                continue
            right = p.child_by_field_name("right")
            assert right is not None
            target = p
            text = f"kl_scalar_store<{vtype}>({ptr}, {index}, {src.text_of(right)})"
        else:
            text = f"kl_scalar_load<{vtype}>({ptr}{', ' + index if idx is not None else ''})"
        acc.append(_Access(target, text, view or None))
        done |= {(d.start_byte, d.end_byte) for d in X.walk(target)}
    for name in views:
        if name in written:
            refused.append(f"view {name} is advanced or reassigned; its accesses are not rewritten")
    return acc, refused


def _rebound_names(fn: ts.Node) -> set[str]:
    """Names assigned or incremented as a whole (`p = ...`, `p += k`, `++p`), not through `p[i] = ...`."""
    out = set()
    for n in X.walk(fn):
        target = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        if target is not None and target.type == "identifier" and target.text is not None:
            out.add(target.text.decode())
    return out


def _index(sub: ts.Node) -> ts.Node | None:
    idx = next((c for c in sub.children if c.type == "subscript_argument_list"), None)
    named = list(idx.named_children) if idx is not None else []
    return named[0] if named else None


# ---- the elementwise idiom: vector loop + scalar tail ---------------------------------------------

_TAIL_START = re.compile(
    r"^\(?\s*(?:(?P<k1>\d+)\s*\*\s*(?P<n1>\w+)|(?P<n2>\w+)\s*\*\s*(?P<k2>\d+)|"
    r"\(\s*(?P<n3>\w+)\s*<<\s*(?P<s3>\d+)\s*\))\s*\)?\s*\+\s*(?P<rest>.+)$|"
    r"^(?P<rest2>.+?)\s*\+\s*(?:(?P<k4>\d+)\s*\*\s*(?P<n4>\w+)|(?P<n5>\w+)\s*\*\s*(?P<k5>\d+))$"
)


def _loop_parts(src: CudaSource, loop: ts.Node) -> tuple[str, str, ts.Node | None] | None:
    """(loop variable, start text, start node) of `for (int i = START; ...)`."""
    init = loop.child_by_field_name("initializer")
    if init is None or init.type != "declaration":
        return None
    d = init.child_by_field_name("declarator")
    if d is None or d.type != "init_declarator":
        return None
    name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
    if name is None or value is None:
        return None
    return src.text_of(name), src.text_of(value), value


def _starts_past_last_pack(src: CudaSource, fn: ts.Node, start: str, bound: str) -> bool:
    """Whether a loop's start is `k * (bound / k) + ...` (the local holding bound / k, or written
    out): the scalar tail of a packed loop, fewer than k elements, where no pack fits."""
    t = squash(start)
    m = re.match(r"\(?(\d+)\*\(?(\w+)\)?\)?\+|\(?\(?(\w+)\)?\*(\d+)\)?\+", t)
    if m is not None:
        k, name = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        init = T.init_text(src, fn, name)
        return init is not None and T.strip_casts(init).strip("()") in (f"{bound}/{k}", f"({bound})/{k}")
    m = re.match(r"\(?\(*(?:\w+\))?\(?(\w+)\)?/(\d+)\*(\d+)\)?\+", T.strip_casts(t))
    return m is not None and m.group(1) == bound and m.group(2) == m.group(3)


def _dead_declarations(src: CudaSource, fn: ts.Node | None, *gone: ts.Node) -> list[edit.Edit]:
    """Deletions of single-name declarations whose every use lies inside the `gone` nodes."""
    if fn is None:
        return []

    def inside(n: ts.Node, outer: ts.Node) -> bool:
        return outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte

    out = []
    for name, decls in X.declarations_in(fn).items():
        if len(decls) != 1 or len(decls[0].children_by_field_name("declarator")) != 1:
            continue
        decl = decls[0]
        if any(inside(decl, g) for g in gone):
            continue
        uses = [
            n
            for n in X.walk(fn)
            if n.type == "identifier" and n.text == name.encode() and not inside(n, decl)
        ]
        if uses and all(any(inside(u, g) for g in gone) for u in uses):
            out.append(edit.delete(src, decl))
    return out


def _unparen(t: str) -> str:
    """`t` without spaces and without the parentheses that enclose all of it."""
    return unparen_text(re.sub(r"\s+", "", t))


def _tail_pairs(src: CudaSource, fn: ts.Node) -> list[tuple[ts.Node, ts.Node, str, str]]:
    """(vector loop, tail loop, tail start node text, scalar start) pairs of the elementwise idiom."""
    views = _views(src, fn)
    out = []
    loops = [n for n in X.walk(fn) if n.type == "for_statement"]
    for vec in loops:
        vparts = _loop_parts(src, vec)
        cond = vec.child_by_field_name("condition")
        if vparts is None or cond is None:
            continue
        used_views = {v for v in X.identifiers(vec) if v in views}
        if not used_views:
            continue
        m_bound = re.fullmatch(r"\s*\w+\s*<\s*(\w+)\s*", src.text_of(cond))
        if m_bound is None:
            continue
        n4 = m_bound.group(1)
        sib = vec.next_named_sibling
        while sib is not None and sib.type == "comment":
            sib = sib.next_named_sibling
        if sib is None or sib.type != "for_statement":
            continue
        tparts = _loop_parts(src, sib)
        if tparts is None:
            continue
        m = _TAIL_START.match(tparts[1].strip())
        if m is None:
            continue
        name = m.group("n1") or m.group("n2") or m.group("n3") or m.group("n4") or m.group("n5")
        rest = m.group("rest") or m.group("rest2")
        if name != n4 or rest is None:
            continue
        origins = {src.text_of(views[v].origin) for v in used_views}
        if not origins <= X.identifiers(sib):
            continue
        if _unparen(rest) != _unparen(vparts[1]):
            continue
        out.append((vec, sib, tparts[1], vparts[1].strip()))
    return out


def _elementwise_loops(src: CudaSource, fn: ts.Node) -> list[tuple[ts.Node, str, str, list[str], str]]:
    """Scalar float loops `for (int i = S; i < n; i += T) y[i] = f(a[i], ...);` the forward step can
    vectorize: (loop, i, n, arrays, output)."""
    f = next((f for f in src.kernels if src.node_for(f) == fn), None)
    if f is None:
        return []
    floats = {
        p.name
        for p in f.params
        if p.is_pointer and re.sub(r"\b(const|__restrict__|__restrict)\b|\*", "", p.type).strip() == "float"
    }
    out = []
    for loop in (n for n in X.walk(fn) if n.type == "for_statement"):
        parts = _loop_parts(src, loop)
        cond, body = loop.child_by_field_name("condition"), loop.child_by_field_name("body")
        if parts is None or cond is None or body is None:
            continue
        i = parts[0]
        mb = re.fullmatch(rf"\s*{re.escape(i)}\s*<\s*(\w+)\s*", src.text_of(cond))
        if mb is None or _starts_past_last_pack(src, fn, parts[1], mb.group(1)):
            continue
        stmt = body
        while stmt.type == "compound_statement" and len(stmt.named_children) == 1:
            stmt = stmt.named_children[0]
        if stmt.type != "expression_statement" or not stmt.named_children:
            continue
        asg = stmt.named_children[0]
        if asg.type != "assignment_expression" or src.text_of(asg.children[1]) != "=":
            continue
        left = asg.child_by_field_name("left")
        if (
            left is None
            or left.type != "subscript_expression"
            or src.text_of(left) != f"{src.text_of(left.child_by_field_name('argument'))}[{i}]"
        ):
            continue
        y = src.text_of(left.child_by_field_name("argument"))
        subs = [n for n in X.walk(asg) if n.type == "subscript_expression"]
        if y not in floats or any(
            src.text_of(_index(s) or s) != i or src.text_of(s.child_by_field_name("argument")) not in floats
            for s in subs
        ):
            continue
        right = asg.child_by_field_name("right")
        if right is None or i in {
            src.text_of(n)
            for n in X.walk(right)
            if n.type == "identifier"
            and not (n.parent is not None and n.parent.type == "subscript_argument_list")
        }:
            continue
        arrays = sorted({src.text_of(s.child_by_field_name("argument")) for s in subs} - {y})
        if y in {src.text_of(s.child_by_field_name("argument")) for s in subs if s != left}:
            continue
        out.append((loop, i, mb.group(1), arrays, y))
    return out


class Vectorize(Operator):
    name = "vectorize"
    category = "vectorization"
    intent = (
        "Move several contiguous elements per memory instruction (float4/uint4/half2 ... through a "
        "reinterpret_cast view), with a scalar tail for the remainder."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn in X.code_functions(src):
            fname = X.N.func_name(fn)
            pairs = _tail_pairs(src, fn)
            for vec, tail, _, start in pairs:
                sites.append(
                    self.site(
                        src,
                        vec,
                        f"vector loop at line {vec.start_point.row + 1} with scalar tail at line "
                        f"{tail.start_point.row + 1} in {fname}",
                        kind="loop_with_tail",
                        function=fname,
                        start=start,
                    )
                )
            dispatches = [
                n
                for n in X.walk(fn)
                if n.type == "if_statement"
                and pack.dispatch_fallback(src, n) is not None
                and any(
                    m.group("v") in VECTOR_TYPES
                    for m in _CAST_TYPE.finditer(src.text_of(n.child_by_field_name("consequence") or n))
                )
            ]
            for d in dispatches:
                sites.append(
                    self.site(
                        src,
                        d,
                        f"alignment dispatch at line {d.start_point.row + 1} in {fname}: packed path, scalar fallback",
                        kind="aligned_dispatch",
                        function=fname,
                    )
                )
            in_pairs = {(d.start_byte, d.end_byte) for vec, *_ in pairs for d in X.walk(vec)} | {
                (n.start_byte, n.end_byte) for d in dispatches for n in X.walk(d)
            }
            acc, refused = _accesses(src, fn)
            acc = [a for a in acc if (a.node.start_byte, a.node.end_byte) not in in_pairs]
            if acc or refused:
                kinds = sorted({re.search(r"<(\w+)>", a.text).group(1) for a in acc})  # type: ignore[union-attr]
                sites.append(
                    self.site(
                        src,
                        fn,
                        f"{len(acc)} vector access(es) ({', '.join(kinds) or '-'}) in {fname}"
                        + (f"; {len(refused)} not rewritable" if refused else ""),
                        kind="scalarize",
                        function=fname,
                        count=str(len(acc)),
                        types=",".join(kinds),
                        refused=" | ".join(refused),
                    )
                )
        return sites

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details["kind"] != "scalarize":
            return []
        fn = src.node_at(site.anchor)
        if fn is None:
            return [Precondition("site_present", False, "the function is gone")]
        acc, refused = _accesses(src, fn)
        return [
            Precondition(
                "rewritable_accesses",
                not refused and bool(acc),
                "every vector access indexes a fixed view of a plain pointer"
                if not refused and acc
                else "; ".join(refused) or "no vector access left",
                "Layout",
            )
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        if fn is None:
            raise Refused(f"{self.name}: the site is gone")
        if site.details["kind"] == "aligned_dispatch":
            if pack.dispatch_fallback(src, fn) is None:
                raise Refused(f"{self.name}: the alignment dispatch is gone")
            return pack.remove_dispatch(src, fn)
        if site.details["kind"] == "loop_with_tail":
            fn_node = X.enclosing_function(fn)
            pair = (
                next((p for p in _tail_pairs(src, fn_node) if p[0] == fn), None)
                if fn_node is not None
                else None
            )
            if pair is None:
                raise Refused(f"{self.name}: the vector loop and its tail are gone")
            vec, tail, _, start = pair
            init = tail.child_by_field_name("initializer")
            d = init.child_by_field_name("declarator") if init is not None else None
            value = d.child_by_field_name("value") if d is not None else None
            assert value is not None
            edits = [edit.delete(src, vec), edit.replace(value, start)]
            edits += _dead_declarations(src, X.enclosing_function(vec), vec, value)
            pragma = src.pragma_of(vec)
            if pragma is not None:
                edits.append(edit.delete(src, pragma))
            return edit.apply_edits(src, edits)
        acc, _ = _accesses(src, fn)
        edits = [edit.replace(a.node, a.text) for a in acc]
        if "kl_scalar_load" not in src.text:
            pos = X.after_includes(src)
            edits.append(edit.Edit(pos, pos, HELPERS))
        return edit.apply_edits(src, edits)

    # ---- forward ----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        waiting = _awaiting_structure(src)
        sites = [
            self.site(
                src,
                k.guard,
                f"one element per thread in {X.N.func_name(k.lanes.fn)}: {k.lanes.width or '-'} per thread in "
                f"{pack.PACK_BYTES}-byte packs ({', '.join(a.name for a in k.lanes.arrays) or 'no array at [i]'})",
                kind="pack_per_thread",
                function=X.N.func_name(k.lanes.fn),
                index=k.lanes.index,
                width=str(k.lanes.width),
            )
            for k in pack.elementwise_kernels(src)
            if X.N.func_name(k.lanes.fn) not in waiting
        ]
        scalar_loops = {e[0] for fn in X.code_functions(src) for e in _elementwise_loops(src, fn)}
        sites += [
            self.site(
                src,
                r.loop,
                f"row loop over {r.lanes.index} at line {r.loop.start_point.row + 1} in "
                f"{X.N.func_name(r.lanes.fn)}: packs of {r.lanes.width} "
                f"({', '.join(a.name for a in r.lanes.arrays)})",
                kind="row_loop_pack",
                function=X.N.func_name(r.lanes.fn),
                index=r.lanes.index,
                width=str(r.lanes.width),
            )
            for r in pack.row_loops(src)
            if r.loop not in scalar_loops and X.N.func_name(r.lanes.fn) not in waiting
        ]
        sites += [
            self.site(
                src,
                g[0].loop,
                f"tile staging loop{'s' if len(g) > 1 else ''} at line "
                f"{', '.join(str(t.loop.start_point.row + 1) for t in g)} in {g[0].function}: "
                f"{', '.join(f'{t.rows} x {t.cols} of {t.pointer}' for t in g)} in packs of four columns"
                + (" (one test for all)" if len(g) > 1 else ""),
                kind="tile_load_pack",
                function=g[0].function,
                pointer=",".join(t.pointer for t in g),
            )
            for g in TP.tile_groups(src)
        ]
        for fn in X.code_functions(src):
            for loop, i, n, arrays, y in _elementwise_loops(src, fn):
                sites.append(
                    self.site(
                        src,
                        loop,
                        f"elementwise float loop over {n} at line {loop.start_point.row + 1} "
                        f"({y} from {', '.join(arrays) or 'constants'})",
                        kind="loop_with_tail",
                        var=i,
                        bound=n,
                        arrays=",".join(arrays),
                        output=y,
                    )
                )
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("function") in _awaiting_structure(src):
            return [
                Precondition(
                    "structure_first",
                    False,
                    "the kernel is a naive GEMM loop or a transposing copy: its tiling comes before packs",
                    "Layout",
                )
            ]
        if site.details.get("kind") in ("pack_per_thread", "row_loop_pack"):
            found = self._packable(src, site)
            if found is None:
                return [Precondition("independent_lanes", False, "the packed site is gone", "Layout")]
            shape = (
                f"one element per thread at {found.lanes.index}"
                if isinstance(found, pack.ElementwiseKernel)
                else f"the loop partitions its range among threads ({found.start} by {found.step})"
            )
            grid = [pack.grid_fact(src, found)] if isinstance(found, pack.ElementwiseKernel) else []
            return pack.facts(found.lanes, shape) + grid
        if site.details.get("kind") == "tile_load_pack":
            g = _tile_group(src, site)
            t = g[0] if g else None
            return [
                Precondition(
                    "tile_staging_loop",
                    t is not None,
                    "a block stages "
                    + " and ".join(
                        f"{u.rows} x {u.cols} elements of {u.pointer} into {u.store.split('[')[0]}" for u in g
                    )
                    + ", one per trip, the flat index split into row and column"
                    if g is not None
                    else "the staging loop is gone",
                    "Layout",
                ),
                Precondition(
                    "float_elements",
                    t is not None,
                    "the staged array holds floats (four to a 16-byte pack)",
                    "Data types",
                ),
                Precondition(
                    "lanes_checked",
                    True,
                    "a pack is one load only when its four lanes are in bounds, consecutive and 16-byte "
                    "aligned; any other pack loads its lanes as the loop did",
                    "Layout",
                ),
            ]
        if site.details.get("kind") == "scalarize":
            return [
                Precondition(
                    "aligned_views",
                    True,
                    "every vector view starts 16-byte aligned (cudaMalloc bases, offsets multiple of the width)",
                    "Layout",
                ),
                Precondition(
                    "remainder_handled",
                    True,
                    "elements past the last full vector are handled separately",
                    "Layout",
                ),
            ]
        node = src.node_at(site.anchor)
        fn = X.enclosing_function(node) if node is not None else None
        launches_offset = []
        kname = X.N.func_name(fn) if fn is not None else ""
        for ls in src.launch_sites:
            if ls.name == kname:
                launches_offset += [
                    a for a in ls.args if re.search(r"[+\-]", a) and "*" not in a.replace(" ", "")[:1]
                ]
        ok_loop = (
            bool(
                node is not None
                and fn is not None
                and any(l0 == node for l0, *_ in _elementwise_loops(src, fn))
            )
            if "output" in site.details
            else True
        )
        return [
            Precondition(
                "float_elementwise",
                ok_loop,
                "y[i] = f(a[i], ...) over float arrays, no cross-element access"
                if ok_loop
                else "not a float elementwise loop",
                "Data types",
            ),
            Precondition(
                "aligned_base_pointers",
                not launches_offset,
                "the launches pass allocation bases (16-byte aligned) to the kernel"
                if not launches_offset
                else f"a launch passes an offset pointer ({launches_offset[0]}): float4 views may be misaligned",
                "Layout",
            ),
            Precondition(
                "tail_covers_remainder", True, "a scalar tail loop handles the last n % 4 elements", "Layout"
            ),
        ]

    @staticmethod
    def _packable(src: CudaSource, site: Site) -> pack.ElementwiseKernel | pack.RowLoop | None:
        node = src.node_at(site.anchor)
        if site.details.get("kind") == "pack_per_thread":
            return next((k for k in pack.elementwise_kernels(src) if k.guard == node), None)
        return next((r for r in pack.row_loops(src) if r.loop == node), None)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        if site.details.get("kind") == "tile_load_pack":
            g = _tile_group(src, site)
            if g is None:
                raise Refused(f"{self.name}: the tile staging loop is gone")
            return TP.apply_group(src, g)
        if site.details.get("kind") in ("pack_per_thread", "row_loop_pack"):
            packed = self._packable(src, site)
            if packed is None:
                raise Refused(f"{self.name}: the packed site is gone")
            if isinstance(packed, pack.ElementwiseKernel):
                return pack.apply_elementwise(src, packed)
            return pack.apply_row_loop(src, packed)
        node = src.node_at(site.anchor)
        fn = X.enclosing_function(node) if node is not None else None
        found = (
            next((e for e in _elementwise_loops(src, fn) if e[0] == node), None) if fn is not None else None
        )
        if found is None or node is None:
            raise Refused(f"{self.name}: the elementwise loop is gone")
        loop, i, n, arrays, y = found
        parts = _loop_parts(src, loop)
        assert parts is not None
        start_node = parts[2]
        assert start_node is not None
        update = loop.child_by_field_name("update")
        body = loop.child_by_field_name("body")
        assert body is not None
        asg = next(c for c in X.walk(body) if c.type == "assignment_expression")
        right = asg.child_by_field_name("right")
        assert right is not None
        taken = X.identifiers(fn)
        n4 = f"{n}4" if f"{n}4" not in taken else f"{n}_vec4"
        ind = edit.indent_of(src, loop)
        lane_exprs = [X.render(src, right, _lane_rewriter(src, arrays, lane)) for lane in "xyzw"]
        step = src.text_of(update) if update is not None else f"++{i}"
        lines = [f"const int {n4} = {n} / 4;"]
        lines += [f"const float4* {a}4 = reinterpret_cast<const float4*>({a});" for a in arrays]
        lines += [
            f"float4* {y}4 = reinterpret_cast<float4*>({y});",
            f"for (int {i} = {parts[1]}; {i} < {n4}; {step}) {{",
        ]
        lines += [f"    const float4 {a}v = {a}4[{i}];" for a in arrays]
        lines += [f"    {y}4[{i}] = make_float4({', '.join(lane_exprs)});", "}"]
        vec_loop = f"\n{ind}".join(lines) + f"\n{ind}"
        return edit.apply_edits(
            src,
            [
                edit.insert_before(loop, vec_loop),
                edit.replace(start_node, f"4 * {n4} + {X.wrap_text(parts[1])}"),
            ],
        )


def _tile_group(src: CudaSource, site: Site) -> tuple[TP.TileLoad, ...] | None:
    node = src.node_at(site.anchor)
    return next((g for g in TP.tile_groups(src) if g[0].loop == node), None)


def _lane_rewriter(src: CudaSource, arrays: list[str], lane: str):  # noqa: ANN202 - a render callback
    """`a[i]` -> `av.<lane>` for the loop's input arrays."""

    def rw(m: ts.Node) -> str | None:
        if m.type != "subscript_expression":
            return None
        base = m.child_by_field_name("argument")
        name = src.text_of(base) if base is not None else ""
        return f"{name}v.{lane}" if name in arrays else None

    return rw


@per_text()
def _awaiting_structure(src: CudaSource) -> frozenset[str]:
    """Kernels whose structural forward step is still to come: a naive GEMM loop (gemm_loop) or
    a copy that reads and writes along different coordinates (strided_copy). Packing their
    accesses first fixes the naive layout in place and hides them from the tiling operators, so
    vectorization waits until the tiled form exists (it then vectorizes the tile loads). Once per
    text: find_forward and each of its sites' preconditions ask it of the same kernel."""
    names = {k.name for k, g in gemm_loops(src) if isinstance(g, GemmLoop)}
    for k in src.kernels:
        try:
            if SC.analyze(src, k).transposed is not None:
                names.add(k.name)
        except SC.NotACopy:
            continue
    return frozenset(names)
