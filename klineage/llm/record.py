"""Storing LLM exchanges in DuckDB (`llm_exchanges`): prompt, reply or error, tokens, cost, latency.

`store_recorder(store, run_id=..., step=lambda: n)` gives the `recorder` a provider takes; the
materializer links exchanges to its run and step, the LLM operator can link them to a mining run.
Only what the Exchange holds is written: the API key never is.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from klineage.llm.base import Exchange, Recorder
from klineage.store.db import Store


def store_exchange(store: Store, ex: Exchange, run_id: str | None = None, step_index: int | None = None) -> None:
    with store.transaction() as con:
        con.execute(
            "INSERT INTO llm_exchanges (exchange_id, provider, model, purpose, prompt, response, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, latency_s, error, run_id, step_index)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [ex.exchange_id, ex.provider, ex.model, ex.purpose, json.dumps(ex.prompt, default=str), ex.response,
             ex.usage.input_tokens, ex.usage.output_tokens, ex.usage.cache_read_tokens, ex.usage.cache_write_tokens,
             ex.cost_usd, ex.latency_s, ex.error or None, run_id, step_index])


def store_recorder(store: Store, run_id: str | None = None, step: Callable[[], int | None] | None = None) -> Recorder:
    """A recorder writing every exchange to `store`, tagged with the run and the current step."""

    def record(ex: Exchange) -> None:
        store_exchange(store, ex, run_id, step() if step is not None else None)

    return record
