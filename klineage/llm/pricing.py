"""Model prices in one place (USD per million tokens), and the cost of one call from its usage.

Cache writes (5-minute TTL) cost 1.25x the input price and cache reads 0.1x, as Anthropic bills
them. A model id with a date suffix (claude-sonnet-4-5-20250929) matches its family by prefix. An
unknown model is priced like the dearest known one, so a `--max-cost` limit still stops early
rather than late.
"""

from __future__ import annotations

from dataclasses import dataclass

from klineage.llm.base import Usage

CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.10


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    @property
    def cache_write(self) -> float:
        return self.input * CACHE_WRITE_FACTOR

    @property
    def cache_read(self) -> float:
        return self.input * CACHE_READ_FACTOR


PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.80, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
}
FALLBACK = max(PRICES.values(), key=lambda p: p.output)


def price_for(model: str) -> tuple[Price, bool]:
    """(price, known): the longest family prefix of `model`, else the dearest known price."""
    best = max((k for k in PRICES if model.startswith(k)), key=len, default=None)
    return (PRICES[best], True) if best else (FALLBACK, False)


def cost_of(model: str, usage: Usage) -> float:
    p, _ = price_for(model)
    return (
        usage.input_tokens * p.input
        + usage.output_tokens * p.output
        + usage.cache_write_tokens * p.cache_write
        + usage.cache_read_tokens * p.cache_read
    ) / 1e6
