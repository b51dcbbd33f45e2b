"""The LLM tables: `llm_exchanges`, one row per request to a model (prompt, reply or error,
tokens, cost, latency), linked to the run and step it served, and `llm_prompt_prefixes`, each
prompt's static prefix (its system blocks) stored once by hash. The API key is never part of a row."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from klineage.llm.base import Exchange
from klineage.store.db import Store


def split_prompt(prompt: dict[str, Any]) -> tuple[str | None, str | None, dict[str, Any]]:
    """(prefix hash, prefix JSON, the prompt without its prefix); no system blocks: no prefix."""
    system = prompt.get("system")
    if not system:
        return None, None, prompt
    text = json.dumps(system, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return digest, text, {k: v for k, v in prompt.items() if k != "system"} | {"prefix_hash": digest}


def put_exchange(
    store: Store, ex: Exchange, run_id: str | None = None, step_index: int | None = None
) -> None:
    digest, prefix, rest = split_prompt(ex.prompt)
    with store.transaction() as con:
        if digest is not None:
            con.execute(
                "INSERT INTO llm_prompt_prefixes (prefix_hash, prefix) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [digest, prefix],
            )
        con.execute(
            "INSERT INTO llm_exchanges (exchange_id, provider, model, purpose, prompt, response, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, latency_s, error, run_id, step_index,"
            " prefix_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ex.exchange_id,
                ex.provider,
                ex.model,
                ex.purpose,
                json.dumps(rest, default=str),
                ex.response,
                ex.usage.input_tokens,
                ex.usage.output_tokens,
                ex.usage.cache_read_tokens,
                ex.usage.cache_write_tokens,
                ex.cost_usd,
                ex.latency_s,
                ex.error or None,
                run_id,
                step_index,
                digest,
            ],
        )


def full_prompt(store: Store, exchange_id: str) -> dict[str, Any] | None:
    """An exchange's prompt as it was sent, its prefix put back."""
    rows = store.rows(
        "SELECT e.prompt, p.prefix FROM llm_exchanges e LEFT JOIN llm_prompt_prefixes p"
        " ON p.prefix_hash = e.prefix_hash WHERE e.exchange_id = ?",
        [exchange_id],
    )
    if not rows or rows[0]["prompt"] is None:
        return None
    prompt = {k: v for k, v in rows[0]["prompt"].items() if k != "prefix_hash"}
    return prompt | ({"system": rows[0]["prefix"]} if rows[0]["prefix"] is not None else {})


def usage_by_model(store: Store) -> list[dict[str, Any]]:
    """Per (provider, model): exchanges, tokens, cost, mean latency and errors."""
    return store.rows(
        "SELECT provider, coalesce(model, '') AS model, count(*) AS exchanges, sum(input_tokens) AS input_tokens,"
        " sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens, sum(cost_usd) AS cost_usd,"
        " avg(latency_s) AS latency_s, count(error) AS errors FROM llm_exchanges GROUP BY ALL ORDER BY 1, 2"
    )
