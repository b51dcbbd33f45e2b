"""Model prices in one place (USD per million tokens), and the cost of one call from its usage.

Taken on PRICES_AS_OF from Anthropic's pricing and model pages (platform.claude.com) for every
model the installed SDK lists. Cache rates are per model, not one factor: 5-minute cache writes
cost 1.25x input everywhere, but cache reads are 0.1x on most models, 0.05x on Opus and Sonnet
5.5 and 0.025x on Fable/Mythos 5.1. Haiku 5.5 bills a prompt over 100k tokens (input, cache reads
and writes together) at 5x, output included.

A dated id (claude-haiku-4-5-20251001) is priced as its family; a model with no row has an
*unknown* price: its calls cost None (reported as `unknown price`, never guessed), and
`--max-cost` is refused for it, since a limit that cannot be counted would not stop anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from klineage.llm.base import Usage

PRICES_AS_OF = "2026-12-03"
PRICES_SOURCE = "platform.claude.com/docs/en/about-claude/pricing and the model overview pages"


@dataclass(frozen=True)
class Price:
    """USD per million tokens; `long` applies to a whole call whose prompt exceeds `long_above`."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    long_above: int | None = None
    long: Price | None = None


def _p(inp: float, out: float, read: float) -> Price:
    return Price(inp, out, inp * 1.25, read)


PRICES: dict[str, Price] = {
    "claude-fable-5-2": _p(8.0, 40.0, 0.20),
    "claude-mythos-5-2": _p(8.0, 40.0, 0.20),
    "claude-fable-5-1": _p(10.0, 50.0, 0.25),
    "claude-mythos-5-1": _p(10.0, 50.0, 0.25),
    "claude-fable-5": _p(10.0, 50.0, 1.0),
    "claude-mythos-5": _p(10.0, 50.0, 1.0),
    "claude-opus-5-5": _p(4.0, 20.0, 0.20),
    "claude-opus-5": _p(5.0, 25.0, 0.50),
    "claude-opus-4-8": _p(5.0, 25.0, 0.50),
    "claude-opus-4-7": _p(5.0, 25.0, 0.50),
    "claude-opus-4-6": _p(5.0, 25.0, 0.50),
    "claude-opus-4-5": _p(5.0, 25.0, 0.50),
    "claude-sonnet-5-5": _p(2.0, 10.0, 0.10),  # cache reads cut from 0.20 on 2026-10-07
    "claude-sonnet-5": _p(2.0, 10.0, 0.20),
    "claude-sonnet-4-6": _p(3.0, 15.0, 0.30),
    "claude-haiku-5-5": Price(
        0.10, 0.50, 0.125, 0.01, long_above=100_000, long=Price(0.50, 2.50, 0.625, 0.05)
    ),
    "claude-haiku-4-5": _p(1.0, 5.0, 0.10),
}
_DATED = re.compile(r"^(?P<family>.+)-\d{8}$")


def price_for(model: str) -> Price | None:
    """The model's price, its family's for a dated id, else None (unknown: never guessed)."""
    if model in PRICES:
        return PRICES[model]
    m = _DATED.match(model)
    return PRICES.get(m["family"]) if m else None


def cost_of(model: str, usage: Usage) -> float | None:
    """USD for one call, or None when the model's price is unknown."""
    p = price_for(model)
    if p is None:
        return None
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    if p.long is not None and p.long_above is not None and prompt > p.long_above:
        p = p.long
    return (
        usage.input_tokens * p.input
        + usage.output_tokens * p.output
        + usage.cache_write_tokens * p.cache_write
        + usage.cache_read_tokens * p.cache_read
    ) / 1e6
