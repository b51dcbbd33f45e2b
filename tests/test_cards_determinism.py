"""A skill card's text depends on the skill, not on the order its evidence was merged in: a
resumed mine and a fresh one build the same dicts with keys in another order."""

from __future__ import annotations

import copy

from klineage.cards import from_markdown, to_markdown
from tests.test_materialize_helpers import make_skill


def test_card_text_ignores_key_order() -> None:
    a = make_skill("restrict")
    a.evidence = {"steps": ["s1", "s2"], "gate_runs": ["g1"], "transitions": ["x->y"]}
    a.effects = {"per_workload": {"w2": {"time_ratio": 1.5, "device": "d"}, "w1": {"device": "d", "time_ratio": 2.0}}}
    b = copy.deepcopy(a)
    b.evidence = {"transitions": ["x->y"], "gate_runs": ["g1"], "steps": ["s1", "s2"]}
    b.effects = {"per_workload": {"w1": {"time_ratio": 2.0, "device": "d"}, "w2": {"device": "d", "time_ratio": 1.5}}}
    assert to_markdown(a) == to_markdown(b)
    assert from_markdown(to_markdown(a), "card.md").evidence == a.evidence  # lists keep their order
    b.evidence["steps"] = ["s2", "s1"]
    assert to_markdown(a) != to_markdown(b)
