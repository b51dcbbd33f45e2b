"""The report's SVG writer and drawings on their own (fast, no store): escaping, tick choice,
the snake layout of a long lineage, budget curves as step functions."""

from __future__ import annotations

import re

from klineage.report.lineage_svg import NODE_W, Edge, Node, lineage_svg
from klineage.report.plots import Bar, Series, bar_plot, line_plot
from klineage.report.svg import El, nice_ticks
from tests.report_html import parse


def test_text_and_attributes_are_escaped() -> None:
    el = El("text", {"x": 1.0, "class": 'a"b', "text_anchor": "end"}, ["a < b && c > d"])
    assert str(el) == '<text x="1" class="a&quot;b" text-anchor="end">a &lt; b &amp;&amp; c &gt; d</text>'


def test_nice_ticks() -> None:
    assert nice_ticks(0, 1) == [0, 0.5, 1.0]
    assert nice_ticks(0, 2.3)[-1] >= 2.3 and nice_ticks(0, 2.3)[0] == 0
    assert nice_ticks(-4, 4) == [-4, -2, 0, 2, 4]


def _chain(n: int) -> tuple[list[Node], list[Edge]]:
    nodes = [Node(f"s{i}", f"depth {n - 1 - i}", [f"s{i}"], f"#s{i}", "state") for i in range(n)]
    edges = [Edge(f"s{i}", f"s{i + 1}", f"op{i}-<x>", "1.10x", f"#k{i}") for i in range(n - 1)]
    return nodes, edges


def _positions(svg: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="164"', svg)]


def test_long_lineage_wraps_as_a_snake() -> None:
    svg = lineage_svg(*_chain(9), slug="long", title="lineage", max_width=1200)
    tree = parse(svg)
    assert not tree.errors
    pos = _positions(svg)
    assert len(pos) == 9
    rows = sorted({y for _, y in pos})
    assert len(rows) == 3  # four per row at 1200 px
    first, second = [x for x, y in pos if y == rows[0]], [x for x, y in pos if y == rows[1]]
    assert first == sorted(first) and second == sorted(second, reverse=True)  # the second row runs back
    width = float(re.search(r'viewBox="0 0 (\d+)', svg).group(1))
    assert max(x for x, _ in pos) + NODE_W <= width
    assert "op0-&lt;x&gt;" in svg and svg.count('class="edge"') == 8
    assert set(tree.root.hrefs()) >= {f"#s{i}" for i in range(9)} | {f"#k{i}" for i in range(8)}


def test_single_state_lineage() -> None:
    svg = lineage_svg(*_chain(1), slug="one", title="lineage")
    assert len(_positions(svg)) == 1 and 'class="edge"' not in svg


def test_bar_plot_marks_unmeasured() -> None:
    svg = bar_plot([Bar("a", 2.0), Bar("b", None, "unmeasured (cpu)")], "t", "speedup", reference=1.0)
    assert 'class="bar"' in svg and 'class="bar-none"' in svg and "unmeasured (cpu)" in svg
    assert 'class="reference"' in svg
    assert "no effect recorded" in bar_plot([], "t", "speedup")


def test_line_plot_is_a_step_function_per_arm() -> None:
    svg = line_plot(
        [
            Series("cur", [(0, 1.0), (1, 1.5), (2, 2.0)], "curriculum"),
            Series("none", [(0, 1.0), (1, 1.0), (2, 1.2)], "no skills"),
        ],
        "t",
        "gated",
        "speedup",
    )
    paths = re.findall(r'<path d="([^"]+)" class="series" stroke="([^"]+)"', svg)
    assert len(paths) == 2 and paths[0][1] != paths[1][1]
    assert all(d.count("H") == 2 and d.count("V") == 2 for d, _ in paths)
    assert "curriculum" in svg and "no skills" in svg
