"""A skill card's text depends on the skill, not on the order its evidence was merged in: a
resumed mine and a fresh one build the same dicts with keys in another order."""

from __future__ import annotations

import copy
from dataclasses import replace

from klineage.cards import from_markdown, to_markdown
from tests.test_materialize_helpers import make_skill


def test_card_text_ignores_key_order() -> None:
    a = replace(
        make_skill("restrict"),
        evidence={"steps": ["s1", "s2"], "gate_runs": ["g1"], "transitions": ["x->y"]},
        effects={
            "per_workload": {
                "w2": {"time_ratio": 1.5, "device": "d"},
                "w1": {"device": "d", "time_ratio": 2.0},
            }
        },
    )
    b = replace(
        copy.deepcopy(a),
        evidence={"transitions": ["x->y"], "gate_runs": ["g1"], "steps": ["s1", "s2"]},
        effects={
            "per_workload": {
                "w1": {"time_ratio": 2.0, "device": "d"},
                "w2": {"device": "d", "time_ratio": 1.5},
            }
        },
    )
    assert to_markdown(a) == to_markdown(b)
    assert from_markdown(to_markdown(a), "card.md").evidence == a.evidence  # lists keep their order
    b.evidence["steps"] = ["s2", "s1"]
    assert to_markdown(a) != to_markdown(b)
