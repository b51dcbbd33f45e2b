"""The `anthropic` provider: the official SDK, our own retry loop, usage and cost accounting.

The SDK's own retries are turned off (max_retries=0) so every attempt, failed or not, is seen,
stored and counted here. Overload (529), rate limits (429), 5xx and connection errors are retried
with exponential backoff (honouring `retry-after` when the server sends one, within a cap).
System blocks marked for caching carry `cache_control: ephemeral`, so the static prefix (rules,
skill cards) is billed at the cache-read price on later calls.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

import anthropic

from klineage.llm.base import (
    Completion,
    Exchange,
    Ledger,
    LLMError,
    Message,
    MissingKeyError,
    Recorder,
    SystemBlock,
    Usage,
    register_llm,
)
from klineage.llm.pricing import cost_of, price_for

DEFAULT_MODEL = "claude-sonnet-4-5"
KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
RETRY_STATUS = {408, 429, 500, 502, 503, 504, 529}


def system_blocks(system: str | Sequence[SystemBlock]) -> list[dict[str, Any]]:
    """The Messages API form of a system prompt; blocks flagged True end a cached prefix."""
    if isinstance(system, str):
        return [{"type": "text", "text": system}]
    out = []
    for text, cache in system:
        block: dict[str, Any] = {"type": "text", "text": text}
        if cache:
            block["cache_control"] = {"type": "ephemeral"}
        out.append(block)
    return out


def _usage(u: Any) -> Usage:
    def n(name: str) -> int:
        return int(getattr(u, name, 0) or 0)

    return Usage(n("input_tokens"), n("output_tokens"), n("cache_read_input_tokens"), n("cache_creation_input_tokens"))


def _retry_after(e: Exception) -> float | None:
    resp = getattr(e, "response", None)
    value = resp.headers.get("retry-after") if resp is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@register_llm("anthropic")
class AnthropicLLM:
    """Claude through the Messages API. Key from ANTHROPIC_API_KEY, never stored or logged."""

    name = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_cost_usd: float | None = None,
        ledger: Ledger | None = None,
        recorder: Recorder | None = None,
        max_attempts: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        timeout_s: float = 600.0,
    ) -> None:
        key = api_key or os.environ.get(KEY_ENV)
        if not key:
            raise MissingKeyError(f"{KEY_ENV} is not set: the anthropic provider needs an API key (or use --provider offline)")
        self.model = model or DEFAULT_MODEL
        self.base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        self.ledger = ledger or Ledger(limit_usd=max_cost_usd)
        self.recorder = recorder
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.sleep = time.sleep
        self._client = anthropic.Anthropic(api_key=key, base_url=self.base_url, max_retries=0, timeout=timeout_s)

    def _record(self, ex: Exchange) -> None:
        if self.recorder is not None:
            self.recorder(ex)

    def _delay(self, attempt: int, e: Exception) -> float:
        hinted = _retry_after(e)
        base = self.backoff_s * (2 ** (attempt - 1))
        return min(self.max_backoff_s, max(base, hinted or 0.0))

    def complete(
        self,
        system: str | Sequence[SystemBlock],
        messages: Sequence[Message],
        *,
        max_tokens: int = 8192,
        purpose: str = "",
    ) -> Completion:
        """One exchange; every attempt is recorded; raises LLMError when the retries are spent."""
        self.ledger.check()
        blocks = system_blocks(system)
        prompt = {"model": self.model, "system": blocks, "messages": list(messages), "max_tokens": max_tokens}
        last_error = ""
        for attempt in range(1, self.max_attempts + 1):
            t0 = time.perf_counter()
            try:
                msg = self._client.messages.create(
                    model=self.model, max_tokens=max_tokens, system=blocks, messages=list(messages),
                )
            except (anthropic.APIStatusError, anthropic.APIConnectionError) as e:
                latency = time.perf_counter() - t0
                status = getattr(e, "status_code", None)
                last_error = f"{type(e).__name__}" + (f" {status}" if status else "") + f": {_short(e)}"
                self.ledger.failed_calls += 1
                self._record(Exchange(uuid.uuid4().hex[:16], self.name, self.model, purpose, prompt, "", Usage(), 0.0,
                                      latency, error=last_error))
                retryable = status is None or status in RETRY_STATUS
                if not retryable:
                    raise LLMError(f"anthropic API refused the request: {last_error}") from None
                if attempt < self.max_attempts:
                    self.sleep(self._delay(attempt, e))
                continue
            latency = time.perf_counter() - t0
            text = "".join(getattr(b, "text", "") for b in msg.content if getattr(b, "type", "") == "text")
            usage = _usage(msg.usage)
            cost = cost_of(self.model, usage)
            known = price_for(self.model)[1]
            ex_id = uuid.uuid4().hex[:16]
            self._record(Exchange(ex_id, self.name, msg.model or self.model, purpose, prompt, text, usage, cost, latency))
            c = Completion(text, msg.model or self.model, usage, cost, latency, msg.stop_reason or "", ex_id, attempt, known)
            self.ledger.add(c)
            return c
        raise LLMError(f"anthropic API failed after {self.max_attempts} attempts: {last_error}")


def _short(e: Exception) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:200]
