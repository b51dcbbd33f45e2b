"""Storing LLM exchanges in DuckDB (`llm_exchanges`): prompt, reply or error, tokens, cost, latency.

`store_recorder(store, run_id=..., step=lambda: n)` gives the `recorder` a provider takes; the
materializer links exchanges to its run and step, the LLM operator can link them to a mining run.
A prompt's static prefix (its system blocks: rules and skill cards, the same on every call of a
run) is stored once in `llm_prompt_prefixes`, keyed by its hash; the exchange row keeps the rest
of the prompt and `prefix_hash`. Only what the Exchange holds is written: the API key never is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from klineage.llm.base import Exchange, Recorder
from klineage.store.db import Store


def split_prompt(prompt: dict[str, Any]) -> tuple[str | None, str | None, dict[str, Any]]:
    """(prefix hash, prefix JSON, the prompt without its prefix); no system blocks: no prefix."""
    system = prompt.get("system")
    if not system:
        return None, None, prompt
    text = json.dumps(system, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return digest, text, {k: v for k, v in prompt.items() if k != "system"} | {"prefix_hash": digest}


def full_prompt(store: Store, exchange_id: str) -> dict[str, Any] | None:
    """An exchange's prompt as it was sent, its prefix put back."""
    rows = store.rows("SELECT e.prompt, p.prefix FROM llm_exchanges e LEFT JOIN llm_prompt_prefixes p"
                      " ON p.prefix_hash = e.prefix_hash WHERE e.exchange_id = ?", [exchange_id])
    if not rows or rows[0]["prompt"] is None:
        return None
    prompt = {k: v for k, v in rows[0]["prompt"].items() if k != "prefix_hash"}
    return prompt | ({"system": rows[0]["prefix"]} if rows[0]["prefix"] is not None else {})


def store_exchange(store: Store, ex: Exchange, run_id: str | None = None, step_index: int | None = None) -> None:
    digest, prefix, rest = split_prompt(ex.prompt)
    with store.transaction() as con:
        if digest is not None:
            con.execute("INSERT INTO llm_prompt_prefixes (prefix_hash, prefix) VALUES (?, ?) ON CONFLICT DO NOTHING",
                        [digest, prefix])
        con.execute(
            "INSERT INTO llm_exchanges (exchange_id, provider, model, purpose, prompt, response, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, latency_s, error, run_id, step_index,"
            " prefix_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [ex.exchange_id, ex.provider, ex.model, ex.purpose, json.dumps(rest, default=str), ex.response,
             ex.usage.input_tokens, ex.usage.output_tokens, ex.usage.cache_read_tokens, ex.usage.cache_write_tokens,
             ex.cost_usd, ex.latency_s, ex.error or None, run_id, step_index, digest])


def store_recorder(store: Store, run_id: str | None = None, step: Callable[[], int | None] | None = None) -> Recorder:
    """A recorder writing every exchange to `store`, tagged with the run and the current step."""

    def record(ex: Exchange) -> None:
        store_exchange(store, ex, run_id, step() if step is not None else None)

    return record
