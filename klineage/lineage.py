"""The lineage of a workload as a networkx DiGraph, from the simplest state reached to the expert.

Nodes are states (source hashes) with their depth and measured time; edges run from the
simpler state to the more optimized one and carry the operator, the skill and its effect. Every
accepted step between two recorded states is an edge; `taken` marks the steps of the walk's path
from the expert to the root (the ones skills are extracted from). A greedy walk records one path,
so its lineage is a chain; a beam walk (`klineage mine --beam N`) records the alternatives too,
and orders that reach the same state merge there, so its lineage is a DAG. The root is the end of
the taken path (the walker's simplest state: the deepest, first in beam order), found by
following the taken edges from the expert, never by guessing among states of equal depth.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import networkx as nx

from klineage.errors import KLineageError
from klineage.skills import skill_id_for
from klineage.store import lineage as lineage_rows
from klineage.store.db import Store
from klineage.timings import kernel_times


def build(store: Store, workload: str) -> nx.DiGraph:
    states = lineage_rows.states_with_results(store, workload)
    if not states:
        known = lineage_rows.state_workloads(store)
        raise KLineageError(f"no lineage for workload '{workload}' (known: {', '.join(known) or 'none'})")
    g = nx.DiGraph(workload=workload)
    timed = kernel_times(store, workload)  # GPU times imported apart, for states gated on the CPU
    for s in states:
        timing = (s["result"] or {}).get("timing") or {}
        apart = timed.get(s["state_hash"])
        g.add_node(
            s["state_hash"],
            depth=s["depth"],
            expert=bool(s["is_expert"]),
            time_ms=timing.get("median_ms") or (apart.median_ms if apart else None),
            **({"device": apart.device} if apart and not timing.get("median_ms") else {}),
        )
    steps = lineage_rows.accepted_edges(store, workload)  # the taken step last: the edge kept where two join
    for st in steps:
        if st["from_state"] not in g or st["to_state"] not in g:
            continue
        taken = bool(st["taken"])
        skill = skill_id_for(st["operator"], st["preconditions"] or []) if taken else None
        t_from = g.nodes[st["from_state"]].get("time_ms") if st["from_state"] in g else None
        t_to = g.nodes[st["to_state"]].get("time_ms") if st["to_state"] in g else None
        effect = f"{t_to / t_from:.2f}x" if t_from and t_to else "unmeasured"
        g.add_edge(
            st["to_state"],
            st["from_state"],
            operator=st["operator"],
            skill=skill,
            step_id=st["step_id"],
            site=(st["site"] or {}).get("summary", ""),
            roundtrip=st["roundtrip_ok"],
            effect=effect,
            taken=taken,
        )
    g.graph["expert"] = next(n for n, e in g.nodes(data="expert") if e)
    g.graph["root"] = _path_end(g, g.graph["expert"])
    naive_row = lineage_rows.naive_kernel(store, workload)
    naive = naive_row["kernel_hash"] if naive_row else None
    if naive in timed:
        g.graph["timing"] = timing_summary(
            g.nodes[g.graph["root"]].get("time_ms"),
            g.nodes[g.graph["expert"]].get("time_ms"),
            timed[naive].median_ms,
            timed[naive].torch_ms,
            timed[naive].device,
        )
    return g


def _path_end(g: nx.DiGraph, expert: str) -> str:
    """The state the taken edges lead to from the expert (the expert itself when none)."""
    simpler = {v: u for u, v, t in g.edges(data="taken") if t}  # optimized state -> its taken simplification
    node, seen = expert, {expert}
    while node in simpler and simpler[node] not in seen:
        node = simpler[node]
        seen.add(node)
    return node


def taken_chain(g: nx.DiGraph) -> nx.DiGraph:
    """The taken path alone, root to expert, with the graph's attributes: the whole lineage of a
    greedy walk, the path the skills come from in a beam walk's DAG."""
    chain = g.edge_subgraph([(u, v) for u, v, t in g.edges(data="taken") if t]).copy()
    chain.add_node(g.graph["expert"], **g.nodes[g.graph["expert"]])
    chain.graph.update(g.graph)
    return chain


def coverage(t_root: float, t_expert: float, t_naive: float) -> float | None:
    """DESIGN.md: ln(t_root / t_expert) / ln(t_naive / t_expert), the share of the expert's speedup
    over naive that the lineage explains; None when the expert is not faster than naive."""
    if min(t_root, t_expert, t_naive) <= 0 or t_naive <= t_expert:
        return None
    return math.log(t_root / t_expert) / math.log(t_naive / t_expert)


def mean_coverage(values: Sequence[float | None]) -> tuple[float, float] | None:
    """(mean, mean with each capped at 1.0) of the coverages that are defined; None when none is.
    Uncapped is the corpus figure's definition (a root slower than its naive kernel counts past
    1.0); capped keeps such a root from covering another workload's shortfall."""
    defined = [v for v in values if v is not None]
    if not defined:
        return None
    return sum(defined) / len(defined), sum(min(v, 1.0) for v in defined) / len(defined)


def timing_summary(
    root_ms: float | None, expert_ms: float | None, naive_ms: float, torch_ms: float | None, device: str
) -> dict[str, Any]:
    """Times of the lineage's ends and the naive kernel on one device, and the coverage they give."""
    out: dict[str, Any] = {
        "device": device,
        "naive_ms": naive_ms,
        "root_ms": root_ms,
        "expert_ms": expert_ms,
        "torch_ms": torch_ms,
        "coverage": None,
    }
    if root_ms and expert_ms:
        out["coverage"] = coverage(root_ms, expert_ms, naive_ms)
    return out


def to_json(g: nx.DiGraph) -> dict[str, Any]:
    return {
        "workload": g.graph["workload"],
        "root": g.graph["root"],
        "expert": g.graph["expert"],
        **({"timing": g.graph["timing"]} if "timing" in g.graph else {}),
        "nodes": [{"state": n, **d} for n, d in sorted(g.nodes(data=True), key=lambda x: -x[1]["depth"])],
        "edges": [
            {"from": u, "to": v, **d}
            for u, v, d in sorted(g.edges(data=True), key=lambda e: -g.nodes[e[0]]["depth"])
        ],
    }


def to_dot(g: nx.DiGraph) -> str:
    """The taken path in bold with skill labels; alternative steps (a beam walk's) dashed, by operator."""
    lines = [
        f'digraph "{g.graph["workload"]}" {{',
        "  rankdir=LR;",
        "  node [shape=box, fontname=monospace];",
    ]
    for n, d in g.nodes(data=True):
        label = (
            f"{n[:8]}\\ndepth {d['depth']}"
            + (" (expert)" if d["expert"] else "")
            + (" (root)" if n == g.graph["root"] and not d["expert"] else "")
            + (f"\\n{d['time_ms']:.4f} ms" if d.get("time_ms") else "")
        )
        lines.append(f'  "{n}" [label="{label}"];')
    for u, v, d in g.edges(data=True):
        if d.get("taken", True):
            lines.append(f'  "{u}" -> "{v}" [label="{d["skill"]}\\n{d["effect"]}", style=bold];')
        else:
            lines.append(
                f'  "{u}" -> "{v}" [label="{d["operator"]}", style=dashed, color=gray50, fontcolor=gray50];'
            )
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_png(g: nx.DiGraph, path: Path) -> None:
    """Draw the lineage left (simplest) to right (expert), one column per depth: the taken path on
    the middle row, edges labelled by operator and effect; alternative steps dashed and grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chain = set(taken_chain(g).nodes)
    top = max(d for _, d in g.nodes(data="depth"))
    pos: dict[str, tuple[float, float]] = {}
    for depth in range(top + 1):  # per column: the path's state first, the others below and above it
        column = sorted(
            (n for n, d in g.nodes(data="depth") if d == depth), key=lambda n: (n not in chain, n)
        )
        for i, n in enumerate(column):
            pos[n] = (float(top - depth), (-1.0) ** i * ((i + 1) // 2))
    rows = max((abs(y) for _, y in pos.values()), default=0.0)
    order = sorted(g.nodes, key=lambda n: -g.nodes[n]["depth"])
    fig, ax = plt.subplots(figsize=(max(6.0, 2.2 * (top + 1)), 3.0 + 1.4 * rows))
    labels = {
        n: f"{n[:8]}\n{'expert' if g.nodes[n]['expert'] else 'd' + str(g.nodes[n]['depth'])}" for n in order
    }
    colors = ["#dde8f6" if n in chain else "#eeeeee" for n in order]
    nx.draw_networkx_nodes(g, pos, nodelist=order, ax=ax, node_color=colors, node_size=1800, node_shape="s")
    nx.draw_networkx_labels(g, pos, labels, ax=ax, font_size=7, font_family="monospace")
    taken = [(u, v) for u, v, t in g.edges(data="taken") if t is not False]
    others = [(u, v) for u, v, t in g.edges(data="taken") if t is False]
    nx.draw_networkx_edges(g, pos, edgelist=taken, ax=ax, arrows=True, arrowsize=14, node_size=1800)
    nx.draw_networkx_edges(
        g,
        pos,
        edgelist=others,
        ax=ax,
        arrows=True,
        arrowsize=10,
        node_size=1800,
        style="dashed",
        edge_color="#999999",
    )
    edge_labels = {
        (u, v): f"{d['operator']}\n{d['effect']}" for u, v, d in g.edges(data=True) if d.get("taken", True)
    }
    nx.draw_networkx_edge_labels(g, pos, edge_labels, ax=ax, font_size=7, rotate=False, label_pos=0.5)
    ax.set_title(f"lineage of {g.graph['workload']}: simplest state → expert")
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def dump(g: nx.DiGraph, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(g), indent=1, default=str)
    if fmt == "dot":
        return to_dot(g)
    raise KLineageError(f"unknown lineage format '{fmt}' (known: json, dot, png)")
