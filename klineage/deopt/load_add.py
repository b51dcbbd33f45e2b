"""Add during load: each thread of a block reduction adds F elements while it loads, before the
block's tree, so that a block of B threads covers a chunk of F * B elements.

A block that reduces a chunk of C elements with one element per thread spends C threads on a tree
whose first round already idles half of them. Loading F elements per thread and adding them in
registers first (`v = x[i] + x[i + B]`, or a loop `for (k = 0; k < F; ++k) v += x[i + k * B]`
with `i = blockIdx.x * (B * F) + threadIdx.x`) does the first log2(F) rounds of the tree during
the load, with F independent loads in flight per thread and a block of C / F threads (the
"first add during load" and "multiple adds per thread" steps of the classic reduction lineage).

The chunk each block reduces stays the same, so the grid and what each block stores do not
change: the block shrinks by F (removal: grows by F) and so does a template parameter the launch
binds to the block size.

Backward (`remove`), on `i = blockIdx.x * (S * F) + threadIdx.x` whose every use is one of those
loads (S the block size: `blockDim.x` or a template parameter each launch binds to its block):
the loads read `x[i]` once, the index scales by S alone, every launch multiplies its block (and
the template argument for S) by F and binds a template F to 1.

Forward (`apply`, F = 2), on a block-cooperating kernel whose thread loads its one element as
`v = x[i]` or `buf[t] = x[i]` with `i = blockIdx.x * S + threadIdx.x`: the load becomes
`x[i] + x[i + S]`, the index scales by `S * 2` and every launch halves its block. Preconditions:
the kernel combines by addition only (no max/min), the index is read by those loads alone (no
bound test: the chunk is whole), the halved block is a whole number of warps, and the kernel
writes no number equal to the block size or its half (the tree's extent follows the block).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.deopt.rows import BLOCK_COOP, COLLECTIVE, fact, fn_texts, reaches
from klineage.source import edit
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import IntConstant, int_constants

#: elements per thread the forward step adds during the load
FACTOR = 2
_W = r"[A-Za-z_][\w.]*"
_SCALED = (
    re.compile(rf"^blockIdx\.x\*\(({_W})\*(\w+)\)\+threadIdx\.x$"),
    re.compile(rf"^blockIdx\.x\*({_W})\*(\w+)\+threadIdx\.x$"),
)
_PLAIN = re.compile(rf"^blockIdx\.x\*({_W})\+threadIdx\.x$")
_MAXMIN = re.compile(r"\b(?:fmaxf|fminf|fmax|fmin|max|min|__hmax|__hmin)\s*\(")


@dataclass(frozen=True)
class _Index:
    """`i = blockIdx.x * S [* F] + threadIdx.x` in a kernel: the block stride S and the factor F."""

    kernel: Function
    fn: ts.Node
    decl: ts.Node  # the init_declarator
    var: str
    block: str  # S: `blockDim.x`, a template parameter or a constexpr of the kernel's body
    factor: str  # F ("1" when the index is not scaled)
    uses: tuple[ts.Node, ...]  # identifier uses of `var` after its declaration


def _local_sizes(src: CudaSource, fn: ts.Node) -> dict[str, IntConstant]:
    """The integer constexprs declared in a kernel's body: what a template size fixed at every launch
    becomes in the canonical form (`constexpr unsigned int blockSize = 128;`)."""
    return {
        c.name: c
        for c in int_constants(src)
        if c.kind == "constexpr" and fn.start_byte <= c.start and c.end <= fn.end_byte
    }


def _indices(src: CudaSource, k: Function) -> list[_Index]:
    fn = src.node_for(k)
    tparams = {tp.name for tp in k.template_params} | set(_local_sizes(src, fn))
    out = []
    for d in T.walk(fn):
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        name = T.declarator_ident(d) if value is not None else None
        if value is None or not name or name in T.assigned_in(fn):
            continue
        t = T.squash(src.text_of(value))
        pairs = [m.groups() for rx in _SCALED if (m := rx.match(t))]
        pairs = [p for a, b in pairs for p in ((a, b), (b, a))]
        if m := _PLAIN.match(t):
            pairs.append((m.group(1), "1"))
        for block, factor in pairs:
            if block != "blockDim.x" and block not in tparams:
                continue
            decl_id = d.child_by_field_name("declarator")
            uses = tuple(
                n
                for n in T.walk(fn)
                if n.type == "identifier" and src.text_of(n) == name and n.start_byte != decl_id.start_byte
            )
            out.append(_Index(k, fn, d, name, block, factor, uses))
            break
    return out


def _inside(n: ts.Node, outer: ts.Node) -> bool:
    return outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte


def _loads(src: CudaSource, ix: _Index) -> tuple[list[tuple[ts.Node, str]], list[ts.Node]]:
    """The F-element loads of a scaled index as (node, its one-element text), and the uses of the
    index outside them."""
    i, s = re.escape(ix.var), re.escape(ix.block)
    loads: list[tuple[ts.Node, str]] = []
    for n in T.walk(ix.fn):
        if n.type == "for_statement":
            parts = T.counting_loop(src, n)
            body = n.child_by_field_name("body")
            if parts is None or body is None:
                continue
            k, init, cond, _, _ = parts
            stmts = (
                [c for c in body.named_children if c.type != "comment"]
                if body.type == "compound_statement"
                else [body]
            )
            if (
                T.squash(src.text_of(init)) != "0"
                or T.squash(src.text_of(cond.child_by_field_name("right"))) != ix.factor
                or len(stmts) != 1
            ):
                continue
            kk = re.escape(k)
            m = re.fullmatch(
                rf"([\w.\[\]]+)\+=(\w+)\[{i}\+(?:{kk}\*{s}|{s}\*{kk}|\({kk}\*{s}\)|\({s}\*{kk}\))\];",
                T.squash(src.text_of(stmts[0])),
            )
            if m:
                target, arr = src.text_of(stmts[0]).split("+=")[0].strip(), m.group(2)
                loads.append((n, f"{target} += {arr}[{ix.var}];"))
        elif n.type == "binary_expression" and ix.factor == "2":
            m = re.fullmatch(rf"(\w+)\[{i}\]\+(\w+)\[{i}\+{s}\]", T.squash(src.text_of(n)))
            if m and m.group(1) == m.group(2):
                loads.append((n, f"{m.group(1)}[{ix.var}]"))
    other = [u for u in ix.uses if not any(_inside(u, n) for n, _ in loads)]
    return loads, other


def _block_of(src: CudaSource, ls) -> int | None:
    config = T.config_nodes(src, ls)
    return T.eval_int(src.text_of(config[1]), T.file_constants(src)) if len(config) >= 2 else None


def _launch_value(src: CudaSource, k: Function, ls, name: str) -> int | None:
    """The launch's value of a template parameter or number `name`."""
    text = T.template_map(src, k, ls).get(name, name)
    return T.eval_int(text, T.file_constants(src))


def _tid_names(src: CudaSource, fn: ts.Node) -> set[str]:
    return {"threadIdx.x"} | {
        name
        for name, d in T.local_decls(fn).items()
        if d.type == "init_declarator"
        and (v := d.child_by_field_name("value")) is not None
        and T.squash(src.text_of(v)) == "threadIdx.x"
    }


def _small_shared(src: CudaSource, ix: _Index, block: int, ls) -> list[tuple[ts.Node, str, int | None]]:
    """(size node, name, size or None when unknown) of the shared arrays written at the thread's
    index whose size (a template block size taking its new value) is unknown or below `block`."""
    tids = _tid_names(src, ix.fn)
    consts = {**T.file_constants(src)}
    tmap = {
        **T.template_map(src, ix.kernel, ls),
        **({ix.block: str(block)} if ix.block != "blockDim.x" else {}),
    }
    out = []
    for d in T.walk(ix.fn):
        if d.type != "declaration" or "__shared__" not in src.text_of(d):
            continue
        for arr in (n for n in T.walk(d) if n.type == "array_declarator"):
            size = arr.child_by_field_name("size")
            name = T.declarator_ident(arr) or ""
            n = T.eval_int(T.subst_idents(src.text_of(size), tmap), consts) if size is not None else None
            indexed = any(  # written at the thread's own slot: one slot per thread of the block
                T.squash(src.text_of(x.child_by_field_name("left"))) in {f"{name}[{t}]" for t in tids}
                for x in T.walk(ix.fn)
                if x.type == "assignment_expression"
            )
            if indexed and (n is None or n < block):  # `extern __shared__ T a[]`: sized at the launch
                out.append((size if size is not None else arr, name, n))
    return out


class LoadAdd(Operator):
    name = "load_add"
    category = "tiling"
    intent = (
        "Each thread of a block reduction adds several elements while it loads (x[i] + x[i + B], or a "
        "loop over F), before the block's tree: the block covers F times its threads, the first tree "
        "rounds happen in registers and F loads are in flight per thread."
    )
    mechanical_apply = True

    # ---- backward -------------------------------------------------------------------------------
    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            for ix in _indices(src, k):
                if ix.factor == "1":
                    continue
                loads, _ = _loads(src, ix)
                if loads:
                    sites.append(
                        self.site(
                            src,
                            ix.decl,
                            f"{ix.factor} elements per thread added during the load ({ix.var}) in {k.name}",
                            kernel=k.name,
                            var=ix.var,
                        )
                    )
        return sites

    def _index(self, src: CudaSource, site: Site, scaled: bool) -> _Index:
        node = src.node_at(site.anchor)
        k = src.kernel(site.details.get("kernel"))
        ix = next((x for x in _indices(src, k) if x.decl == node), None) if k is not None else None
        if ix is None or (ix.factor == "1") == scaled:
            raise Refused(f"{self.name}: no {'scaled ' if scaled else ''}chunk index at {site.anchor}")
        return ix

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        ix = self._index(src, site, scaled=True)
        loads, other = _loads(src, ix)
        facts = [
            fact(
                "index_only_loads",
                bool(loads) and not other,
                f"`{ix.var}` is read only by the {ix.factor}-element loads"
                if loads and not other
                else f"`{ix.var}` is also read at line {other[0].start_point.row + 1}",
                "Layout",
            )
        ]
        facts += self._launch_facts(src, ix, grow=True)
        return facts

    def _launch_facts(self, src: CudaSource, ix: _Index, grow: bool) -> list[Precondition]:
        launches = T.launches_of(src, ix.kernel.name)
        facts = [fact("launch_in_file", bool(launches), f"{len(launches)} launch(es) in the file", "Layout")]
        for ls in launches:
            block = _block_of(src, ls)
            f = _launch_value(src, ix.kernel, ls, ix.factor) if grow else FACTOR
            s = block if ix.block == "blockDim.x" else _launch_value(src, ix.kernel, ls, ix.block)
            if block is None or f is None or s != block:
                facts.append(
                    fact(
                        "block_known_at_launch",
                        False,
                        f"launch at line {ls.line}: the block size, the factor or {ix.block} is not a "
                        "number the launch fixes (or the stride is not the block)",
                        "Layout",
                    )
                )
                continue
            new = block * f if grow else block // f
            ok = new <= 1024 if grow else block % (32 * f) == 0
            facts.append(
                fact(
                    "block_size",
                    ok,
                    f"launch at line {ls.line}: block {block} -> {new}"
                    + ("" if ok else (" (over 1024)" if grow else " (not a whole number of warps)")),
                    "Hardware",
                )
            )
            if grow:
                small = _small_shared(src, ix, new, ls)
                unknown = [name for _, name, n in small if n is None]
                grown = [f"`{name}[{n}]`" for _, name, n in small if n is not None]
                facts.append(
                    fact(
                        "shared_covers_block",
                        not unknown,
                        (
                            f"{', '.join(grown)} grow(s) to {new} slots, one per thread"
                            if grown
                            else "shared arrays written at the thread's slot cover the larger block"
                        )
                        if not unknown
                        else f"the size of `{unknown[0]}` (written at the thread's slot) is not known",
                        "Storage",
                    )
                )
        return facts

    def _launch_edits(self, src: CudaSource, ix: _Index, grow: bool) -> list[edit.Edit]:
        edits, new_block = [], 0
        names = [tp.name for tp in ix.kernel.template_params]
        for ls in T.launches_of(src, ix.kernel.name):
            block = _block_of(src, ls)
            f = _launch_value(src, ix.kernel, ls, ix.factor) if grow else FACTOR
            assert block is not None and f is not None
            new = block * f if grow else block // f
            edits.append(edit.replace(T.config_nodes(src, ls)[1], str(new)))
            targs = T.template_arg_nodes(src, ls)
            if ix.block in names and names.index(ix.block) < len(targs):
                edits.append(edit.replace(targs[names.index(ix.block)], str(new)))
            if grow and ix.factor in names and names.index(ix.factor) < len(targs):
                edits.append(edit.replace(targs[names.index(ix.factor)], "1"))
            new_block = new
        local = _local_sizes(src, ix.fn)
        if ix.block in local and edits:  # one value for every launch (the facts checked S == block)
            c = local[ix.block]
            edits.append(edit.Edit(c.start, c.end, str(new_block)))
        if grow and ix.factor in local:
            c = local[ix.factor]
            edits.append(edit.Edit(c.start, c.end, "1"))
        return edits

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        ix = self._index(src, site, scaled=True)
        loads, _ = _loads(src, ix)
        sizes: dict[int, tuple[ts.Node, int]] = {}  # one slot per thread of the largest new block
        for ls in T.launches_of(src, ix.kernel.name):
            block, f = _block_of(src, ls), _launch_value(src, ix.kernel, ls, ix.factor)
            assert block is not None and f is not None
            for size, _, _ in _small_shared(src, ix, block * f, ls):
                sizes[size.start_byte] = (size, max(block * f, sizes.get(size.start_byte, (size, 0))[1]))
        edits = [edit.replace(ix.decl.child_by_field_name("value"), f"blockIdx.x * {ix.block} + threadIdx.x")]
        for node, text in loads:
            start = node.start_byte
            pragma = src.pragma_of(node) if node.type == "for_statement" else None
            if pragma is not None:  # the pragma's line goes too; the load keeps the loop's indent
                start = src.line_start(pragma.line)
                text = edit.indent_of(src, node) + text
            edits.append(edit.Edit(start, node.end_byte, text))
        edits += [edit.replace(size, str(n)) for size, n in sizes.values()]
        return edit.apply_edits(src, edits + self._launch_edits(src, ix, grow=True))

    # ---- forward --------------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        helpers = fn_texts(src)
        for k in src.kernels:
            fn = src.node_for(k)
            if not (reaches(src, fn, BLOCK_COOP, helpers) or reaches(src, fn, COLLECTIVE, helpers)):
                continue
            for ix in _indices(src, k):
                if ix.factor == "1" and ix.uses:
                    sites.append(
                        self.site(
                            src,
                            ix.decl,
                            f"one element per thread ({ix.var}) before the block reduction in {k.name}",
                            kernel=k.name,
                            var=ix.var,
                            forward="1",
                        )
                    )
        return sites

    def _single_loads(self, src: CudaSource, ix: _Index) -> tuple[list[ts.Node], list[ts.Node]]:
        """(`x[i]` loads assigned whole to a value, other uses of the index)."""
        loads, other = [], []
        written = T.assigned_in(ix.fn)
        for u in ix.uses:
            sub = u.parent
            if sub is not None and sub.type == "subscript_argument_list":
                sub = sub.parent
            arr = sub.child_by_field_name("argument") if sub is not None else None
            p = sub.parent if sub is not None else None
            whole = p is not None and (
                (p.type == "init_declarator" and p.child_by_field_name("value") == sub)
                or (
                    p.type == "assignment_expression"
                    and p.child_by_field_name("right") == sub
                    and src.text_of(p.child_by_field_name("operator")) in ("=", "+=")
                )
            )
            if (
                sub is not None
                and sub.type == "subscript_expression"
                and T.squash(src.text_of(sub)) == f"{src.text_of(arr)}[{ix.var}]"
                and arr is not None
                and arr.type == "identifier"
                and src.text_of(arr) not in written
                and whole
            ):
                loads.append(sub)
            else:
                other.append(u)
        return loads, other

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") != "1":
            return self.removal_preconditions(src, site)
        ix = self._index(src, site, scaled=False)
        loads, other = self._single_loads(src, ix)
        helpers = fn_texts(src)
        maxmin = reaches(src, ix.fn, _MAXMIN, helpers)
        facts = [
            fact(
                "sum_combine",
                not maxmin,
                "the kernel combines values by addition only"
                if not maxmin
                else "the kernel calls a max/min: the added loads would not be what it combines",
                "Data types",
            ),
            fact(
                "index_only_loads",
                bool(loads) and not other,
                f"`{ix.var}` is read only by whole loads `x[{ix.var}]`"
                if loads and not other
                else (
                    f"`{ix.var}` is also read at line {other[0].start_point.row + 1} (a bound test or other "
                    "arithmetic)"
                    if other
                    else f"`{ix.var}` loads nothing"
                ),
                "Layout",
            ),
        ]
        facts += self._launch_facts(src, ix, grow=False)
        for ls in T.launches_of(src, ix.kernel.name):
            block = _block_of(src, ls)
            if block is None:
                continue
            own = {c.start for name, c in _local_sizes(src, ix.fn).items() if name == ix.block}
            tied = sorted(
                {
                    src.text_of(n)
                    for n in T.walk(ix.fn)
                    if n.type == "number_literal"
                    and n.start_byte not in own  # S's own value: the step edits it with the block
                    and T.eval_int(src.text_of(n), {}) in (block, block // 2)
                    and not any(
                        a.type == "array_declarator"
                        or (
                            a.type == "if_statement"
                            and _reads(src, a.child_by_field_name("condition"), ix.block)
                        )
                        for a in T.ancestors(n, ix.fn)
                    )
                }
            )
            facts.append(
                fact(
                    "extent_follows_block",
                    not tied,
                    "the kernel writes no number equal to the block or its half"
                    if not tied
                    else f"the kernel writes {', '.join(tied)} (launch block {block}): a tree sized by number",
                    "Layout",
                )
            )
        return facts

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        ix = self._index(src, site, scaled=False)
        if not all(p.holds for p in self.preconditions(src, site)):
            raise Refused(f"{self.name}: preconditions changed under the edit")
        loads, _ = self._single_loads(src, ix)
        s = ix.block
        edits = [
            edit.replace(ix.decl.child_by_field_name("value"), f"blockIdx.x * ({s} * {FACTOR}) + threadIdx.x")
        ]
        for sub in loads:
            arr = src.text_of(sub.child_by_field_name("argument"))
            edits.append(edit.replace(sub, f"{arr}[{ix.var}] + {arr}[{ix.var} + {s}]"))
        return edit.apply_edits(src, edits + self._launch_edits(src, ix, grow=False))


def _reads(src: CudaSource, node: ts.Node | None, name: str) -> bool:
    """Whether `node` reads the template block size `name` (a level that block size guards)."""
    return (
        name != "blockDim.x"
        and node is not None
        and re.search(rf"\b{re.escape(name)}\b", src.text_of(node)) is not None
    )
