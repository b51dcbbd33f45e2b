"""Compile-time tile and block sizes (a tuning step): `constexpr int kThreads = 256;`,
`#define TILE 128`, or a template size fixed at the launch (`kernel<256><<<grid, 256>>>`).

Experts pick the larger sizes that fill the GPU better (more warps per block to hide latency,
larger tiles for reuse). The backward step moves one size to the next smaller power of two
(halving, never below 32): one skill with the choice in its carrier, not one per value — the
site records the original value and the chosen one. Uses follow consistently: a constant changes
at its definition (every use reads it); a template size changes at every launch of that kernel
that passes it, together with the same literal (and literal - 1) in those launches' grid and block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from klineage.deopt import _threads as T
from klineage.deopt.base import LaunchValues, Operator, Precondition, Refused, Site
from klineage.deopt.block_shape import block_size_facts, longest_walk
from klineage.deopt.row_shape import MAX_PER_THREAD
from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.model import CudaSource
from klineage.source.syntax import int_constants

#: names that read as a block/tile size; counts of scratch slots, bytes or limits are left alone
_SIZE_NAME = re.compile(
    r"(?i)(thread|block|tile|warps|rows|cols|items|chunk|^k?b[mnk]$|^k?t[mnk]$|^[mnk]_?tile)"
)
_NOT_SIZE = re.compile(r"(?i)(max|partial|smem|bytes|shared|stage|pad|align|^k?num)")
_THREADS_NAME = re.compile(r"(?i)(thread|block(?!_?(m|n|k)$))")
MIN_SIZE = 32
MAX_THREADS = 1024


def _is_size(name: str) -> bool:
    return bool(_SIZE_NAME.search(name)) and not _NOT_SIZE.search(name)


def _template_sites(src: CudaSource) -> list[tuple[str, int, str, int]]:
    """(kernel, template parameter index, parameter name, literal value) passed at launches."""
    out: dict[tuple[str, int, int], str] = {}
    for ls in src.launch_sites:
        k = src.kernel(ls.name)
        if k is None:
            continue
        for i, (tp, arg) in enumerate(zip(k.template_params, ls.template_args, strict=False)):
            if tp.kind != "value" or not re.fullmatch(r"\d+", arg.strip()):
                continue
            out.setdefault((k.name, i, int(arg)), tp.name)
    return [(k, i, name, v) for (k, i, v), name in out.items()]


def mentions(src: CudaSource, name: str) -> int:
    """How often `name` is written as an identifier (comments excluded), its definition included;
    a macro's replacement text counts too, it is not parsed into identifiers."""
    n = 0
    for node in S.walk(src.tree.root_node):
        if node.type == "identifier" and src.text_of(node) == name:
            n += 1
        elif node.type == "preproc_arg":
            n += len(re.findall(rf"\b{re.escape(name)}\b", src.text_of(node)))
    return n


def smaller(value: int) -> int:
    """The next smaller power of two (halving), at least MIN_SIZE."""
    p = 1 << (value.bit_length() - 1)
    nxt = p // 2 if p == value else p
    return max(nxt, MIN_SIZE)


class TileSize(Operator):
    name = "tile_size"
    category = "tuning"
    intent = (
        "Tune compile-time block and tile sizes upward (e.g. 128 -> 256 threads, 64 -> 128 tile) so blocks "
        "carry more warps and tiles more reuse; the chosen value is in the carrier."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        return self._sites(src, forward=False)

    def find_forward(self, src: CudaSource) -> list[Site]:
        return self._sites(src, forward=True)

    def _sites(self, src: CudaSource, forward: bool) -> list[Site]:
        sites = []
        for c in int_constants(src):
            if not _is_size(c.name) or not T.is_pow2(c.value):
                continue
            new = c.value * 2 if forward else smaller(c.value)
            if (not forward and c.value < 2 * MIN_SIZE) or (forward and c.value < MIN_SIZE):
                continue
            anchor_node = (
                c.node if c.node is not None else src.tree.root_node.descendant_for_byte_range(c.start, c.end)
            )
            sites.append(
                Site(
                    self.name,
                    src.anchor(anchor_node),
                    c.start,
                    c.end,
                    f"{c.kind} {c.name} = {c.value} -> {new}",
                    tuple(
                        sorted(
                            {
                                "name": c.name,
                                "kind": c.kind,
                                "original": str(c.value),
                                "chosen": str(new),
                                "forward": "1" if forward else "0",
                            }.items()
                        )
                    ),
                )
            )
        for kernel, i, pname, v in _template_sites(src):
            if not T.is_pow2(v) or (not forward and v < 2 * MIN_SIZE) or (forward and v < MIN_SIZE):
                continue
            new = v * 2 if forward else smaller(v)
            k = next(k for k in src.kernels if k.name == kernel)
            sites.append(
                Site(
                    self.name,
                    src.anchor(src.node_for(k)),
                    k.start,
                    k.end,
                    f"template {kernel}<{pname}={v}> -> {new}",
                    tuple(
                        sorted(
                            {
                                "name": pname,
                                "kind": "template",
                                "kernel": kernel,
                                "index": str(i),
                                "original": str(v),
                                "chosen": str(new),
                                "forward": "1" if forward else "0",
                            }.items()
                        )
                    ),
                )
            )
        return sites

    def _facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        d = site.details
        old, new = int(d["original"]), int(d["chosen"])
        threads = bool(_THREADS_NAME.search(d["name"])) or self._is_block_dim(src, site)
        facts = [
            Precondition(
                "power_of_two",
                T.is_pow2(old) and T.is_pow2(new),
                f"{old} -> {new}, both powers of two",
                "Layout",
            )
        ]
        if threads:
            ok = new % 32 == 0 and new <= MAX_THREADS
            facts.append(
                Precondition(
                    "block_multiple_of_32",
                    ok,
                    f"{d['name']} sizes thread blocks: {new} is a whole number of warps <= {MAX_THREADS}"
                    if ok
                    else f"{new} threads is not a valid multiple of 32 up to {MAX_THREADS}",
                    "Hardware",
                )
            )
        else:
            facts.append(
                Precondition("tile_at_least_warp", new >= MIN_SIZE, f"tile {new} >= {MIN_SIZE}", "Layout")
            )
        if threads and d["kind"] == "template":
            facts += self._covers_block(src, site, old, new)
        if d["kind"] != "template":
            read = mentions(src, d["name"]) > 1
            facts.append(
                Precondition(
                    "size_is_read",
                    read,
                    f"{d['name']} is read outside its definition"
                    if read
                    else f"nothing reads {d['name']}: changing it changes no kernel (a step that does nothing)",
                    "Layout",
                )
            )
        return facts

    def _covers_block(self, src: CudaSource, site: Site, old: int, new: int) -> list[Precondition]:
        """A template block size must not fall below the block the launch starts: the kernel would
        size its shared arrays and strides for fewer threads than run it. The launch's block is
        read after the edit (the same literal in it changes along) through the launcher's locals
        and the file's constants; one that cannot be computed is not judged."""
        consts = T.file_constants(src)
        blocks = []
        for ls in T.launches_of(src, site.details["kernel"]):
            targs = T.template_arg_nodes(src, ls)
            idx = int(site.details["index"])
            cfg = T.config_nodes(src, ls)
            if idx >= len(targs) or T.squash(src.text_of(targs[idx])) != str(old) or len(cfg) < 2:
                continue
            launcher = T.enclosing_launcher(src, ls)
            text = re.sub(rf"(?<![\w.]){old}(?![\w.])", str(new), src.text_of(cfg[1]))
            if launcher is not None:
                text = T.resolve_local(src, launcher, text)
                text = re.sub(r"^(?:dim3\s*)?[({]\s*([^,(){}]+?)\s*(?:,\s*1U?\s*)*[)}]$", r"\1", text.strip())
            b = T.eval_int(text, consts)
            if b is not None:
                blocks.append(b)
        if not blocks:
            return []
        ok = max(blocks) <= new
        return [
            Precondition(
                "template_size_covers_block",
                ok,
                f"{site.details['name']} = {new} covers the launch's block of {max(blocks)} threads"
                if ok
                else f"{site.details['name']} = {new} would fall below the launch's block of "
                f"{max(blocks)} threads",
                "Hardware",
            )
        ]

    def _is_block_dim(self, src: CudaSource, site: Site) -> bool:
        d = site.details
        if d["kind"] == "template":
            k = src.kernel(d["kernel"])
            return (
                k is not None
                and any(T.squash(b) == d["name"] for b in k.launch_bounds)
                or any(
                    ls.name == d["kernel"] and T.squash(ls.block) == d["original"] for ls in src.launch_sites
                )
            )
        return any(T.squash(ls.block) == d["name"] for ls in src.launch_sites)

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site)

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site)

    def shape_preconditions(
        self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]
    ) -> list[Precondition]:
        """A changed constant that sizes thread blocks must fit the bench sizes (block_shape's rule):
        the value steps are what the CPU judge cannot time, so a materializer keeps to the ones
        that leave the GPU's SMs and the block's threads work."""
        d = site.details
        if d["kind"] == "template" or not bench:
            return []
        return block_size_facts(src, d["name"], int(d["original"]), int(d["chosen"]), bench)

    def shape_effect(
        self, before: CudaSource, after: CudaSource, bench: Sequence[LaunchValues]
    ) -> str | None:
        """A block grown where each thread walked more than MAX_PER_THREAD elements of a
        block-strided row at every bench size, and walks fewer now (the CPU judge's keep rule for a
        value step it cannot time)."""
        old, new = longest_walk(before, bench), longest_walk(after, bench)
        if old is None or new is None or old <= MAX_PER_THREAD or new >= old:
            return None
        return f"at the bench sizes a thread walks {old} -> {new} elements of a block-strided loop"

    def _edit(self, src: CudaSource, site: Site) -> CudaSource:
        d = site.details
        old, new = int(d["original"]), int(d["chosen"])
        if d["kind"] in ("constexpr", "define"):
            c = next((c for c in int_constants(src) if c.name == d["name"] and c.value == old), None)
            if c is None:
                raise Refused(f"{self.name}: {d['name']} = {old} not found")
            return edit.apply_edits(src, [edit.Edit(c.start, c.end, str(new))])
        idx = int(d["index"])
        edits = []
        for ls in T.launches_of(src, d["kernel"]):
            targs = T.template_arg_nodes(src, ls)
            if idx >= len(targs) or T.squash(src.text_of(targs[idx])) != str(old):
                continue
            edits.append(edit.replace(targs[idx], str(new)))
            for cfg in T.config_nodes(src, ls)[:2]:
                text = src.text_of(cfg)
                changed = re.sub(rf"(?<![\w.]){old - 1}(?![\w.])", str(new - 1), text)
                changed = re.sub(rf"(?<![\w.]){old}(?![\w.])", str(new), changed)
                if changed != text:
                    edits.append(edit.replace(cfg, changed))
        if not edits:
            raise Refused(f"{self.name}: no launch of {d['kernel']} passes {old}")
        return edit.apply_edits(src, edits)

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return self._edit(src, site)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        return self._edit(src, site)
