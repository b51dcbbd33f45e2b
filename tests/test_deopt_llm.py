"""The LLM de-optimization operator through the real anthropic SDK against the local stub server:
a good removal is gated and becomes a lineage step with its exchange stored; a bad reply is
refused before any gate; no key or network is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.llm_operator import LLMOperator, parse_reply
from klineage.llm import get_llm
from klineage.llm.record import store_recorder
from klineage.llm.stub import Reply, StubServer, overloaded
from klineage.source.model import CudaSource
from klineage.store.db import Store
from klineage.walker import WalkConfig, Walker
from tests.conftest import REPO

SCALE = REPO / "tests/data/mining/scale"
EXPERT = (SCALE / "expert.cu").read_text()
SIMPLER = EXPERT.replace("const float* __restrict__ x, float* __restrict__ y", "const float* x, float* y")
GOOD = (
    '{"category": "tuning", "locus": "scale, line 4", "intent": "Mark pointers __restrict__."}\n'
    f"```cuda\n{SIMPLER}```\n"
)
KEY = "sk-test-not-a-real-key-7"


def test_parse_reply_checks() -> None:
    src = CudaSource.from_text(EXPERT, "e.cu")
    new, header = parse_reply(GOOD, src)
    assert new.strip() == SIMPLER.strip() and header["category"] == "tuning"
    with pytest.raises(Refused, match="no ```cuda code block"):
        parse_reply("I removed the restrict qualifiers.", src)
    with pytest.raises(Refused, match="unchanged"):
        parse_reply('{"category": "tuning"}\n```cuda\n' + EXPERT + "```", src)
    with pytest.raises(Refused, match="unknown category"):
        parse_reply('{"category": "magic"}\n```cuda\n' + SIMPLER + "```", src)
    with pytest.raises(Refused, match="does not parse"):
        parse_reply('{"category": "tuning"}\n```cuda\n__global__ void k( {\n```', src)
    with pytest.raises(Refused, match="lost its extern"):
        parse_reply('{"category": "tuning"}\n```cuda\n__global__ void k() {}\n```', src)


def test_walker_takes_an_llm_step_and_stores_the_exchange(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store = Store(db)
    script = [overloaded(), Reply("no code here, sorry"), Reply(GOOD, output_tokens=300)]
    with StubServer(script) as stub:
        provider = get_llm(
            "anthropic",
            api_key=KEY,
            base_url=stub.base_url,
            backoff_s=0.01,
            recorder=store_recorder(store, run_id="t"),
        )
        provider.sleep = lambda s: None
        walker = Walker(
            store, WalkConfig(operators=[], max_steps=1, llm=LLMOperator(provider), llm_attempts=2)
        )
        summary = walker.walk(SCALE)
    steps = store.rows("SELECT operator, accepted, taken, category, message FROM steps ORDER BY created_at")
    exchanges = store.rows("SELECT provider, model, response, error, cost_usd FROM llm_exchanges")
    store.close()
    assert summary.accepted == 1
    assert [(s["operator"], s["accepted"], s["taken"]) for s in steps] == [
        ("llm", False, False),
        ("llm:tuning", True, True),
    ]
    assert "no ```cuda code block" in steps[0]["message"]
    assert len(exchanges) >= 2 and all(KEY not in (e["response"] or "") for e in exchanges)
    assert any(e["cost_usd"] and e["cost_usd"] > 0 for e in exchanges)


def test_provider_failure_ends_the_mining_run_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused key is not a refused candidate: the walk stops, later asks make no call, and the
    mining run's row is closed as failed with the reason (the CLI then exits 3)."""
    from klineage.llm import LLMError
    from klineage.mining import mine_corpus

    with StubServer([Reply(status=401)]) as stub:
        op = LLMOperator(get_llm("anthropic", api_key=KEY, base_url=stub.base_url))
        src = CudaSource.from_text(EXPERT, "e.cu")
        with pytest.raises(LLMError, match="refused the request .*401"):
            op.propose(src, "sig")
        with pytest.raises(LLMError, match="401"):
            op.propose(src, "sig")
        assert len(stub.requests) == 1  # the second ask made no call
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
        with pytest.raises(LLMError, match="401"):
            mine_corpus([SCALE], db=tmp_path / "m.duckdb", llm="anthropic", workers=1, roundtrip=False)
    with Store(tmp_path / "m.duckdb", read_only=True) as store:
        runs = store.rows("SELECT status, reason, finished_at FROM mining_runs")
    assert len(runs) == 1 and runs[0]["status"] == "failed" and runs[0]["finished_at"] is not None
    assert "LLMError" in runs[0]["reason"] and "401" in runs[0]["reason"]


def test_mining_with_an_unknown_llm_model_writes_no_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from klineage.errors import KLineageError
    from klineage.mining import mine_corpus

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with pytest.raises(KLineageError, match="unknown model 'claude-sonnet-4-5'"):
        mine_corpus([SCALE], db=tmp_path / "m.duckdb", llm="anthropic", llm_model="claude-sonnet-4-5")
    with Store(tmp_path / "m.duckdb", read_only=True) as store:
        assert store.rows("SELECT * FROM mining_runs") == []


def test_spent_llm_budget_only_stops_the_asking() -> None:
    """--llm-max-cost spent: each later ask is refused without a call (the rules mine on), where it
    used to raise CostLimitReached out of the walk."""
    with StubServer([Reply(GOOD, output_tokens=300)]) as stub:
        op = LLMOperator(get_llm("anthropic", api_key=KEY, base_url=stub.base_url, max_cost_usd=1e-9))
        src = CudaSource.from_text(EXPERT, "e.cu")
        assert op.propose(src, "sig").category == "tuning"
        for _ in range(2):
            with pytest.raises(Refused, match=r"llm: not asked: cost limit reached"):
                op.propose(src, "sig")
    assert len(stub.requests) == 1
