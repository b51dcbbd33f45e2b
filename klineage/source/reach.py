"""Which functions of a file can run, and whether an edit touches only those that cannot.

A device function nothing calls, or a kernel no host code launches or names, never runs: an
operator's edit inside it changes no kernel the gate measures, so the walk would record a step
(and a skill) that is no step at all. Host functions are the roots (the C-ABI entry and what it
calls are run from outside); a kernel is live when live host code names it (a launch, an
attribute call), a device function when a live function's body names it.
"""

from __future__ import annotations

import re
from collections import defaultdict

from klineage.source.model import CudaSource


def _names(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])(?<!->)[A-Za-z_]\w*", text))


def live_functions(src: CudaSource) -> set[str]:
    """Names of the functions of `src` that a launch from host code can run."""
    bodies: dict[str, list[str]] = defaultdict(list)
    for f in src.functions:
        bodies[f.name].append(src.text_of(f))
    live = {f.name for f in src.functions if f.kind in ("launcher", "host")}
    todo = list(live)
    while todo:
        name = todo.pop()
        for text in bodies.get(name, ()):
            for n in _names(text) & bodies.keys():
                if n not in live:
                    live.add(n)
                    todo.append(n)
    return live


def dead_edit(before: CudaSource, after: CudaSource) -> list[str]:
    """The functions an edit from `before` to `after` changes, when every one of them is a
    function of `before` that nothing runs; [] when the edit reaches live code or code outside
    functions (a declaration, a constant)."""
    spans = sorted((f.start, f.end) for f in before.functions)
    spans_after = sorted((f.start, f.end) for f in after.functions)
    if _outside(before.text, spans) != _outside(after.text, spans_after):
        return []
    old, new = _texts(before), _texts(after)
    changed = {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}
    if not changed or changed - old.keys():
        return []
    return sorted(changed) if not changed & live_functions(before) else []


def _texts(src: CudaSource) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for f in src.functions:
        out[f.name].append(src.text_of(f))
    return dict(out)


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without the function definitions' bytes, whitespace squashed."""
    data = text.encode()
    parts, at = [], 0
    for start, end in spans:
        parts.append(data[at:start])
        at = max(at, end)
    parts.append(data[at:])
    return re.sub(r"\s+", "", b"".join(parts).decode(errors="replace"))
