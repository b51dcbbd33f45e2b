"""The provider interface: `complete(system, messages) -> Completion`, a cost ledger, a registry.

A provider is a small class registered by name. It owns transport, retries and accounting; what
to ask (prompt building) belongs to its caller, so the materializer and the LLM operator share it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from klineage.errors import KLineageError

#: A system prompt: plain text, or (static first) blocks of text where `cache` marks the end of a
#: prefix the provider may cache.
SystemBlock = tuple[str, bool]
Message = dict[str, Any]


#: The CLI's exit code for a run that a provider failure ended (DESIGN.md, CLI contract).
EXIT_PROVIDER_FAILED = 3


class LLMError(Exception):
    """A provider failure: a call that failed after its retries (overload, timeouts, network,
    malformed replies) or that the API refused (401/403/404/400). The run ends cleanly, its row
    closed with this message, and the CLI exits EXIT_PROVIDER_FAILED."""


class ContextTooLong(LLMError):
    """The API refused the prompt as longer than the model's context (400): shrink and retry once."""


class MissingKeyError(KLineageError):
    """No API key: bad input, one clear line naming the variable (CLI exit 2)."""


class CostLimitReached(Exception):
    """The ledger's limit in USD is spent; no further calls are made."""

    def __init__(self, spent: float, limit: float) -> None:
        super().__init__(f"cost limit reached: ${spent:.4f} spent of ${limit:.4f} allowed (--max-cost)")
        self.spent = spent
        self.limit = limit


@dataclass
class Usage:
    """Token counts of one call, split as billed: fresh input, cache writes, cache reads, output."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass
class Completion:
    """One successful exchange: the reply text and what it cost."""

    text: str
    model: str
    usage: Usage
    cost_usd: float
    latency_s: float
    stop_reason: str = ""
    exchange_id: str = ""
    attempts: int = 1
    price_known: bool = True  # False: the model has no row in the price table; cost_usd is 0, not a guess


@dataclass
class Ledger:
    """Running totals across calls; `check()` refuses a call once `limit_usd` is spent."""

    limit_usd: float | None = None
    spent_usd: float = 0.0
    calls: int = 0
    failed_calls: int = 0
    unpriced_calls: int = 0  # calls of a model with an unknown price: not in spent_usd
    usage: Usage = field(default_factory=Usage)

    def check(self) -> None:
        if self.limit_usd is not None and self.spent_usd >= self.limit_usd:
            raise CostLimitReached(self.spent_usd, self.limit_usd)

    def add(self, c: Completion) -> None:
        self.calls += 1
        self.spent_usd += c.cost_usd
        self.unpriced_calls += int(not c.price_known)
        self.usage = self.usage + c.usage

    def to_dict(self) -> dict[str, Any]:
        doc = {
            "limit_usd": self.limit_usd,
            "spent_usd": round(self.spent_usd, 6),
            "calls": self.calls,
            "failed_calls": self.failed_calls,
            "usage": self.usage.__dict__,
        }
        if self.unpriced_calls:
            doc |= {"unpriced_calls": self.unpriced_calls, "price": "unknown price"}
        return doc


@dataclass
class Exchange:
    """What is stored per call (never the key): the prompt, the reply or error, tokens, cost."""

    exchange_id: str
    provider: str
    model: str
    purpose: str
    prompt: dict[str, Any]
    response: str
    usage: Usage
    cost_usd: float | None  # None: the model's price is unknown
    latency_s: float
    error: str = ""


#: Where exchanges go (the materializer stores them in DuckDB); None keeps them nowhere.
Recorder = Callable[[Exchange], None]


class LLMProvider(Protocol):
    name: str
    model: str
    ledger: Ledger
    recorder: Recorder | None

    def complete(
        self,
        system: str | Sequence[SystemBlock],
        messages: Sequence[Message],
        *,
        max_tokens: int = 8192,
        purpose: str = "",
    ) -> Completion:
        """One exchange, with retries on overload and rate limits; raises LLMError or CostLimitReached."""

    def count_tokens(self, system: str | Sequence[SystemBlock], messages: Sequence[Message]) -> int:
        """Input tokens of a prompt: the API's count where reachable, else a conservative estimate."""


#: model backends by name (`get_llm`): what answers a prompt. Not the materializer's candidate
#: providers (klineage.materialize.providers), which may use one of these to propose a kernel.
_LLM_BACKENDS: dict[str, Callable[..., LLMProvider]] = {}


def register_llm(name: str) -> Callable[[Callable[..., LLMProvider]], Callable[..., LLMProvider]]:
    """Class decorator: make a model backend constructible by name through `get_llm`."""

    def deco(factory: Callable[..., LLMProvider]) -> Callable[..., LLMProvider]:
        _LLM_BACKENDS[name] = factory
        return factory

    return deco


def _load_builtin() -> None:
    import klineage.llm.anthropic_provider  # noqa: F401  (registers "anthropic")


def llm_names() -> list[str]:
    _load_builtin()
    return sorted(_LLM_BACKENDS)


def get_llm(name: str, **kwargs: Any) -> LLMProvider:
    """A provider by name; unknown names are bad input."""
    _load_builtin()
    if name not in _LLM_BACKENDS:
        raise KLineageError(f"unknown LLM provider '{name}' (known: {', '.join(sorted(_LLM_BACKENDS))})")
    return _LLM_BACKENDS[name](**kwargs)
