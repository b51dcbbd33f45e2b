"""Two-level block reduction: each warp reduces its lanes, one shared slot per warp, then the
slots are folded (by the first warp, or by every thread), instead of one shared-memory tree over
every thread of the block.

A block-wide tree halves the active threads each round with a `__syncthreads()` between rounds:
log2(B) block barriers and B shared slots. Reducing inside each warp first (shuffles, or a
per-warp tree with `__syncwarp()`) leaves one value per warp: 32 slots and one block barrier.

Backward (`remove`), on the run
`v = R(v); if (lane == 0) slots[warp] = v; __syncthreads(); v = t < B / 32 ? slots[lane] : 0;
if (warp == 0) v = R'(v);` (R a sum over a warp; what follows reads `v` on thread 0 only), or on
the every-thread form `apply` writes (an xor butterfly, one slot per warp, every thread folds the
slots in order: block_per_row's all-reduce): one tree `__shared__ T kl_tree[B]` over the block,
every thread's value at its own slot, sequential halving rounds, `v = kl_tree[0]` (every thread
gets the total, a superset of thread 0 getting it). Forward (`apply`), on that tree: the
every-thread two-level form.
Preconditions: the combine is a sum, the block is a power of two of at least 64 threads and the
tree is sized by the block (a template size each launch binds to its block, or the launch's block).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.deopt.block_per_row import BlockPerRow
from klineage.deopt.rows import Reduction, fact
from klineage.source import edit
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import named

_FOLDER = {"first_warp": "the first warp", "butterfly": "every thread", "thread0_fold": "thread 0"}
_MAXMIN = re.compile(r"\b(?:fmaxf|fminf|fmax|fmin|max|min)\s*\(")
_ZERO = r"(?:0|0\.0?f?|0\.f)"


@dataclass(frozen=True)
class _Run:
    """A two-level reduction of `var` in a kernel: the statements from the warp reduction to the
    first warp's fold (`first`..`last`), the warp reduction's function and the form."""

    kernel: Function
    fn: ts.Node
    first: ts.Node
    last: ts.Node
    var: str
    reducer: str  # the warp reduction's function ("" for the every-thread form)
    form: str  # first_warp | butterfly | thread0_fold (backward) | every_thread (the tree, forward)
    fold: _Fold | None = None  # the thread-0 fold's reading (thread0_fold only)


@dataclass(frozen=True)
class _Fold:
    """Thread 0's serial fold of the warps' slots (llm.c's softmax kernel4): its combiner
    (sum | max | min, "" when not one of them), the loop's bound text and the broadcast read after
    the second barrier (`T name = slots[0];`: its type and name)."""

    combine: str
    func: str  # the fold's function (`fmaxf`), "" for a sum
    bound: str
    ty: str
    name: str


_FOLD_COMBINE = {
    "+": "sum",
    "fmaxf": "max",
    "fmax": "max",
    "max": "max",
    "fminf": "min",
    "fmin": "min",
    "min": "min",
}


def _fold_of(src: CudaSource, body: ts.Node, slots: str) -> tuple[str, str, str] | None:
    """(combiner, its function, bound) of thread 0's block `{ T a = S[0 | threadIdx.x]; for (int i = 1; i < W;
    i++) a = f(a, S[i]); S[0] = a; }` over the slot array S, or None when it is not that fold."""
    if body.type != "compound_statement":
        return None
    nodes = named(body)
    st = [T.squash(src.text_of(x)) for x in nodes]
    a = T.decl_name(nodes[0]) if len(st) == 3 and nodes[0].type == "declaration" else None
    if a is None or not re.fullmatch(rf"{a}={slots}\[(?:0|threadIdx\.x)\]", _declarator(src, nodes[0])):
        return None
    m2 = re.fullmatch(
        r"for\(int(\w+)=1;\1<([^;]+);(?:\+\+\1|\1\+\+|\1\+=1)\)\{?(.*?);?\}?",
        st[1],
    )
    if m2 is None or st[2] != f"{slots}[0]={a};":
        return None
    i, bound, step = m2.groups()
    s = re.escape(f"{slots}[{i}]")
    if re.fullmatch(rf"{a}\+={s}|{a}={a}\+{s}", step):
        return "sum", "", bound
    m3 = re.fullmatch(rf"{a}=(\w+)\({a},{s}\)", step)
    comb = _FOLD_COMBINE.get(m3.group(1), "") if m3 else ""
    return (comb if comb != "sum" else ""), (m3.group(1) if m3 else ""), bound


def _declarator(src: CudaSource, decl: ts.Node) -> str:
    """A one-declarator declaration's declarator, squashed (`a=S[0]`); "" for several."""
    ds = decl.children_by_field_name("declarator")
    return T.squash(src.text_of(ds[0])) if len(ds) == 1 else ""


def _windows(fn: ts.Node, n: int) -> list[tuple[list[ts.Node], int]]:
    """(statements of a block, i) for every run of `n` consecutive statements st[i : i + n]."""
    out = []
    for block in T.walk(fn):
        if block.type == "compound_statement":
            st = named(block)
            out += [(st, i) for i in range(len(st) - n + 1)]
    return out


def _is_rank(src: CudaSource, fn: ts.Node, name: str, ops: tuple[str, ...]) -> bool:
    """`name` is `threadIdx.x OP 32` for one of `ops` (`%`/`&` lane, `/`/`>>` warp)."""
    init = T.init_text(src, fn, name)
    if init is None:
        return False
    t = T.squash(init)
    consts = T.file_constants(src)
    m = re.fullmatch(r"\(?threadIdx\.x\)?(%|&|/|>>)(\w+)", t)
    if m is None or m.group(1) not in ops:
        return False
    v = T.eval_int(m.group(2), consts)
    return v == {"%": 32, "&": 31, "/": 32, ">>": 5}[m.group(1)]


def _first_warp_runs(src: CudaSource, k: Function, fn: ts.Node) -> list[_Run]:
    out = []
    for st, i in _windows(fn, 5):
        a, b, c, d, e = (T.squash(src.text_of(x)) for x in st[i : i + 5])
        m1 = re.fullmatch(r"(\w+)=(\w+)(?:<[^;]*>)?\(\1\);", a)
        if m1 is None:
            continue
        v, r = m1.groups()
        m2 = re.fullmatch(rf"if\((\w+)==0\)\{{?(\w+)\[(\w+)\]={v};\}}?", b)
        m4 = m2 and re.fullmatch(
            rf"{v}=\(?threadIdx\.x<blockDim\.x/(\w+)\)?\?{m2.group(2)}\[{m2.group(1)}\]:{_ZERO};", d
        )
        m5 = m2 and re.fullmatch(rf"if\({m2.group(3)}==0\)\{{?{v}={r}(?:<[^;]*>)?\({v}\);\}}?", e)
        if not (m2 and m4 and m5 and c == "__syncthreads();"):
            continue
        lane, warp = m2.group(1), m2.group(3)
        if T.eval_int(m4.group(1), T.file_constants(src)) != 32:
            continue
        if _is_rank(src, fn, lane, ("%", "&")) and _is_rank(src, fn, warp, ("/", ">>")):
            out.append(_Run(k, fn, st[i], st[i + 4], v, r, "first_warp"))
    return out


def _thread0_runs(src: CudaSource, k: Function, fn: ts.Node) -> list[_Run]:
    """Warp reductions, one slot per warp stored by lane 0, then thread 0 folds the slots serially
    into slot 0 and every thread reads it back: `v = R(v); if (lane == 0) S[warp] = v;
    __syncthreads(); if (threadIdx.x == 0) { fold }; __syncthreads(); T b = S[0];`."""
    out = []
    for st, i in _windows(fn, 6):
        a, b, c, _, e, f = (T.squash(src.text_of(x)) for x in st[i : i + 6])
        m1 = re.fullmatch(r"(\w+)=(\w+)(?:<[^;]*>)?\(\1\);", a)
        if m1 is None or c != "__syncthreads();" or e != "__syncthreads();":
            continue
        v, r = m1.groups()
        m2 = re.fullmatch(rf"if\((\w+)==0\)\{{?(\w+)\[(\w+)\]={v};\}}?", b)
        d = st[i + 3]
        cond = d.child_by_field_name("condition") if d.type == "if_statement" else None
        if m2 is None or cond is None or d.child_by_field_name("alternative") is not None:
            continue
        if not re.fullmatch(r"\(?threadIdx\.x==0\)?", T.squash(src.text_of(cond))):
            continue
        lane, slots, warp = m2.groups()
        fold = _fold_of(src, d.child_by_field_name("consequence"), slots)
        bcast = st[i + 5]
        name = T.decl_name(bcast) if bcast.type == "declaration" else None
        if fold is None or name is None or _declarator(src, bcast) != f"{name}={slots}[0]":
            continue
        if _is_rank(src, fn, lane, ("%", "&")) and _is_rank(src, fn, warp, ("/", ">>")):
            head = bcast.child_by_field_name("declarator")
            ty = src.text_bytes[bcast.start_byte : head.start_byte].decode().strip()
            info = _Fold(fold[0], fold[1], fold[2], ty, name)
            out.append(_Run(k, fn, st[i], st[i + 5], v, r, "thread0_fold", info))
    return out


def _butterfly_runs(src: CudaSource, k: Function, fn: ts.Node) -> list[_Run]:
    """The every-thread two-level form (block_per_row's all-reduce, what `apply` writes): an xor
    butterfly of `v`, then a block with one shared slot per warp that every thread folds in order."""
    out = []
    for st, i in _windows(fn, 2):
        m = re.fullmatch(
            r"for\(int(\w+)=16;\1>0;\1>>=1\)(\w+)\+=__shfl_xor_sync\(\w+,\2,\1\);",
            T.squash(src.text_of(st[i])),
        )
        if m is None or st[i + 1].type != "compound_statement":
            continue
        v = m.group(2)
        inner = [T.squash(src.text_of(x)) for x in named(st[i + 1])]
        slots = T.decl_name(named(st[i + 1])[0]) if inner and inner[0].startswith("__shared__") else None
        want = [
            rf"if\(\(threadIdx\.x&31\)==0\){slots}\[threadIdx\.x>>5\]={v};",
            r"__syncthreads\(\);",
            rf"{v}={slots}\[0\];",
            rf"for\(int(\w+)=1;\1<[^;]+;\+\+\1\){v}\+={slots}\[\1\];",
            r"__syncthreads\(\);",
        ]
        if (
            slots
            and len(inner) == 6
            and all(re.fullmatch(w, t) for w, t in zip(want, inner[1:], strict=True))
        ):
            out.append(_Run(k, fn, st[i], st[i + 1], v, "", "butterfly"))
    return out


def _tree_runs(src: CudaSource, k: Function, fn: ts.Node) -> list[_Run]:
    """The every-thread form `remove` writes (and `apply` reads): a block-wide sequential tree."""
    out = []
    for st, i in _windows(fn, 5):
        a, b, c, d, e = (T.squash(src.text_of(x)) for x in st[i : i + 5])
        shared = st[i].type == "declaration" and a.startswith("__shared__")
        arr = T.decl_name(st[i]) if shared else None
        m2 = arr and re.fullmatch(rf"{arr}\[threadIdx\.x\]=(\w+);", b)
        if not (m2 and c == "__syncthreads();"):
            continue
        v = m2.group(1)
        tree = (
            rf"for\(unsignedint(\w+)=blockDim\.x/2;\1>0;\1>>=1\)\{{if\(threadIdx\.x<\1\){arr}\[threadIdx\.x\]"
            rf"\+={arr}\[threadIdx\.x\+\1\];__syncthreads\(\);\}}"
        )
        if re.fullmatch(tree, d) and e == f"{v}={arr}[0];":
            out.append(_Run(k, fn, st[i], st[i + 4], v, "", "every_thread"))
    return out


class TwoLevelReduce(Operator):
    name = "two_level_reduce"
    category = "smem_layout"
    intent = (
        "Reduce a block in two levels (each warp reduces its lanes, one shared slot per warp, the slots "
        "folded once) instead of one shared-memory tree over every thread: one block barrier instead "
        "of log2(B), 32 shared slots instead of B."
    )
    mechanical_apply = True

    def _runs(self, src: CudaSource, forms: tuple[str, ...]) -> list[_Run]:
        out = []
        for k in src.kernels:
            fn = src.node_for(k)
            if "first_warp" in forms:
                out += _first_warp_runs(src, k, fn) + _butterfly_runs(src, k, fn)
                out += _thread0_runs(src, k, fn)
            if "every_thread" in forms:
                out += _tree_runs(src, k, fn)
        return out

    def _at(self, src: CudaSource, site: Site, forms: tuple[str, ...]) -> _Run:
        run = next((r for r in self._runs(src, forms) if r.first.start_byte == site.start), None)
        if run is None:
            raise Refused(f"{self.name}: no two-level reduction at line {site.line}")
        return run

    def find(self, src: CudaSource) -> list[Site]:
        return [
            self.site(
                src,
                r.first,
                f"two-level block {r.fold.combine or 'reduction' if r.fold else 'sum'} of {r.var} "
                f"({r.reducer or 'xor butterfly'} per warp, "
                f"{_FOLDER[r.form]} folds) in {r.kernel.name}",
            )
            for r in self._runs(src, ("first_warp",))
        ]

    def _block(self, src: CudaSource, run: _Run) -> tuple[str | None, list[Precondition]]:
        """The tree's size text (a template size bound to the block, or the launch's block) and the facts."""
        launches = T.launches_of(src, run.kernel.name)
        blocks = {
            T.eval_int(src.text_of(T.config_nodes(src, ls)[1]), T.file_constants(src)) for ls in launches
        }
        block = next(iter(blocks)) if len(blocks) == 1 else None
        ok = block is not None and block >= 64 and block & (block - 1) == 0
        facts = [
            fact(
                "power_of_two_block",
                ok,
                f"every launch runs blocks of {block} threads"
                if ok
                else "the launches' block is not one power of two of at least 64 threads known in the file",
                "Layout",
            )
        ]
        size = None
        if ok:
            names = [
                tp.name
                for tp in run.kernel.template_params
                if all(
                    T.eval_int(T.template_map(src, run.kernel, ls).get(tp.name, ""), T.file_constants(src))
                    == block
                    for ls in launches
                )
            ]
            size = names[0] if names else str(block)
        return size, facts

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        run = self._at(src, site, ("first_warp",))
        if run.form == "butterfly":  # a sum by its shape; every thread ends with the total, as in the tree
            return [
                fact(
                    "sum_combine",
                    True,
                    "an xor butterfly and a fold of the warps' slots by addition",
                    "Data types",
                )
            ] + self._block(src, run)[1]
        if run.form == "thread0_fold":
            return self._thread0_facts(src, run) + self._block(src, run)[1]
        helper = next((f for f in src.functions if f.name == run.reducer), None)
        text = src.text_of(src.node_for(helper)) if helper is not None else ""
        is_sum = helper is not None and "+" in text and _MAXMIN.search(text) is None
        facts = [
            fact(
                "sum_combine",
                is_sum,
                f"{run.reducer} sums a warp"
                if is_sum
                else f"{run.reducer} is not a sum over a warp (or not in the file)",
                "Data types",
            )
        ]
        after = [
            n
            for n in T.walk(run.fn)
            if n.type == "identifier"
            and src.text_of(n) == run.var
            and n.start_byte > run.last.end_byte
            and not any(
                a.type == "if_statement"
                and re.fullmatch(
                    r"\(?(?:threadIdx\.x|tid)==0\)?",
                    T.squash(src.text_of(a.child_by_field_name("condition"))),
                )
                for a in T.ancestors(n, run.fn)
            )
        ]
        facts.append(
            fact(
                "thread0_reads_result",
                not after,
                f"only thread 0 reads {run.var} afterwards"
                if not after
                else f"{run.var} is read by other threads at line {after[0].start_point.row + 1}",
                "Layout",
            )
        )
        return facts + self._block(src, run)[1]

    @staticmethod
    def _thread0_facts(src: CudaSource, run: _Run) -> list[Precondition]:
        """The thread-0 fold: one combiner shared by the warp reduction and the fold, a fold over
        exactly the block's warps, and no read of the warp-level value after the broadcast (it
        held a warp's partial, the tree leaves the block's total)."""
        fold = run.fold
        assert fold is not None
        helper = next((f for f in src.functions if f.name == run.reducer), None)
        text = src.text_of(src.node_for(helper)) if helper is not None else ""
        kind = ("sum" if "+" in text and not _MAXMIN.search(text) else "") if text else ""
        if text and (m := _MAXMIN.search(text)):
            kind = _FOLD_COMBINE.get(m.group(0).rstrip("( \t"), "")
        same = bool(fold.combine) and kind == fold.combine
        warps = T.squash(T.resolve_local(src, run.fn, fold.bound))
        consts = T.file_constants(src)
        launches = T.launches_of(src, run.kernel.name)
        blocks = {T.eval_int(src.text_of(T.config_nodes(src, ls)[1]), consts) for ls in launches}
        covers = re.fullmatch(r"\(?blockDim\.x/32\)?", warps) is not None or (
            len(blocks) == 1 and None not in blocks and T.eval_int(warps, consts) == next(iter(blocks)) // 32
        )
        later = [
            n
            for n in T.walk(run.fn)
            if n.type == "identifier" and src.text_of(n) == run.var and n.start_byte > run.last.end_byte
        ]
        return [
            fact(
                "fold_matches_warp_reduction",
                same,
                f"{run.reducer} and thread 0's fold both take the {fold.combine}"
                if same
                else f"thread 0's fold ({fold.combine or 'unrecognised'}) and {run.reducer} "
                f"({kind or 'unrecognised'}) are not one combiner",
                "Data types",
            ),
            fact(
                "fold_covers_the_warps",
                covers,
                f"the fold reads one slot per warp of the block ({fold.bound})"
                if covers
                else f"the fold's bound {fold.bound} is not the block's warp count",
                "Layout",
            ),
            fact(
                "warp_value_unread",
                not later,
                f"{run.var} is not read after the broadcast"
                if not later
                else f"{run.var} (a warp's partial) is read at line {later[0].start_point.row + 1}",
                "Layout",
            ),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        run = self._at(src, site, ("first_warp",))
        if run.form == "thread0_fold":
            return self._remove_thread0(src, run)
        size, _ = self._block(src, run)
        ty = _type_of(src, run.fn, run.var)
        ind = edit.indent_of(src, run.first)
        v = run.var
        lines = [
            f"__shared__ {ty} kl_tree[{size}];  // one slot per thread of the block",
            f"kl_tree[threadIdx.x] = {v};",
            "__syncthreads();",
            "for (unsigned int kl_s = blockDim.x / 2; kl_s > 0; kl_s >>= 1) {",
            "    if (threadIdx.x < kl_s) kl_tree[threadIdx.x] += kl_tree[threadIdx.x + kl_s];",
            "    __syncthreads();",
            "}",
            f"{v} = kl_tree[0];",
        ]
        return edit.apply_edits(
            src, [edit.Edit(run.first.start_byte, run.last.end_byte, f"\n{ind}".join(lines))]
        )

    def _remove_thread0(self, src: CudaSource, run: _Run) -> CudaSource:
        """The run becomes a block-wide tree of the warp reduction's input (the fold's combiner),
        read back by every thread, the broadcast then declared from it (as the first-warp form's
        tree leaves it, which block_per_row reads); a name not yet declared in the
        kernel (two reductions in one kernel each get their own tree: the second cannot overwrite
        slot 0 while a thread still reads the first)."""
        fold = run.fold
        assert fold is not None
        size, _ = self._block(src, run)
        taken = set(T.local_decls(run.fn))
        tree = next(n for n in (f"kl_tree{j or ''}" for j in range(len(taken) + 1)) if n not in taken)
        ty = _type_of(src, run.fn, run.var)
        a, b = f"{tree}[threadIdx.x]", f"{tree}[threadIdx.x + kl_s]"
        step = f"{a} += {b};" if fold.combine == "sum" else f"{a} = {fold.func}({a}, {b});"
        lines = [
            f"__shared__ {ty} {tree}[{size}];  // one slot per thread of the block",
            f"{tree}[threadIdx.x] = {run.var};",
            "__syncthreads();",
            "for (unsigned int kl_s = blockDim.x / 2; kl_s > 0; kl_s >>= 1) {",
            f"    if (threadIdx.x < kl_s) {step}",
            "    __syncthreads();",
            "}",
            f"{run.var} = {tree}[0];",
            f"{fold.ty} {fold.name} = {run.var};",
        ]
        ind = edit.indent_of(src, run.first)
        return edit.apply_edits(
            src, [edit.Edit(run.first.start_byte, run.last.end_byte, f"\n{ind}".join(lines))]
        )

    def find_forward(self, src: CudaSource) -> list[Site]:
        return [
            self.site(src, r.first, f"block-wide tree of {r.var} in {r.kernel.name}", forward="1")
            for r in self._runs(src, ("every_thread",))
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") != "1":
            return self.removal_preconditions(src, site)
        run = self._at(src, site, ("every_thread",))
        return self._block(src, run)[1]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        run = self._at(src, site, ("every_thread",))
        if not all(p.holds for p in self.preconditions(src, site)):
            raise Refused(f"{self.name}: preconditions changed under the edit")
        lines = BlockPerRow._all_reduce(src, Reduction(run.var, "sum", ""), T.local_decls(run.fn))
        ind = edit.indent_of(src, run.first)
        text = f"\n{ind}".join(x.replace("\n", f"\n{ind}") for x in lines)
        return edit.apply_edits(src, [edit.Edit(run.first.start_byte, run.last.end_byte, text)])


def _type_of(src: CudaSource, fn: ts.Node, var: str) -> str:
    d = T.local_decls(fn).get(var)
    decl = d.parent if d is not None else None
    ty = decl.child_by_field_name("type") if decl is not None and decl.type == "declaration" else None
    return src.text_of(ty) if ty is not None else "float"
