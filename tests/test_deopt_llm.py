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
GOOD = ('{"category": "tuning", "locus": "scale, line 4", "intent": "Mark pointers __restrict__."}\n'
        f"```cuda\n{SIMPLER}```\n")
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
        provider = get_llm("anthropic", api_key=KEY, base_url=stub.base_url, backoff_s=0.01,
                           recorder=store_recorder(store, run_id="t"))
        provider.sleep = lambda s: None
        walker = Walker(store, WalkConfig(operators=[], max_steps=1, llm=LLMOperator(provider), llm_attempts=2))
        summary = walker.walk(SCALE)
    steps = store.rows("SELECT operator, accepted, taken, category, message FROM steps ORDER BY created_at")
    exchanges = store.rows("SELECT provider, model, response, error, cost_usd FROM llm_exchanges")
    store.close()
    assert summary.accepted == 1
    assert [(s["operator"], s["accepted"], s["taken"]) for s in steps] == [("llm", False, False), ("llm:tuning", True, True)]
    assert "no ```cuda code block" in steps[0]["message"]
    assert len(exchanges) >= 2 and all(KEY not in (e["response"] or "") for e in exchanges)
    assert any(e["cost_usd"] and e["cost_usd"] > 0 for e in exchanges)
