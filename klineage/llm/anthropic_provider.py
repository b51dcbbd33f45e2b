"""The `anthropic` provider: the official SDK, our own retry loop, usage and cost accounting.

The model is checked against the installed SDK's own list (klineage.llm.models) before any call.
Replies are streamed (`client.messages.stream`), so the per-attempt timeout bounds *silence* on
the connection, not the length of a long answer: a stalled connection fails in `timeout_s`
(default 60 s) rather than holding a run for an hour. The SDK's own retries are off
(max_retries=0) so every attempt, failed or not, is seen, stored and counted here.

Failures, each recorded as a failed exchange: overload (529), rate limits (429), 5xx, timeouts,
connection errors and replies that cannot be read (a 200 whose body is not the API's, a stream
cut short) are retried with exponential backoff (honouring `retry-after` within a cap); 400, 401,
403 and 404 are not. A 400 saying the prompt is too long raises ContextTooLong, so the caller can
shrink the prompt and retry once. Whatever ends a call is an LLMError with one clear line.

System blocks marked for caching carry `cache_control: ephemeral`, so the static prefix (rules,
skill cards) is billed at the cache-read price on later calls.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from klineage.errors import KLineageError
from klineage.llm.base import (
    Completion,
    ContextTooLong,
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
from klineage.llm.models import check_model, default_model
from klineage.llm.pricing import PRICES_AS_OF, cost_of, price_for


def _sdk() -> Any:
    """The anthropic SDK, imported on first use: a command that never calls a model (the gate,
    the offline materializer, `klineage heldout` on a GPU machine that lacks the SDK) neither
    pays for the import nor needs the package."""
    import anthropic

    return anthropic


KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEFAULT_TIMEOUT_S = 60.0
RETRY_STATUS = {408, 429, 500, 502, 503, 504, 529}
#: A conservative local token estimate where the API's count cannot be had: bytes / 3 (English
#: prose runs ~4 bytes a token, CUDA code ~3), so a prompt cut to it fits when counted for real.
BYTES_PER_TOKEN = 3
_CONTEXT_WORDS = (
    "prompt is too long",
    "too many tokens",
    "context window",
    "context length",
    "maximum context",
)


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


def estimate_tokens(system: str | Sequence[SystemBlock], messages: Sequence[Message]) -> int:
    """The local estimate (see BYTES_PER_TOKEN) of a prompt's input tokens."""
    text = json.dumps(system_blocks(system)) + json.dumps(list(messages))
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN)


def _usage(u: Any) -> Usage:
    def n(name: str) -> int:
        return int(getattr(u, name, 0) or 0)

    return Usage(
        n("input_tokens"), n("output_tokens"), n("cache_read_input_tokens"), n("cache_creation_input_tokens")
    )


def _retry_after(e: Exception) -> float | None:
    resp = getattr(e, "response", None)
    value = resp.headers.get("retry-after") if resp is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:200]


class _Malformed(Exception):
    """A reply that is not the API's (not an event stream, no message, a stream cut short)."""


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
        timeout_s: float | None = None,
    ) -> None:
        self.model = check_model(model) if model else default_model()
        key = api_key or os.environ.get(KEY_ENV)
        if not key:
            raise MissingKeyError(
                f"{KEY_ENV} is not set: the anthropic provider needs an API key (or use --provider offline)"
            )
        limit = (
            max_cost_usd if max_cost_usd is not None else (ledger.limit_usd if ledger is not None else None)
        )
        if limit is not None and price_for(self.model) is None:
            raise KLineageError(
                f"model '{self.model}' has an unknown price (pricing table of {PRICES_AS_OF}): "
                "--max-cost cannot be counted for it; drop --max-cost or choose a priced model"
            )
        timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        if timeout <= 0:
            raise KLineageError("--llm-timeout must be a positive number of seconds")
        self.base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        self.ledger = ledger or Ledger(limit_usd=max_cost_usd)
        self.recorder = recorder
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout
        self.sleep = time.sleep
        self.token_counting = "api"  # "local" once the API's count_tokens proved unreachable
        self._client = _sdk().Anthropic(api_key=key, base_url=self.base_url, max_retries=0, timeout=timeout)

    def _record(self, ex: Exchange) -> None:
        if self.recorder is not None:
            self.recorder(ex)

    def _delay(self, attempt: int, e: Exception) -> float:
        hinted = _retry_after(e)
        base = self.backoff_s * (2 ** (attempt - 1))
        return min(self.max_backoff_s, max(base, hinted or 0.0))

    def count_tokens(self, system: str | Sequence[SystemBlock], messages: Sequence[Message]) -> int:
        """The API's count of a prompt's input tokens (free, not billed); the local estimate
        where the endpoint cannot be reached or refuses (then for the rest of the run)."""
        if self.token_counting == "api":
            try:
                r = self._client.messages.count_tokens(
                    model=self.model, system=system_blocks(system), messages=list(messages)
                )
                return int(r.input_tokens)
            except (_sdk().APIError, AttributeError, TypeError, ValueError):
                self.token_counting = "local"
        return estimate_tokens(system, messages)

    def _stream(self, blocks: list[dict[str, Any]], messages: list[Message], max_tokens: int) -> Any:
        """One streamed call -> the final message; _Malformed when the reply cannot be read."""
        with self._client.messages.stream(
            model=self.model, max_tokens=max_tokens, system=blocks, messages=messages
        ) as stream:  # type: ignore[arg-type]
            try:
                msg = stream.get_final_message()
            except (_sdk().APIStatusError, _sdk().APIConnectionError):
                raise
            except Exception as e:  # the SDK could not assemble a message from what came back
                raise _Malformed(f"{type(e).__name__} {_short(e)}".strip()) from None
        if not hasattr(msg, "content") or not hasattr(msg, "usage"):
            raise _Malformed(f"a {type(msg).__name__} instead of a message")
        return msg

    def complete(
        self,
        system: str | Sequence[SystemBlock],
        messages: Sequence[Message],
        *,
        max_tokens: int = 8192,
        purpose: str = "",
    ) -> Completion:
        """One exchange; every attempt is recorded; raises LLMError (ContextTooLong for a 400
        about the prompt's length) when the call cannot succeed or the retries are spent."""
        self.ledger.check()
        blocks = system_blocks(system)
        prompt = {"model": self.model, "system": blocks, "messages": list(messages), "max_tokens": max_tokens}
        last_error = ""
        for attempt in range(1, self.max_attempts + 1):
            t0 = time.perf_counter()
            status: int | None = None
            try:
                msg = self._stream(blocks, list(messages), max_tokens)
            except (_sdk().APIStatusError, _sdk().APIConnectionError, _Malformed) as e:
                latency = time.perf_counter() - t0
                status = getattr(e, "status_code", None)
                what = "malformed reply" if isinstance(e, _Malformed) else type(e).__name__
                if isinstance(e, _sdk().APITimeoutError):
                    what = f"timeout after {self.timeout_s:g} s"
                last_error = what + (f" {status}" if status else "") + f": {_short(e)}"
                self.ledger.failed_calls += 1
                self._record(
                    Exchange(
                        uuid.uuid4().hex[:16],
                        self.name,
                        self.model,
                        purpose,
                        prompt,
                        "",
                        Usage(),
                        0.0,
                        latency,
                        error=last_error,
                    )
                )
                if status == 400 and any(w in str(e).lower() for w in _CONTEXT_WORDS):
                    raise ContextTooLong(
                        f"anthropic API: the prompt is longer than {self.model}'s context: {last_error}"
                    ) from None
                if status is not None and status not in RETRY_STATUS:
                    raise LLMError(
                        f"anthropic API refused the request ({self.model}): {last_error}"
                    ) from None
                if attempt < self.max_attempts:
                    self.sleep(self._delay(attempt, e))
                continue
            latency = time.perf_counter() - t0
            text = "".join(getattr(b, "text", "") for b in msg.content if getattr(b, "type", "") == "text")
            usage = _usage(msg.usage)
            cost = cost_of(self.model, usage)
            ex_id = uuid.uuid4().hex[:16]
            model = getattr(msg, "model", None) or self.model
            self._record(Exchange(ex_id, self.name, model, purpose, prompt, text, usage, cost, latency))
            c = Completion(
                text,
                model,
                usage,
                cost or 0.0,
                latency,
                getattr(msg, "stop_reason", None) or "",
                ex_id,
                attempt,
                cost is not None,
            )
            self.ledger.add(c)
            return c
        raise LLMError(
            f"anthropic API failed after {self.max_attempts} attempts ({self.model}): {last_error}"
        )
