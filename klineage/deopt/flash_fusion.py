"""Flash fusion: a three-phase attention (scores into a scratch, row softmax in place, weighted sum
over the scratch rows) becomes one kernel that never writes the scratch: a block per tile of query
rows walks the keys in tiles staged in shared memory, keeps per row a running max and sum (online
softmax) and accumulates the weighted terms in fp32, skipping tiles the mask removes entirely.

The forward step reads the three kernels on structure (`_three_phase`) and writes the fused kernel
(`_flash_emit`); the launcher launches it once instead of the three (the scratch argument is no
longer passed). The backward step reads a fused kernel written in the same element-accessor form
(per-element lambdas of the scratch index for the score, the row guard, the term and the output)
back into the three phases, with the launcher's scratch argument as the scratch.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _flash_emit as E
from klineage.deopt import _flash_read as R
from klineage.deopt import _flash_tc_emit as TC
from klineage.deopt import _threads as T
from klineage.deopt import _three_phase as TP
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source import nodes as N
from klineage.source.model import CudaSource


def _params(src: CudaSource, tp: TP.ThreePhase) -> tuple[str, str, list[str]]:
    """(fused parameter list, launch arguments, kernel names): the union of the three kernels'
    parameters by name, without the scratch; one name must mean one launch argument."""
    decls: dict[str, tuple[str, str]] = {}
    for k in (tp.producer.k, tp.softmax.k, tp.consumer.k):
        plist = N.func_declarator(k.node).child_by_field_name("parameters")
        pm = T.param_map(k.fn, k.launch)
        for pd in (c for c in plist.named_children if c.type == "parameter_declaration"):
            name = re.findall(r"\w+", src.text_of(pd))[-1]
            if name == k.scratch:
                continue
            arg = T.squash(pm.get(name, ""))
            if name in decls and decls[name][1] != arg:
                raise Refused(f"parameter '{name}' means '{decls[name][1]}' and '{arg}' in two kernels")
            decls.setdefault(name, (src.text_of(pd), arg))
    names = list(decls)
    args = {T.squash(a): a for k in (tp.producer.k, tp.softmax.k, tp.consumer.k) for a in k.launch.args}
    return ", ".join(d for d, _ in decls.values()), ", ".join(args[decls[n][1]] for n in names), names


def _statement(node: ts.Node) -> ts.Node:
    while node.parent is not None and node.type != "expression_statement":
        node = node.parent
    return node


class FlashFusion(Operator):
    name = "flash_fusion"
    category = "fusion"
    intent = (
        "Fuse scores, row softmax and weighted sum into one flash-style kernel: key tiles staged in "
        "shared memory, online softmax per query row, fp32 accumulators, the scratch never written"
    )
    mechanical_apply = True

    # ---- backward ----------------------------------------------------------------------------
    def find(self, src: CudaSource) -> list[Site]:
        return [
            self.site(src, f.launch, f"fused attention kernel {f.name}", kernel=f.name) for f in R.fused(src)
        ]

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        try:
            R.read(src, site.details["kernel"])
            return [
                Precondition("element_accessors", True, "score, row guard, term and output read", "Layout")
            ]
        except Refused as e:
            return [Precondition("element_accessors", False, str(e), "Layout")]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return R.unfuse(src, site.details["kernel"])

    # ---- forward -----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        out = []
        for ls in src.launch_sites:
            try:
                TP.read(src, ls)
            except Refused:
                continue
            out.append(self.site(src, ls, f"three-phase attention from {ls.name}", producer=ls.name))
        return out

    def _read(self, src: CudaSource, site: Site) -> TP.ThreePhase:
        first = next((ls for ls in src.launch_sites if ls.start == site.start), None)
        if first is None:
            raise Refused(f"{self.name}: no launch at the site")
        return TP.read(src, first)

    def _sizes(self, src: CudaSource, tp: TP.ThreePhase) -> tuple[str, str]:
        """The dot length and the output columns on the launcher's side."""
        p, c = tp.producer, tp.consumer
        dq = T.kernel_expr_in_launcher(src, p.k.fn, p.k.launch, p.extent, p.k.node)
        dv = T.kernel_expr_in_launcher(src, c.k.fn, c.k.launch, c.columns, c.k.node)
        if dq is None or dv is None:
            raise Refused(f"{self.name}: the dot length or the output columns are not launch-time sizes")
        return dq, dv

    def _element(self, src: CudaSource, tp: TP.ThreePhase) -> TC.Element | None:
        """The 16-bit element type when the tensor-core kernel applies (Q, K and V 16-bit)."""
        return TC.element(tp, (src.text_of(tp.producer.k.node), src.text_of(tp.consumer.k.node)))

    def _tensor_core(self, src: CudaSource, tp: TP.ThreePhase) -> list[Precondition]:
        """Head sizes and shared memory of the tensor-core kernel: mma.sync tiles are 16 deep, so a
        head size fixed in the source must be a multiple of 16 (launch-time sizes are padded); the
        least layout (one K/V stage) must fit."""
        dq, dv = self._sizes(src, tp)
        known = [
            int(x) for x in (T.strip_casts(dq).strip("()"), T.strip_casts(dv).strip("()")) if x.isdigit()
        ]
        sixteen = all(n % 16 == 0 for n in known)
        fits = len(known) < 2 or TC.smem_value(*known) <= TC.SMEM_LIMIT
        return [
            Precondition(
                "head_dim_16",
                sixteen,
                f"16-bit Q, K, V: head sizes {dq}, {dv} multiples of 16 for mma.sync m16n8k16",
                "Layout",
            ),
            Precondition(
                "smem_budget", fits, f"tensor-core tiles fit {TC.SMEM_LIMIT} bytes of shared memory", "Layout"
            ),
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        try:
            tp = self._read(src, site)
            tc = self._tensor_core(src, tp) if self._element(src, tp) else []
        except Refused as e:
            return [Precondition("three_phase", False, str(e), "Layout")]
        once = all(
            len(T.launches_of(src, k.fn.name)) == 1 for k in (tp.producer.k, tp.softmax.k, tp.consumer.k)
        )
        return [
            Precondition(
                "three_phase", True, "scores, row softmax and weighted sum over one scratch", "Layout"
            ),
            Precondition("launched_once", once, "each of the three kernels is launched only here", "Layout"),
            *tc,
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        tp = self._read(src, site)
        params, args, _ = _params(src, tp)
        p, c = tp.producer, tp.consumer
        dq, dv = self._sizes(src, tp)
        el = self._element(src, tp)
        broken = [f.reason for f in (self._tensor_core(src, tp) if el is not None else []) if not f.holds]
        if broken:
            raise Refused(f"{self.name}: " + "; ".join(broken))
        name = f"{p.k.fn.name}_flash"
        stream = p.k.launch.stream or ""
        if el is None:
            body, launch = E.kernel(tp, name, params), E.launch(tp, name, args, E.smem(dq, dv), stream)
        else:
            body = TC.kernel(tp, name, params, el)
            smem = f"(size_t){TC.smem_bytes(dq, dv)}"
            launch = E.launch(tp, name, args, smem, stream, TC.BR, TC.THREADS)
        stmts = [_statement(src.node_for(k.launch)) for k in (p.k, tp.softmax.k, c.k)]
        edits = [
            edit.replace(stmts[0], launch),
            edit.delete(src, stmts[1]),
            edit.delete(src, stmts[2]),
            edit.replace(p.k.node, body),
            edit.delete(src, tp.softmax.k.node),
            edit.delete(src, c.k.node),
        ]
        out = edit.apply_edits(src, edits)
        if "<math.h>" not in out.text and "<cmath>" not in out.text:
            out = CudaSource.from_text("#include <math.h>\n" + out.text, src.path)
        return out
