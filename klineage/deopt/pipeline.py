"""Software pipelines: overlap the global loads of the next tile with the compute on this one.

Two site kinds:
- `async_copy` (one site per file, since commit/wait only mean something together with every copy):
  `__pipeline_memcpy_async(dst, src, bytes[, zfill])` with `__pipeline_commit()` /
  `__pipeline_wait_prior(n)`, and inline PTX `cp.async.{ca,cg}.shared.global [%0], [%1], N[, %2]`
  with `cp.async.commit_group` / `wait_group` / `wait_all` (usually in small wrapper functions).
  Removal makes each copy synchronous (done by the issuing thread at once through `kl_copy_sync`,
  inserted once at the top of the file; a PTX shared address goes back to a pointer with
  `__cvta_shared_to_generic`) and drops commit/wait. That keeps the function: an async copy may land
  any time between issue and wait, so code that is correct with it is correct when it lands at issue.
  `cuda::memcpy_async`, `cuda::pipeline`, bulk (TMA) and mbarrier copies are recognised and refused.
- `double_buffer` (per shared array): the ping-pong idiom
      __shared__ T buf[2][...];  <prologue: buf[0] = tile 0>; __syncthreads();
      for (t ...) { cur = t & 1;  if (t + 1 < n) { buf[cur ^ 1] = tile t + 1 }  compute(buf[cur]);  __syncthreads(); }
  becomes one buffer loaded synchronously at the top of each iteration:
      __shared__ T buf[...];  for (t ...) { buf = tile t;  __syncthreads();  compute(buf);  __syncthreads(); }
  The prefetch statement is reused with `t + 1` -> `t`. Rings of more than two stages, or a loop
  that does not match the idiom, refuse with the reason.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.deopt.smem_padding import resolve_int
from klineage.source import edit
from klineage.source.constructs import SharedDecl
from klineage.source.model import CudaSource

ASYNC = frozenset({"__pipeline_memcpy_async", "__pipeline_commit", "__pipeline_wait_prior"})
UNSUPPORTED_ASYNC = re.compile(
    r"cuda::memcpy_async|cuda::pipeline|cooperative_groups::memcpy_async|"
    r"cg::memcpy_async|cp\.async\.bulk|cp\.async\.mbarrier"
)
#: inline PTX: `cp.async.{ca,cg}.shared.global [%0], [%1], N[, %2];`, commit_group, wait_group N / wait_all
PTX_COPY = re.compile(
    r"^\s*cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)?\s*\[%0\],\s*\[%1\],\s*(\d+)\s*(,\s*%2)?\s*;?\s*$"
)
PTX_SYNC = re.compile(r"^\s*cp\.async\.(?:commit_group|wait_group\s+(?:%\d+|\d+)|wait_all)\s*;?\s*$")
HELPER = """
// KLineage pipeline: the bytes an async copy moves, copied now by the issuing thread (see deopt/pipeline.py).
__device__ __forceinline__ void kl_copy_sync(void* dst, const void* src, unsigned bytes, unsigned zfill = 0) {
    unsigned char* d = static_cast<unsigned char*>(dst);
    const unsigned char* s = static_cast<const unsigned char*>(src);
    for (unsigned b = 0; b < bytes - zfill; ++b) d[b] = s[b];
    for (unsigned b = bytes - zfill; b < bytes; ++b) d[b] = 0;
}
"""


def _async_calls(fn: ts.Node) -> list[ts.Node]:
    return X.calls_in(fn, ASYNC)


def _ptx_async(src: CudaSource, fn: ts.Node) -> list[tuple[ts.Node, str]]:
    """(asm statement, replacement) for the inline-PTX cp.async forms this operator rewrites."""
    out = []
    for asm in (n for n in X.walk(fn) if n.type == "gnu_asm_expression"):
        body = X.asm_template(src, asm).strip()
        stmt = X.asm_statement(asm)
        if PTX_SYNC.match(body):
            out.append((stmt, ""))
            continue
        m = PTX_COPY.match(body)
        if m is None:
            continue
        ins = next((c for c in asm.children if c.type == "gnu_asm_input_operand_list"), None)
        ops = [c for c in ins.named_children if c.type == "gnu_asm_input_operand"] if ins is not None else []
        exprs = [src.text_of(o.named_children[-1]) for o in ops]
        if len(exprs) < (3 if m.group(2) else 2):
            continue
        n = m.group(1)
        zfill = f", {n} - ({exprs[2]})" if m.group(2) else ""
        out.append((stmt, f"kl_copy_sync(__cvta_shared_to_generic({exprs[0]}), {exprs[1]}, {n}{zfill});"))
    return out


def _unsupported_async(src: CudaSource, fn: ts.Node) -> list[str]:
    out = []
    for n in X.walk(fn):
        if (
            n.type == "gnu_asm_expression"
            and re.search(r"\bcp\.async\b", src.text_of(n))
            and not any(
                a == (n.parent if n.parent is not None and n.parent.type == "expression_statement" else n)
                for a, _ in _ptx_async(src, fn)
            )
        ):
            out.append(f"line {n.start_point.row + 1}: `{src.text_of(n).strip()[:50]}`")
            continue
        if n.type in (
            "gnu_asm_expression",
            "call_expression",
            "qualified_identifier",
        ) and UNSUPPORTED_ASYNC.search(src.text_of(n)):
            if (
                n.type == "qualified_identifier"
                and n.parent is not None
                and n.parent.type == "call_expression"
            ):
                continue
            out.append(f"line {n.start_point.row + 1}: `{src.text_of(n).strip()[:50]}`")
    return sorted(set(out))


# ---- double buffering ---------------------------------------------------------------------------


def _first_index(src: CudaSource, ident: ts.Node) -> ts.Node | None:
    p = ident.parent
    if p is None or p.type != "subscript_expression" or p.child_by_field_name("argument") != ident:
        return None
    lst = next((c for c in p.children if c.type == "subscript_argument_list"), None)
    named = list(lst.named_children) if lst is not None else []
    return named[0] if named else None


class _Ring:
    """A recognised ping-pong buffer and the pieces of its loop."""

    def __init__(self) -> None:
        self.decl: SharedDecl | None = None
        self.loop: ts.Node | None = None
        self.var = ""
        self.prefetch: ts.Node | None = None  # the `if (t + 1 < n) {...}` statement
        self.prologue: list[ts.Node] = []
        self.barrier: ts.Node | None = None  # the __syncthreads() statement after the prologue
        self.uses: list[ts.Node] = []
        self.reason = ""


def _stage_depth(src: CudaSource, d: SharedDecl) -> int | None:
    return resolve_int(src, d.dims[0]) if len(d.dims) >= 2 else None


def _ring(src: CudaSource, d: SharedDecl) -> _Ring:
    r = _Ring()
    r.decl = d
    fn = src.function(d.function) if d.function else None
    if fn is None:
        r.reason = "not inside a function"
        return r
    fnode = src.node_for(fn)
    r.uses = [
        n
        for n in X.walk(fnode)
        if n.type == "identifier" and n.text == d.name.encode() and not (d.start <= n.start_byte < d.end)
    ]
    stages = _stage_depth(src, d)
    if stages != 2:
        r.reason = f"{d.name}{d.dims_text} is a ring of {stages if stages is not None else '?'} stages; only 2-stage ping-pong is rewritten"
        return r
    loops = [lp for lp in (X.enclosing(u, "for_statement") for u in r.uses) if lp is not None]
    if not loops:
        r.reason = f"{d.name} is not used in a loop"
        return r
    loop = loops[0]
    while (outer := X.enclosing(loop, "for_statement")) is not None and any(
        X.enclosing(u, "for_statement") is not None
        and outer.start_byte <= u.start_byte < outer.end_byte
        and not (loop.start_byte <= u.start_byte < loop.end_byte)
        for u in r.uses
    ):
        loop = outer
    r.loop = loop
    init = loop.child_by_field_name("initializer")
    dd = init.child_by_field_name("declarator") if init is not None and init.type == "declaration" else None
    var = dd.child_by_field_name("declarator") if dd is not None and dd.type == "init_declarator" else None
    if var is None:
        r.reason = "the stage loop has no `int t = ...` counter"
        return r
    r.var = src.text_of(var)
    body = loop.child_by_field_name("body")
    pref = [
        s
        for s in (body.named_children if body is not None else [])
        if s.type == "if_statement"
        and re.search(
            rf"\b{re.escape(r.var)}\s*\+\s*1\b", src.text_of(s.child_by_field_name("condition") or s)
        )
        and any(s.start_byte <= u.start_byte < s.end_byte for u in r.uses)
    ]
    if len(pref) != 1 or pref[0].child_by_field_name("alternative") is not None:
        r.reason = f"no single `if ({r.var} + 1 < n) {{ prefetch into {d.name} }}` statement in the loop"
        return r
    r.prefetch = pref[0]
    parent = loop.parent
    if parent is None or parent.type != "compound_statement":
        r.reason = "the stage loop is not in a block"
        return r
    before = [s for s in parent.named_children if s.end_byte <= loop.start_byte and s.type != "comment"]
    for s in reversed(before):
        text = src.text_of(s)
        if r.barrier is None and re.fullmatch(r"__syncthreads\(\)\s*;", text.strip()):
            r.barrier = s
            continue
        writes = [n for n in X.walk(s) if n.type == "assignment_expression"]
        targets = [
            X.pointer_base(w.child_by_field_name("left"))
            for w in writes
            if w.child_by_field_name("left") is not None
        ]
        if writes and all(t is not None and t.text == d.name.encode() for t in targets):
            r.prologue.insert(0, s)
            continue
        if r.prologue or r.barrier is not None:
            break
    if not r.prologue:
        r.reason = f"no prologue loading {d.name}[0] before the loop"
        return r
    outside = [
        u
        for u in r.uses
        if not (loop.start_byte <= u.start_byte < loop.end_byte)
        and not any(p.start_byte <= u.start_byte < p.end_byte for p in r.prologue)
    ]
    if outside:
        r.reason = (
            f"{d.name} is also used outside the prologue and the loop (line {outside[0].start_point.row + 1})"
        )
        return r
    unindexed = [u for u in r.uses if _first_index(src, u) is None]
    if unindexed:
        r.reason = f"{d.name} is used without a stage index (line {unindexed[0].start_point.row + 1})"
    return r


class Pipeline(Operator):
    name = "pipeline"
    category = "pipeline"
    intent = (
        "Overlap the next tile's global loads with this tile's compute: double-buffered shared memory "
        "and/or asynchronous copies (cp.async via __pipeline_memcpy_async) with commit/wait stages."
    )

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        fns = [
            fn
            for fn in X.code_functions(src)
            if _async_calls(fn) or _ptx_async(src, fn) or _unsupported_async(src, fn)
        ]
        if fns:
            # one site for the whole file: commit/wait only mean something together with every copy
            n = sum(len(_async_calls(fn)) + len(_ptx_async(src, fn)) for fn in fns)
            bad = [b for fn in fns for b in _unsupported_async(src, fn)]
            names = [X.N.func_name(fn) for fn in fns]
            sites.append(
                self.site(
                    src,
                    fns[0],
                    f"{n} async-copy construct(s) in {', '.join(names)}"
                    + (f"; {len(bad)} unsupported form(s)" if bad else ""),
                    kind="async_copy",
                    functions=",".join(names),
                    unsupported=" | ".join(bad),
                )
            )
        for d in src.shared_decls:
            if d.function is None or len(d.dims) < 2:
                continue
            stages = _stage_depth(src, d)
            uses = [
                n
                for n in X.walk(src.node_for(src.function(d.function)))
                if n.type == "identifier"  # type: ignore[arg-type]
                and n.text == d.name.encode()
                and not (d.start <= n.start_byte < d.end)
            ]
            staged = [
                u
                for u in uses
                if (i := _first_index(src, u)) is not None
                and re.search(
                    r"\^|&\s*1\b|%\s*\w+|\bstage\b|\bcur\b|\bnxt\b|\bnext\b|\bbuf\b|\bping\b|\bpong\b|1\s*-\s*\w+",
                    src.text_of(i),
                )
            ]
            if stages is not None and 2 <= stages <= 8 and staged:
                sites.append(
                    self.site(
                        src,
                        d,
                        f"shared {d.name}{d.dims_text}: {stages}-stage buffer",
                        kind="double_buffer",
                        array=d.name,
                        stages=str(stages),
                    )
                )
        return sites

    def _decl(self, src: CudaSource, site: Site) -> SharedDecl:
        node = src.node_at(site.anchor)
        d = next(
            (
                d
                for d in src.shared_decls
                if node is not None and d.start == node.start_byte and d.name == site.details.get("array")
            ),
            None,
        )
        if d is None:
            raise Refused(f"{self.name}: shared array {site.details.get('array')} is gone")
        return d

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details["kind"] == "async_copy":
            bad = [b for fn in X.code_functions(src) for b in _unsupported_async(src, fn)]
            return [
                Precondition(
                    "rewritable_async_copies",
                    not bad,
                    "copies use __pipeline_memcpy_async / commit / wait_prior"
                    if not bad
                    else "not rewritten by this operator: " + "; ".join(bad),
                    "Pipeline",
                )
            ]
        r = _ring(src, self._decl(src, site))
        return [
            Precondition(
                "ping_pong_idiom",
                not r.reason,
                f"prologue fills {r.decl.name if r.decl else '?'}[0], the loop prefetches stage t + 1 and "
                "computes on stage t"
                if not r.reason
                else r.reason,
                "Pipeline",
            )
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("kind") == "async_copy":
            return [
                Precondition("async_copy_hardware", True, "cp.async needs sm_80+", "Hardware"),
                Precondition(
                    "copy_sizes",
                    True,
                    "each async copy moves 4, 8 or 16 bytes, aligned to its size",
                    "Layout",
                ),
                Precondition(
                    "waits_before_reads",
                    True,
                    "every stage is waited for and barrier-synchronized before its shared memory is read",
                    "Pipeline",
                ),
            ]
        d = self._decl(src, site)
        return [
            Precondition(
                "smem_budget",
                True,
                f"{site.details.get('stages', '2')} copies of {d.name} fit the "
                "shared-memory budget per block",
                "Storage",
            ),
            Precondition(
                "barrier_per_stage",
                True,
                "a __syncthreads() separates the reads of a stage from the prefetch that overwrites it",
                "Pipeline",
            ),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        if site.details["kind"] == "async_copy":
            return self._remove_async(src, site)
        return self._remove_ring(src, site)

    def _remove_async(self, src: CudaSource, site: Site) -> CudaSource:
        edits = []
        for fn in X.code_functions(src):
            for c in _async_calls(fn):
                name = X.callee_name(c)
                if name == "__pipeline_memcpy_async":
                    args = ", ".join(src.text_of(a) for a in X.call_args(c))
                    edits.append(edit.replace(c, f"kl_copy_sync({args})"))
                else:
                    stmt = c.parent
                    if stmt is not None and stmt.type == "expression_statement":
                        edits.append(edit.delete(src, stmt))
                    else:
                        edits.append(edit.replace(c, "(void)0"))
            for stmt, text in _ptx_async(src, fn):
                edits.append(edit.replace(stmt, text) if text else edit.delete(src, stmt))
        for m in re.finditer(
            r"^[ \t]*#[ \t]*include\s*<cuda_pipeline(?:_primitives)?\.h>[^\n]*\n", src.text, re.M
        ):
            edits.append(
                edit.Edit(len(src.text[: m.start()].encode()), len(src.text[: m.end()].encode()), "")
            )
        if "kl_copy_sync" not in src.text:
            pos = X.after_includes(src)
            edits.append(edit.Edit(pos, pos, HELPER))
        return edit.apply_edits(src, edits)

    def _remove_ring(self, src: CudaSource, site: Site) -> CudaSource:
        d = self._decl(src, site)
        r = _ring(src, d)
        assert r.loop is not None and r.prefetch is not None
        edits: list[edit.Edit] = []
        # the declaration loses its stage dimension
        node = src.node_for(d)
        inner = next(
            n
            for n in X.walk(node)
            if n.type == "array_declarator"
            and (dn := n.child_by_field_name("declarator")) is not None
            and dn.type == "identifier"
        )
        size = inner.child_by_field_name("size")
        assert size is not None
        edits.append(edit.Edit(inner.child_by_field_name("declarator").end_byte, size.end_byte + 1, ""))  # type: ignore[union-attr]
        # prologue and its barrier go
        for s in r.prologue + ([r.barrier] if r.barrier is not None else []):
            pragma = src.pragma_of(s) if s.type == "for_statement" else None
            edits.append(edit.delete(src, s))
            if pragma is not None:
                edits.append(edit.delete(src, pragma))
        # the prefetch becomes this iteration's load, followed by a barrier
        cons = r.prefetch.child_by_field_name("consequence")
        assert cons is not None
        var = re.escape(r.var)

        body = _drop_stage(src, cons, d.name)
        body = re.sub(rf"\(\s*{var}\s*\+\s*1\s*\)", f"{r.var}", body)
        body = re.sub(rf"\b{var}\s*\+\s*1\b", f"{r.var}", body)
        ind = edit.indent_of(src, r.prefetch)
        edits.append(edit.replace(r.prefetch, f"{body}\n{ind}__syncthreads();"))
        # every other stage-indexed use loses its stage index
        for u in r.uses:
            if any(p.start_byte <= u.start_byte < p.end_byte for p in [r.prefetch, *r.prologue]):
                continue
            sub = u.parent
            assert sub is not None
            edits.append(edit.replace(sub, _drop_stage(src, sub, d.name)))
        return edit.apply_edits(src, edits)


def _drop_stage(src: CudaSource, node: ts.Node, name: str) -> str:
    """Text of `node` with `name[stage]` -> `name` (the first subscript of the array removed)."""

    def rw(n: ts.Node) -> str | None:
        if n.type == "subscript_expression":
            a = n.child_by_field_name("argument")
            if a is not None and a.type == "identifier" and a.text == name.encode():
                return name
        return None

    return X.render(src, node, rw)
