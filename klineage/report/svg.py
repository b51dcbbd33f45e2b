"""A small SVG writer for the report: every plot is built from escaped elements, so kernel
names and messages with `<` or `&` can never break the page, and no plotting library is needed
to open it (the SVG is inlined in the HTML)."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

Attrs = dict[str, object]


def _attr(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return escape(str(v), quote=True)


class El:
    """One SVG element; children are elements or text (escaped when written)."""

    def __init__(self, tag: str, attrs: Attrs | None = None, children: Iterable[El | str] = ()) -> None:
        self.tag = tag
        self.attrs = {k.rstrip("_").replace("_", "-"): v for k, v in (attrs or {}).items() if v is not None}
        self.children: list[El | str] = list(children)

    def add(self, *children: El | str) -> El:
        self.children.extend(children)
        return self

    def __str__(self) -> str:
        attrs = "".join(f' {k}="{_attr(v)}"' for k, v in self.attrs.items())
        if not self.children:
            return f"<{self.tag}{attrs}/>"
        inner = "".join(str(c) if isinstance(c, El) else escape(c, quote=False) for c in self.children)
        return f"<{self.tag}{attrs}>{inner}</{self.tag}>"


def svg(width: float, height: float, title: str, *children: El) -> El:
    """The root element: sized in CSS pixels but scalable (viewBox), with an accessible title."""
    root = El(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {width:.0f} {height:.0f}",
            "width": f"{width:.0f}",
            "height": f"{height:.0f}",
            "role": "img",
            "class": "plot",
        },
    )
    return root.add(El("title", {}, [title]), *children)


def text(x: float, y: float, s: str, cls: str = "", anchor: str = "start", **attrs: object) -> El:
    return El(
        "text", {"x": float(x), "y": float(y), "class": cls or None, "text_anchor": anchor, **attrs}, [s]
    )


def link(href: str, *children: El) -> El:
    return El("a", {"href": href}, children)


def arrow_marker(marker_id: str) -> El:
    """An arrowhead definition; ids are per plot so several SVGs on one page never collide."""
    path = El("path", {"d": "M0,0 L8,4 L0,8 z", "class": "arrowhead"})
    marker = El(
        "marker",
        {
            "id": marker_id,
            "viewBox": "0 0 8 8",
            "refX": 8,
            "refY": 4,
            "markerWidth": 8,
            "markerHeight": 8,
            "orient": "auto-start-reverse",
        },
        [path],
    )
    return El("defs", {}, [marker])


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 times a power of ten)."""
    import math

    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks = [round(start, 10)]
    while ticks[-1] < hi - step * 1e-9:  # the last tick is at or above hi: every value is on the axis
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def fmt_num(v: float) -> str:
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"
