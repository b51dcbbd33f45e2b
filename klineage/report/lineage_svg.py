"""The lineage of one workload drawn as inline SVG, from the simplest state to the expert.

States are boxes (depth, short hash, time when measured) linked to their code below; edges are
arrows labelled with the skill (linked to its card) and its effect. The chain is laid out left to
right and wraps in a snake so a long lineage still fits the page width.
"""

from __future__ import annotations

from dataclasses import dataclass

from klineage.report.svg import El, arrow_marker, link, svg, text

NODE_W, NODE_H, GAP_X, ROW_GAP, PAD = 164, 64, 156, 70, 16


@dataclass
class Node:
    key: str
    title: str
    lines: list[str]
    href: str
    kind: str  # root | expert | state


@dataclass
class Edge:
    src: str
    dst: str
    label: str
    effect: str
    href: str | None  # the skill card, when the skill is in the store


def _positions(nodes: list[Node], max_width: int) -> tuple[dict[str, tuple[float, float]], int, int]:
    per_row = max(1, (max_width - 2 * PAD + GAP_X) // (NODE_W + GAP_X))
    per_row = min(per_row, len(nodes)) or 1
    pos = {}
    for i, n in enumerate(nodes):
        row, col = divmod(i, per_row)
        if row % 2:
            col = per_row - 1 - col
        pos[n.key] = (PAD + col * (NODE_W + GAP_X), PAD + 18 + row * (NODE_H + ROW_GAP))
    rows = (len(nodes) + per_row - 1) // per_row
    width = 2 * PAD + per_row * NODE_W + (per_row - 1) * GAP_X
    height = PAD + 18 + rows * NODE_H + (rows - 1) * ROW_GAP + PAD
    return pos, width, height


def _edge(e: Edge, pos: dict[str, tuple[float, float]], marker: str) -> list[El]:
    (x0, y0), (x1, y1) = pos[e.src], pos[e.dst]
    if y0 == y1:  # same row: a horizontal arrow with the label above, the effect below
        a, b = (x0 + NODE_W, x1) if x1 > x0 else (x0, x1 + NODE_W)
        y = y0 + NODE_H / 2
        line = El(
            "line", {"x1": a, "y1": y, "x2": b, "y2": y, "class": "edge", "marker_end": f"url(#{marker})"}
        )
        mid = (a + b) / 2
        label = [
            text(mid, y - 8, e.label, "edge-label", "middle"),
            text(mid, y + 16, e.effect, "edge-effect", "middle"),
        ]
    else:  # next row: straight down, labels on the inner side (the row gap is empty there)
        x = x0 + NODE_W / 2
        line = El(
            "line",
            {
                "x1": x,
                "y1": y0 + NODE_H,
                "x2": x1 + NODE_W / 2,
                "y2": y1,
                "class": "edge",
                "marker_end": f"url(#{marker})",
            },
        )
        y = (y0 + NODE_H + y1) / 2
        side, anchor = (-8, "end") if x0 > PAD else (8, "start")
        label = [
            text(x + side, y - 2, e.label, "edge-label", anchor),
            text(x + side, y + 14, e.effect, "edge-effect", anchor),
        ]
    body = link(e.href, *label) if e.href else El("g", {}, label)
    return [line, body]


def lineage_svg(nodes: list[Node], edges: list[Edge], slug: str, title: str, max_width: int = 1200) -> str:
    """Nodes in order from the simplest state to the expert; edges from simpler to more optimized."""
    pos, width, height = _positions(nodes, max_width)
    marker = f"arrow-{slug}"
    parts: list[El] = [arrow_marker(marker), text(PAD, 16, "simplest state → expert", "plot-title")]
    for e in edges:
        if e.src in pos and e.dst in pos:
            parts.extend(_edge(e, pos, marker))
    for n in nodes:
        x, y = pos[n.key]
        box = El(
            "rect",
            {"x": x, "y": y, "width": NODE_W, "height": NODE_H, "rx": 6, "class": f"node node-{n.kind}"},
        )
        lines = [text(x + 8, y + 17, n.title, "node-title")]
        lines += [text(x + 8, y + 17 + 15 * (i + 1), s, "node-line") for i, s in enumerate(n.lines[:3])]
        parts.append(link(n.href, box, *lines))
    return str(svg(width, height, title, *parts))
