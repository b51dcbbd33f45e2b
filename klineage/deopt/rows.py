"""Row analysis the row-mapping operators share (warp_per_row, block_per_row, grid_reduce): the
reductions a row loop carries, the loops at a kernel's top, what a store writes, whether code
reaches block cooperation (directly or through helper functions), and the analysis record of a
block-per-row kernel. One public home, so no operator reads another operator's private names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Precondition
from klineage.source.model import CudaSource

WARP = 32
FULL_MASK = "0xffffffffu"
COLLECTIVE = re.compile(r"__shfl\w*_sync|__syncwarp|__reduce_\w+_sync|__ballot_sync|__any_sync|__all_sync")
_COOP = re.compile(
    r"__syncthreads\w*|\batomic\w+|__shared__|cooperative_groups|\bcg::|\bgridDim\b|\.\s*sync\s*\("
)
_CG = r"(?:(?:::)?cooperative_groups|cg)::"
#: declarations that only name cooperative groups (a namespace alias, the block group, its 32-thread
#: tiles): they synchronise nothing and share nothing, what the group's members do is matched
_INERT_CG = re.compile(
    rf"namespace\s+\w+\s*=\s*(?:::)?cooperative_groups\s*;"
    rf"|(?:const\s+)?(?:{_CG}thread_block|auto)\s+\w+\s*=\s*{_CG}this_thread_block\s*\(\s*\)\s*;"
    rf"|(?:const\s+)?(?:{_CG}thread_block_tile\s*<\s*32\s*>|auto)\s+\w+\s*=\s*"
    rf"{_CG}tiled_partition\s*<\s*32\s*>\s*\(\s*[\w:]+(?:\s*\(\s*\))?\s*\)\s*;"
    rf"|#include\s*<cooperative_groups[\w/.]*>"
)


class _BlockCoop:
    """Block cooperation in code: barriers, atomics, shared memory, grid reads, cooperative-groups
    calls; the declarations of `_INERT_CG` alone are not."""

    def search(self, text: str) -> re.Match[str] | None:
        return _COOP.search(_INERT_CG.sub("", text))


BLOCK_COOP = _BlockCoop()
LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")


@dataclass(frozen=True)
class Reduction:
    var: str
    kind: str  # sum | max | min | argmax | argmin
    fn: str  # the combining function for max/min ("" for sums)
    index: str = ""  # argmax/argmin: the variable holding the winner's position
    sentinel: bool = False  # argmax/argmin: a negative position means "none found" (a filtered scan)


def fact(name: str, holds: bool, reason: str, kind: str) -> Precondition:
    return Precondition(name, holds, reason, kind)


def fn_texts(src: CudaSource) -> dict[str, str]:
    """Device function name -> its text (to see through helper calls)."""
    return {f.name: src.text_of(f) for f in src.functions if f.kind == "device"}


def reaches(
    src: CudaSource, node: ts.Node, rx: re.Pattern[str] | _BlockCoop, helpers: dict[str, str]
) -> bool:
    """Whether `node` uses `rx` directly or through calls to device functions of this file (and
    the functions those call)."""
    if rx.search(src.text_of(node)):
        return True
    for call in T.calls_named(node, r".*"):
        name = T.call_name(call).split("::")[-1]
        body = helpers.get(name)
        if body is not None and (
            rx.search(body)
            or any(rx.search(helpers.get(m, "")) for m in re.findall(r"\b(\w+)\s*[<(]", body) if m != name)
        ):
            return True
    return False


def write_target(n: ts.Node) -> ts.Node | None:
    """What an assignment or ++/-- writes."""
    return n.child_by_field_name("left") or n.child_by_field_name("argument")


def outer_loops(body: ts.Node) -> list[ts.Node]:
    return [
        n
        for n in T.walk(body)
        if n.type in LOOPS and n != body and not any(a.type in LOOPS for a in T.ancestors(n, body))
    ]


def base_name(left: ts.Node) -> str | None:
    """The variable a store target is based on: `y` in `y[i]`, `*(y + i)`, `y->f`, `s.x`."""
    n: ts.Node | None = left
    while n is not None and n.type != "identifier":
        nxt = n.child_by_field_name("argument") or n.child_by_field_name("value")
        if nxt is None and n.named_children:
            nxt = n.named_children[0]
        n = nxt
    return n.text.decode() if n is not None and n.text else None


def is_pointer(fn: ts.Node, name: str) -> bool:
    """Whether `name` is declared in `fn` (parameter or local) as a pointer."""
    d = T.local_decls(fn).get(name)
    return d is not None and any(n.type == "pointer_declarator" for n in T.walk(d))


@dataclass
class BlockRows:
    """The analysis of a block-per-row kernel: its facts and, when they hold, the edit's parts."""

    kernel: str
    facts: list[Precondition]
    bound: str = ""  # the kernel parameter that counts rows (each launch's grid)
    block_syms: tuple[str, ...] = ()
    deleted: list[ts.Node] = field(default_factory=list)
    reducer_calls: list[ts.Node] = field(default_factory=list)
    self_assigns: list[ts.Node] = field(default_factory=list)  # `v = reduce(v, ...)`: deleted too
    unused_ranks: list[ts.Node] = field(
        default_factory=list
    )  # lane/warp declarations nothing reads afterwards
    #: shared array -> the value each warp stored in its slot (`if (lane == 0) s[warp] = v;`)
    slot_values: dict[str, str] = field(default_factory=dict)
    #: shared arrays whose slots a fold has since gathered into slot 0 (`s[0] = v;`)
    folded: set[str] = field(default_factory=set)
    #: broadcast initializers (`T b = s[0];` after a fold) -> the slot value one thread has itself
    broadcasts: list[tuple[ts.Node, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.holds for f in self.facts)


def warp_butterfly(red: Reduction) -> list[str]:
    """A warp all-reduce of `red`: xor shuffles, every lane ends with the same value."""
    shfl = f"__shfl_xor_sync({FULL_MASK}, {red.var}, kl_off)"
    head = f"for (int kl_off = {WARP // 2}; kl_off > 0; kl_off >>= 1)"
    if red.kind in ("argmax", "argmin"):  # the better value wins; a tie goes to the earlier position
        cmp = ">" if red.kind == "argmax" else "<"
        better = f"kl_v {cmp} {red.var} || (kl_v == {red.var} && kl_i < {red.index})"
        if red.sentinel:  # a lane that found nothing never wins; one that found something beats it
            better = f"kl_i >= 0 && ({red.index} < 0 || {better})"
        return [
            f"{head} {{ const auto kl_v = {shfl}; "
            f"const auto kl_i = __shfl_xor_sync({FULL_MASK}, {red.index}, kl_off); "
            f"if ({better}) "
            f"{{ {red.var} = kl_v; {red.index} = kl_i; }} }}"
        ]
    merge = f"{red.var} += {shfl}" if red.kind == "sum" else f"{red.var} = {red.fn}({red.var}, {shfl})"
    return [f"{head} {merge};"]
