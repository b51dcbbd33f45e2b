"""The lineage of a workload as a networkx DiGraph, from the simplest state reached to the expert.

Nodes are states (source hashes) with their depth and measured time; edges run from the
simpler state to the more optimized one and carry the operator, the skill and its effect.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import networkx as nx

from klineage.errors import KLineageError
from klineage.skills import skill_id_for
from klineage.store.db import Store
from klineage.timings import kernel_times


def build(store: Store, workload: str) -> nx.DiGraph:
    states = store.rows(
        "SELECT st.state_hash, st.depth, st.is_expert, g.result FROM states st LEFT JOIN gate_runs g ON g.gate_key = st.gate_key"
        " WHERE st.workload = ? ORDER BY st.depth", [workload])
    if not states:
        known = [r["workload"] for r in store.rows("SELECT DISTINCT workload FROM states ORDER BY 1")]
        raise KLineageError(f"no lineage for workload '{workload}' (known: {', '.join(known) or 'none'})")
    g = nx.DiGraph(workload=workload)
    timed = kernel_times(store, workload)  # GPU times imported apart, for states gated on the CPU
    for s in states:
        timing = (s["result"] or {}).get("timing") or {}
        apart = timed.get(s["state_hash"])
        g.add_node(s["state_hash"], depth=s["depth"], expert=bool(s["is_expert"]),
                   time_ms=timing.get("median_ms") or (apart.median_ms if apart else None),
                   **({"device": apart.device} if apart and not timing.get("median_ms") else {}))
    steps = store.rows(
        "SELECT step_id, from_state, to_state, operator, site, roundtrip_ok, preconditions FROM steps"
        " WHERE workload = ? AND taken", [workload])
    for st in steps:
        skill = skill_id_for(st["operator"], st["preconditions"] or [])
        t_from = g.nodes[st["from_state"]].get("time_ms") if st["from_state"] in g else None
        t_to = g.nodes[st["to_state"]].get("time_ms") if st["to_state"] in g else None
        effect = f"{t_to / t_from:.2f}x" if t_from and t_to else "unmeasured"
        g.add_edge(st["to_state"], st["from_state"], operator=st["operator"], skill=skill, step_id=st["step_id"],
                   site=(st["site"] or {}).get("summary", ""), roundtrip=st["roundtrip_ok"], effect=effect)
    depth = max(d for _, d in g.nodes(data="depth"))
    g.graph["root"] = next(n for n, d in g.nodes(data="depth") if d == depth)
    g.graph["expert"] = next(n for n, e in g.nodes(data="expert") if e)
    naive = store.scalar("SELECT kernel_hash FROM kernels WHERE workload = ? AND role = 'naive' LIMIT 1", [workload])
    if naive in timed:
        g.graph["timing"] = timing_summary(g.nodes[g.graph["root"]].get("time_ms"), g.nodes[g.graph["expert"]].get("time_ms"),
                                           timed[naive].median_ms, timed[naive].torch_ms, timed[naive].device)
    return g


def coverage(t_root: float, t_expert: float, t_naive: float) -> float | None:
    """DESIGN.md: ln(t_root / t_expert) / ln(t_naive / t_expert), the share of the expert's speedup
    over naive that the lineage explains; None when the expert is not faster than naive."""
    if min(t_root, t_expert, t_naive) <= 0 or t_naive <= t_expert:
        return None
    return math.log(t_root / t_expert) / math.log(t_naive / t_expert)


def timing_summary(root_ms: float | None, expert_ms: float | None, naive_ms: float, torch_ms: float | None,
                   device: str) -> dict[str, Any]:
    """Times of the lineage's ends and the naive kernel on one device, and the coverage they give."""
    out: dict[str, Any] = {"device": device, "naive_ms": naive_ms, "root_ms": root_ms, "expert_ms": expert_ms,
                           "torch_ms": torch_ms, "coverage": None}
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
        "edges": [{"from": u, "to": v, **d} for u, v, d in sorted(g.edges(data=True), key=lambda e: -g.nodes[e[0]]["depth"])],
    }


def to_dot(g: nx.DiGraph) -> str:
    lines = [f'digraph "{g.graph["workload"]}" {{', "  rankdir=LR;", "  node [shape=box, fontname=monospace];"]
    for n, d in g.nodes(data=True):
        label = f"{n[:8]}\\ndepth {d['depth']}" + (" (expert)" if d["expert"] else "") + (
            f"\\n{d['time_ms']:.4f} ms" if d.get("time_ms") else "")
        lines.append(f'  "{n}" [label="{label}"];')
    for u, v, d in g.edges(data=True):
        lines.append(f'  "{u}" -> "{v}" [label="{d["skill"]}\\n{d["effect"]}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_png(g: nx.DiGraph, path: Path) -> None:
    """Draw the chain left (simplest) to right (expert), edges labelled by skill and effect."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = sorted(g.nodes, key=lambda n: -g.nodes[n]["depth"])
    pos = {n: (i, 0.0) for i, n in enumerate(order)}
    fig, ax = plt.subplots(figsize=(max(6.0, 2.2 * len(order)), 3.0))
    labels = {n: f"{n[:8]}\n{'expert' if g.nodes[n]['expert'] else 'd' + str(g.nodes[n]['depth'])}" for n in order}
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color="#dde8f6", node_size=1800, node_shape="s")
    nx.draw_networkx_labels(g, pos, labels, ax=ax, font_size=7, font_family="monospace")
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, arrowsize=14, node_size=1800)
    edge_labels = {(u, v): f"{d['operator']}\n{d['effect']}" for u, v, d in g.edges(data=True)}
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
