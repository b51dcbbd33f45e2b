"""Storing LLM exchanges in DuckDB (`llm_exchanges`; the rows: klineage/store/llm.py): prompt,
reply or error, tokens, cost, latency.

`store_recorder(store, run_id=..., step=lambda: n)` gives the `recorder` a provider takes; the
materializer links exchanges to its run and step, the LLM operator can link them to a mining run.
A prompt's static prefix (its system blocks: rules and skill cards, the same on every call of a
run) is stored once in `llm_prompt_prefixes`, keyed by its hash; the exchange row keeps the rest
of the prompt and `prefix_hash`. Only what the Exchange holds is written: the API key never is.
"""

from __future__ import annotations

from collections.abc import Callable

from klineage.llm.base import Exchange, Recorder
from klineage.store.db import Store
from klineage.store.llm import full_prompt, put_exchange, split_prompt

__all__ = ["full_prompt", "split_prompt", "store_recorder"]


def store_recorder(
    store: Store, run_id: str | None = None, step: Callable[[], int | None] | None = None
) -> Recorder:
    """A recorder writing every exchange to `store`, tagged with the run and the current step."""

    def record(ex: Exchange) -> None:
        put_exchange(store, ex, run_id, step() if step is not None else None)

    return record
