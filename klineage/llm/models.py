"""Which Claude models exist, read from the installed `anthropic` SDK rather than typed in here.

The SDK lists the model names it knows in `anthropic.types.Model` (a Literal) and the deprecated
ones in its `DEPRECATED_MODELS` table, so upgrading the SDK updates the list. The default is the
newest non-deprecated Sonnet-class model; a name the SDK does not know is bad input (exit 2),
because the API would answer it with a 404 only after the run had started.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from functools import lru_cache

from klineage.errors import KLineageError

DEFAULT_LINE = "sonnet"
_NAME = re.compile(r"^claude-(?P<line>[a-z]+)-(?P<major>\d+)(?:-(?P<minor>\d{1,2}))?(?:-(?P<date>\d{8}))?$")


class UnknownModelError(KLineageError):
    """A model name the installed SDK does not list (one line naming the known ones)."""


@dataclass(frozen=True)
class ModelName:
    """A parsed model id: its line (sonnet, opus, ...), version and release date (if pinned)."""

    name: str
    line: str
    version: tuple[int, int]
    date: str = ""


def parse(name: str) -> ModelName | None:
    """`claude-sonnet-5-5` -> (sonnet, (5, 5)); names of another shape (previews) -> None."""
    m = _NAME.match(name)
    if m is None:
        return None
    return ModelName(name, m["line"], (int(m["major"]), int(m["minor"] or 0)), m["date"] or "")


@lru_cache(maxsize=1)
def sdk_models() -> tuple[str, ...]:
    """Every model name the installed SDK lists, in its own order (newest first)."""
    from anthropic.types import Model

    names: list[str] = []
    for arg in typing.get_args(Model):
        names += [a for a in typing.get_args(arg) if isinstance(a, str)]
    return tuple(dict.fromkeys(names))


@lru_cache(maxsize=1)
def deprecated_models() -> dict[str, str]:
    """Deprecated names with their end-of-life date, as the SDK marks them (empty if it marks none)."""
    try:
        from anthropic._data import DEPRECATED_MODELS  # the table the SDK warns from
    except ImportError:
        return {}
    return dict(DEPRECATED_MODELS)


def default_model() -> str:
    """The newest non-deprecated Sonnet-class model the SDK lists (undated alias preferred)."""
    dep = deprecated_models()
    sonnets = [p for n in sdk_models() if n not in dep and (p := parse(n)) and p.line == DEFAULT_LINE]
    if not sonnets:
        raise UnknownModelError(f"the installed anthropic SDK lists no {DEFAULT_LINE} model; give --model")
    return max(sonnets, key=lambda p: (p.version, not p.date, p.date)).name


def check_model(name: str) -> str:
    """`name` if the SDK lists it; else UnknownModelError naming the known (non-deprecated) ones."""
    if name in sdk_models():
        return name
    dep = deprecated_models()
    known = [n for n in sdk_models() if n not in dep]
    raise UnknownModelError(f"unknown model '{name}' (the installed anthropic SDK knows: {', '.join(known)})")
