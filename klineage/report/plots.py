"""Small inline-SVG plots: a skill's effect across workloads (bars) and materialization curves
(speedup or accepted steps against the budget spent)."""

from __future__ import annotations

from dataclasses import dataclass

from klineage.report.svg import El, fmt_num, nice_ticks, svg, text

PALETTE = ("#2f6db5", "#d9822b", "#3c9a5f", "#b5475b", "#7a5cb8", "#6b7b8c")


@dataclass
class Bar:
    label: str
    value: float | None  # None: not measured (drawn as a hatched stub with a note)
    note: str = ""


def bar_plot(bars: list[Bar], title: str, unit: str, reference: float | None = None, width: int = 420) -> str:
    """Horizontal bars, one per workload; `reference` draws a dashed line (1.0 = no change)."""
    row, left, right, top = 22, 130, 70, 22
    height = top + row * max(1, len(bars)) + 26
    values = [b.value for b in bars if b.value is not None]
    lo = min([0.0, *values, *([reference] if reference is not None else [])])
    hi = max([*values, *([reference] if reference is not None else []), lo + 1e-9]) if values else 1.0
    if hi - lo < 1e-6:
        hi = lo + 1.0
    ticks = nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]
    span = (hi - lo) or 1.0
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + (v - lo) / span * plot_w

    parts: list[El] = [text(4, 14, unit, "plot-title")]
    if not bars:
        return str(svg(width, 44, title, *parts, text(4, 34, "no effect recorded", "note")))
    for t in ticks:
        parts.append(El("line", {"x1": x(t), "x2": x(t), "y1": top - 4, "y2": height - 22, "class": "grid"}))
        parts.append(text(x(t), height - 8, fmt_num(t), "tick", "middle"))
    if reference is not None and values:
        parts.append(
            El(
                "line",
                {
                    "x1": x(reference),
                    "x2": x(reference),
                    "y1": top - 4,
                    "y2": height - 22,
                    "class": "reference",
                },
            )
        )
    for i, b in enumerate(bars):
        y = top + i * row
        parts.append(text(left - 6, y + 14, b.label, "label", "end"))
        if b.value is None:
            parts.append(
                El("rect", {"x": left, "y": y + 4, "width": 18, "height": row - 8, "class": "bar-none"})
            )
            parts.append(text(left + 24, y + 15, b.note or "unmeasured", "note"))
            continue
        x0, x1 = sorted((x(max(lo, min(0.0, hi))), x(b.value)))
        parts.append(
            El(
                "rect",
                {
                    "x": x0,
                    "y": y + 4,
                    "width": max(1.0, x1 - x0),
                    "height": row - 8,
                    "class": "bar",
                    "fill": PALETTE[0],
                },
            )
        )
        parts.append(text(x1 + 4, y + 15, f"{fmt_num(b.value)}{(' ' + b.note) if b.note else ''}", "value"))
    return str(svg(width, height, title, *parts))


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    group: str = ""  # series of one group share a colour (e.g. curriculum / random / no skills)


def line_plot(
    series: list[Series], title: str, xlabel: str, ylabel: str, width: int = 520, height: int = 260
) -> str:
    """Step curves of the best value so far against the budget spent, one colour per group."""
    left, right, top, bottom = 52, 150, 24, 40
    xs = [p[0] for s in series for p in s.points] or [0.0, 1.0]
    ys = [p[1] for s in series for p in s.points] or [0.0, 1.0]
    xt = nice_ticks(min(0.0, *xs), max(xs))
    yt = nice_ticks(min(0.0, *ys), max(ys))
    pw, ph = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + (v - xt[0]) / ((xt[-1] - xt[0]) or 1.0) * pw

    def py(v: float) -> float:
        return top + ph - (v - yt[0]) / ((yt[-1] - yt[0]) or 1.0) * ph

    parts: list[El] = [text(left, 14, title, "plot-title")]
    for t in xt:
        parts.append(El("line", {"x1": px(t), "x2": px(t), "y1": top, "y2": top + ph, "class": "grid"}))
        parts.append(text(px(t), top + ph + 14, fmt_num(t), "tick", "middle"))
    for t in yt:
        parts.append(El("line", {"x1": left, "x2": left + pw, "y1": py(t), "y2": py(t), "class": "grid"}))
        parts.append(text(left - 4, py(t) + 4, fmt_num(t), "tick", "end"))
    parts.append(text(left + pw / 2, height - 6, xlabel, "axis", "middle"))
    parts.append(
        text(12, top + ph / 2, ylabel, "axis", "middle", transform=f"rotate(-90 12 {top + ph / 2:.0f})")
    )
    groups = list(dict.fromkeys(s.group or s.label for s in series))
    for s in series:
        g = groups.index(s.group or s.label)
        colour = PALETTE[g % len(PALETTE)]
        nudge = (g - (len(groups) - 1) / 2) * 2.5  # identical curves of different arms stay visible
        pts = sorted(s.points)
        if not pts:
            continue
        d = [f"M{px(pts[0][0]):.1f},{py(pts[0][1]) + nudge:.1f}"]
        for x1, y1 in pts[1:]:
            d.append(f"H{px(x1):.1f}V{py(y1) + nudge:.1f}")  # best-so-far is a step function
        parts.append(
            El("path", {"d": "".join(d), "class": "series", "stroke": colour}, [El("title", {}, [s.label])])
        )
        for x, y in pts:
            parts.append(El("circle", {"cx": px(x), "cy": py(y) + nudge, "r": 2.5, "fill": colour}))
    for i, g in enumerate(groups):
        y = top + 8 + i * 16
        parts.append(
            El(
                "rect",
                {
                    "x": left + pw + 12,
                    "y": y - 8,
                    "width": 10,
                    "height": 10,
                    "fill": PALETTE[i % len(PALETTE)],
                },
            )
        )
        parts.append(text(left + pw + 26, y + 1, g, "legend"))
    return str(svg(width, height, title, *parts))
