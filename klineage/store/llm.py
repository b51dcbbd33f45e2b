"""The `llm_exchanges` table: one row per request to a model (prompt, reply or error, tokens,
cost, latency), linked to the run and step it served. The API key is never part of a row."""

from __future__ import annotations

import json
from typing import Any

from klineage.llm.base import Exchange
from klineage.store.db import Store


def put_exchange(store: Store, ex: Exchange, run_id: str | None = None, step_index: int | None = None) -> None:
    with store.transaction() as con:
        con.execute(
            "INSERT INTO llm_exchanges (exchange_id, provider, model, purpose, prompt, response, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, latency_s, error, run_id, step_index)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [ex.exchange_id, ex.provider, ex.model, ex.purpose, json.dumps(ex.prompt, default=str), ex.response,
             ex.usage.input_tokens, ex.usage.output_tokens, ex.usage.cache_read_tokens, ex.usage.cache_write_tokens,
             ex.cost_usd, ex.latency_s, ex.error or None, run_id, step_index])


def usage_by_model(store: Store) -> list[dict[str, Any]]:
    """Per (provider, model): exchanges, tokens, cost, mean latency and errors."""
    return store.rows(
        "SELECT provider, coalesce(model, '') AS model, count(*) AS exchanges, sum(input_tokens) AS input_tokens,"
        " sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens, sum(cost_usd) AS cost_usd,"
        " avg(latency_s) AS latency_s, count(error) AS errors FROM llm_exchanges GROUP BY ALL ORDER BY 1, 2")
