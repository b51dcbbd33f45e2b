"""The anthropic LLM provider, with the real SDK, against the local stub server (no key, no network)."""

from __future__ import annotations

import time

import pytest

from klineage.errors import KLineageError
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
from klineage.llm.base import ContextTooLong, Exchange
from klineage.llm.models import UnknownModelError, default_model, deprecated_models, parse, sdk_models
from klineage.llm.pricing import PRICES_AS_OF
from klineage.llm.stub import Reply, StubServer, not_json, overloaded, prompt_tokens, rate_limited, stalled

KEY = "sk-test-not-a-real-key-42"
SYSTEM = [("rules " * 200, True), ("cards " * 100, True)]
MSG = [{"role": "user", "content": [{"type": "text", "text": "the code"}]}]


def _llm(stub: StubServer, **kw):  # noqa: ANN202
    exchanges: list[Exchange] = []
    llm = get_llm(
        "anthropic", api_key=KEY, base_url=stub.base_url, backoff_s=0.01, recorder=exchanges.append, **kw
    )
    llm.sleep = lambda s: None  # backoff is computed (and checked below) but not waited for
    return llm, exchanges


def test_success_with_cache_accounting() -> None:
    with StubServer([Reply("hello", output_tokens=50)]) as stub:
        llm, ex = _llm(stub, model="claude-haiku-4-5-20251001")
        first = llm.complete(SYSTEM, MSG, purpose="test")
        second = llm.complete(SYSTEM, MSG, purpose="test")
    assert first.text == "hello" and first.attempts == 1 and first.price_known
    assert first.usage.cache_write_tokens > 0 and first.usage.cache_read_tokens == 0
    assert (
        second.usage.cache_read_tokens == first.usage.cache_write_tokens
        and second.usage.cache_write_tokens == 0
    )
    assert second.cost_usd < first.cost_usd  # cache reads are billed at a tenth of the input price
    sent = stub.requests[0]
    assert (
        sent["model"] == "claude-haiku-4-5-20251001" and sent["stream"] is True
    )  # streamed: timeouts bound silence
    assert [b.get("cache_control") for b in sent["system"]] == [{"type": "ephemeral"}] * 2
    assert llm.ledger.calls == 2 and llm.ledger.spent_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert [e.purpose for e in ex] == ["test", "test"] and ex[0].response == "hello" and not ex[0].error


def test_cost_from_price_table() -> None:
    u = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
    )
    assert cost_of("claude-sonnet-4-6", u) == pytest.approx(3 + 15 + 0.3 + 3.75)
    assert cost_of("claude-haiku-4-5-20251001", u) == pytest.approx(1 + 5 + 0.1 + 1.25)
    assert cost_of("claude-sonnet-5-5", u) == pytest.approx(2 + 10 + 0.1 + 2.5)  # cache reads at 0.05x
    assert cost_of("claude-opus-4-8", u) == pytest.approx(
        5 + 25 + 0.5 + 6.25
    )  # not the old claude-opus-4 rate
    small = Usage(input_tokens=50_000, output_tokens=1_000_000)
    assert cost_of("claude-haiku-5-5", small) == pytest.approx(
        0.005 + 0.5
    )  # Haiku 5.5 under 100k prompt tokens
    big = Usage(input_tokens=150_000, output_tokens=1_000_000)
    assert cost_of("claude-haiku-5-5", big) == pytest.approx(0.075 + 2.5)  # over: 5x on the whole call
    assert (
        price_for("some-future-model") is None and cost_of("some-future-model", u) is None
    )  # unknown: never guessed


def test_default_model_is_the_newest_current_sonnet_of_the_sdk() -> None:
    listed = sdk_models()
    sonnets = [parse(n) for n in listed if n.startswith("claude-sonnet-") and n not in deprecated_models()]
    newest = max((p for p in sonnets if p is not None), key=lambda p: p.version)
    assert default_model() == newest.name and default_model() in listed
    with StubServer([Reply("ok")]) as stub:  # the stub serves the SDK's names only, as the API does
        llm, _ = _llm(stub)
        assert llm.complete(SYSTEM, MSG).text == "ok"
    assert stub.requests[0]["model"] == default_model()


def test_unknown_model_is_refused_with_the_known_names() -> None:
    with pytest.raises(
        UnknownModelError,
        match=r"unknown model 'claude-sonnet-4-5' \(the installed anthropic SDK knows: "
        r".*claude-sonnet-4-6",
    ) as e:
        get_llm("anthropic", api_key=KEY, model="claude-sonnet-4-5")
    assert "\n" not in str(e.value) and isinstance(e.value, KLineageError)  # one line, exit 2
    assert not any(d in str(e.value).split("knows: ")[1].split(", ") for d in deprecated_models())


def test_every_current_sdk_model_has_a_price() -> None:
    missing = [m for m in sdk_models() if m not in deprecated_models() and price_for(m) is None]
    assert not missing, f"pricing table of {PRICES_AS_OF} lacks {missing}"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK warns about the deprecated model it is
def test_unknown_price_is_explicit_and_refuses_max_cost() -> None:
    unpriced = next(m for m in sdk_models() if price_for(m) is None)  # a deprecated preview has no row
    with pytest.raises(
        KLineageError, match=f"'{unpriced}' has an unknown price .*--max-cost cannot be counted"
    ):
        get_llm("anthropic", api_key=KEY, model=unpriced, max_cost_usd=1.0)
    with StubServer([Reply("x" * 400)]) as stub:
        llm, ex = _llm(stub, model=unpriced)
        c = llm.complete(SYSTEM, MSG)
    assert not c.price_known and c.cost_usd == 0.0 and ex[0].cost_usd is None
    assert llm.ledger.to_dict()["price"] == "unknown price" and llm.ledger.to_dict()["unpriced_calls"] == 1


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
        with pytest.raises(LLMError, match=r"failed after 3 attempts \(.*\): OverloadedError 529"):
            llm.complete(SYSTEM, MSG)
    assert len(stub.requests) == 3 and len(ex) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_refused_request_is_not_retried(status: int) -> None:
    with StubServer([Reply(status=status)]) as stub:
        llm, ex = _llm(stub)
        with pytest.raises(LLMError, match=f"refused the request .*{status}") as e:
            llm.complete(SYSTEM, MSG)
    assert len(stub.requests) == 1 and len(ex) == 1 and not isinstance(e.value, ContextTooLong)


def test_non_json_200_is_retried_then_ends_with_one_clear_error() -> None:
    with StubServer([not_json(), Reply("fine")]) as stub:
        llm, ex = _llm(stub)
        assert llm.complete(SYSTEM, MSG).attempts == 2
    assert ex[0].error.startswith("malformed reply")
    with StubServer([not_json()]) as stub:
        llm, ex = _llm(stub, max_attempts=2)
        with pytest.raises(LLMError, match=r"failed after 2 attempts \(.*\): malformed reply"):
            llm.complete(SYSTEM, MSG)
    assert len(ex) == 2 and llm.ledger.failed_calls == 2


def test_stalled_connection_times_out_per_attempt() -> None:
    with StubServer([stalled(30.0)]) as stub:
        llm, ex = _llm(stub, max_attempts=2, timeout_s=0.3)
        t0 = time.perf_counter()
        with pytest.raises(LLMError, match=r"failed after 2 attempts .*timeout after 0.3 s"):
            llm.complete(SYSTEM, MSG)
        took = time.perf_counter() - t0
    assert took < 5.0 and len(ex) == 2
    with pytest.raises(KLineageError, match="--llm-timeout must be a positive"):
        get_llm("anthropic", api_key=KEY, timeout_s=0)


def test_prompt_too_long_is_its_own_error() -> None:
    with StubServer([Reply("never")], context_tokens=100) as stub:
        llm, ex = _llm(stub)
        with pytest.raises(
            ContextTooLong, match="longer than .*context: BadRequestError 400: .*prompt is too long"
        ):
            llm.complete(SYSTEM, MSG)
    assert len(stub.requests) == 1 and ex[0].error


def test_count_tokens_from_the_api_else_a_local_estimate() -> None:
    with StubServer([Reply("x")]) as stub:
        llm, _ = _llm(stub)
        n = llm.count_tokens(SYSTEM, MSG)
    assert stub.state.counted == 1 and llm.token_counting == "api"
    assert n == prompt_tokens({"system": [{"text": t} for t, _ in SYSTEM], "messages": MSG})
    with StubServer([Reply("x")], count_tokens=False) as stub:
        llm, _ = _llm(stub)
        local = llm.count_tokens(SYSTEM, MSG)
        llm.count_tokens(SYSTEM, MSG)
    assert llm.token_counting == "local" and stub.state.counted == 0
    assert local >= n  # the local estimate is the conservative one


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
    from klineage.llm.record import full_prompt, store_recorder
    from klineage.store.db import Store

    with Store(tmp_path / "x.duckdb") as store, StubServer([overloaded(), Reply("stored")]) as stub:
        llm = get_llm(
            "anthropic",
            api_key=KEY,
            base_url=stub.base_url,
            backoff_s=0.0,
            recorder=store_recorder(store, run_id="mine-1", step=lambda: 7),
        )
        llm.complete(SYSTEM, MSG, purpose="llm-operator")
        llm.complete(SYSTEM, [{"role": "user", "content": [{"type": "text", "text": "other code"}]}])
        rows = store.rows("SELECT * FROM llm_exchanges ORDER BY error IS NOT NULL, created_at")
        prefixes = store.rows("SELECT * FROM llm_prompt_prefixes")
        sent = full_prompt(store, rows[0]["exchange_id"])
    assert [(r["run_id"], r["step_index"]) for r in rows] == [("mine-1", 7)] * 3 and rows[0][
        "purpose"
    ] == "llm-operator"
    assert (
        rows[0]["response"] == "stored"
        and rows[0]["cost_usd"] > 0
        and rows[2]["error"].startswith("OverloadedError")
    )
    # the static prefix is stored once, referenced by every exchange, and not repeated in their prompts
    assert len(prefixes) == 1 and {r["prefix_hash"] for r in rows} == {prefixes[0]["prefix_hash"]}
    assert all("system" not in r["prompt"] for r in rows)
    assert sent is not None and sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent["system"][0]["text"] == SYSTEM[0][0] and sent["messages"] == MSG
    assert KEY.encode() not in (tmp_path / "x.duckdb").read_bytes()
