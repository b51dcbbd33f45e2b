"""The anthropic LLM provider, with the real SDK, against the local stub server (no key, no network)."""

from __future__ import annotations

import pytest

from klineage.llm import (
    CostLimitReached,
    Ledger,
    LLMError,
    MissingKeyError,
    Usage,
    cost_of,
    get_llm,
    price_for,
)
from klineage.llm.base import Exchange
from klineage.llm.stub import Reply, StubServer, overloaded, rate_limited

KEY = "sk-test-not-a-real-key-42"
SYSTEM = [("rules " * 200, True), ("cards " * 100, True)]
MSG = [{"role": "user", "content": [{"type": "text", "text": "the code"}]}]


def _llm(stub: StubServer, **kw):  # noqa: ANN202
    exchanges: list[Exchange] = []
    llm = get_llm("anthropic", api_key=KEY, base_url=stub.base_url, backoff_s=0.01, recorder=exchanges.append, **kw)
    llm.sleep = lambda s: None  # backoff is computed (and checked below) but not waited for
    return llm, exchanges


def test_success_with_cache_accounting() -> None:
    with StubServer([Reply("hello", output_tokens=50)]) as stub:
        llm, ex = _llm(stub, model="claude-sonnet-4-5-20250929")
        first = llm.complete(SYSTEM, MSG, purpose="test")
        second = llm.complete(SYSTEM, MSG, purpose="test")
    assert first.text == "hello" and first.attempts == 1 and first.price_known
    assert first.usage.cache_write_tokens > 0 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens and second.usage.cache_write_tokens == 0
    assert second.cost_usd < first.cost_usd  # cache reads are billed at a tenth of the input price
    sent = stub.requests[0]
    assert sent["model"] == "claude-sonnet-4-5-20250929"
    assert [b.get("cache_control") for b in sent["system"]] == [{"type": "ephemeral"}] * 2
    assert llm.ledger.calls == 2 and llm.ledger.spent_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert [e.purpose for e in ex] == ["test", "test"] and ex[0].response == "hello" and not ex[0].error


def test_cost_from_price_table() -> None:
    u = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert cost_of("claude-sonnet-4-5", u) == pytest.approx(3 + 15 + 0.3 + 3.75)
    assert cost_of("claude-haiku-4-5-20251001", u) == pytest.approx(1 + 5 + 0.1 + 1.25)
    price, known = price_for("some-future-model")
    assert not known and price.output == max(p.output for p in __import__("klineage.llm", fromlist=["PRICES"]).PRICES.values())


def test_overload_is_retried_with_backoff() -> None:
    with StubServer([overloaded(), rate_limited(retry_after=0.5), Reply("ok")]) as stub:
        llm, ex = _llm(stub)
        waits: list[float] = []
        llm.sleep = waits.append
        c = llm.complete(SYSTEM, MSG)
    assert c.text == "ok" and c.attempts == 3 and len(stub.requests) == 3
    assert waits == [0.01, 0.5]  # exponential base, then the server's retry-after
    assert [e.error.split(":")[0] for e in ex[:2]] == ["OverloadedError 529", "RateLimitError 429"]
    assert llm.ledger.failed_calls == 2 and llm.ledger.calls == 1


def test_retries_run_out() -> None:
    with StubServer([overloaded()]) as stub:
        llm, ex = _llm(stub, max_attempts=3)
        with pytest.raises(LLMError, match="failed after 3 attempts: OverloadedError 529"):
            llm.complete(SYSTEM, MSG)
    assert len(stub.requests) == 3 and len(ex) == 3


def test_refused_request_is_not_retried() -> None:
    with StubServer([Reply(status=400)]) as stub:
        llm, _ = _llm(stub)
        with pytest.raises(LLMError, match="refused the request"):
            llm.complete(SYSTEM, MSG)
    assert len(stub.requests) == 1


def test_max_cost_stops_further_calls() -> None:
    with StubServer([Reply("x" * 4000)]) as stub:
        llm, _ = _llm(stub, max_cost_usd=0.0001)
        llm.complete(SYSTEM, MSG)
        with pytest.raises(CostLimitReached, match=r"cost limit reached: \$0\.0\d+ spent of \$0\.0001"):
            llm.complete(SYSTEM, MSG)
    assert len(stub.requests) == 1


def test_shared_ledger() -> None:
    ledger = Ledger(limit_usd=1.0)
    with StubServer([Reply("a")]) as stub:
        one, _ = _llm(stub, ledger=ledger)
        two, _ = _llm(stub, ledger=ledger)
        one.complete("sys", MSG)
        two.complete("sys", MSG)
    assert ledger.calls == 2 and one.ledger is two.ledger


def test_key_never_in_exchanges() -> None:
    with StubServer([overloaded(), Reply("fine")]) as stub:
        llm, ex = _llm(stub)
        llm.complete(SYSTEM, MSG)
    assert len(ex) == 2
    assert all(KEY not in repr(e) for e in ex)
    assert any(KEY in v for h in stub.state.headers for v in h.values())  # it was sent, only to the server


def test_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY is not set"):
        get_llm("anthropic")


def test_unknown_provider() -> None:
    from klineage.errors import KLineageError

    with pytest.raises(KLineageError, match="unknown LLM provider 'gpt'"):
        get_llm("gpt")


def test_store_recorder(tmp_path) -> None:  # noqa: ANN001
    from klineage.llm.record import store_recorder
    from klineage.store.db import Store

    with Store(tmp_path / "x.duckdb") as store, StubServer([overloaded(), Reply("stored")]) as stub:
        llm = get_llm("anthropic", api_key=KEY, base_url=stub.base_url, backoff_s=0.0,
                      recorder=store_recorder(store, run_id="mine-1", step=lambda: 7))
        llm.complete(SYSTEM, MSG, purpose="llm-operator")
        rows = store.rows("SELECT * FROM llm_exchanges ORDER BY error IS NOT NULL")
    assert [(r["run_id"], r["step_index"], r["purpose"]) for r in rows] == [("mine-1", 7, "llm-operator")] * 2
    assert rows[0]["response"] == "stored" and rows[0]["cost_usd"] > 0 and rows[1]["error"].startswith("OverloadedError")
    assert rows[0]["prompt"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert KEY.encode() not in (tmp_path / "x.duckdb").read_bytes()
