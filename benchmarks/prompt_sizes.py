"""Prompt sizes of the anthropic provider for the shipped store (issue 30): every card with its
evidence (the prompt before the token budget) against the budgeted prompt of the skills that match
each expert workload's naive kernel. CPU only, no key, no network:

    .venv/bin/python benchmarks/prompt_sizes.py
"""

from __future__ import annotations

import random
from pathlib import Path

from klineage.cards import to_markdown
from klineage.export import shipped_store
from klineage.llm.anthropic_provider import estimate_tokens
from klineage.materialize.curriculum import rank
from klineage.materialize.matching import Target, match_skills
from klineage.materialize.prompts import build_prompt, environment, system_prompt, task_prompt
from klineage.materialize.providers.base import Move, ProposalRequest
from klineage.skills import load_skills
from klineage.source.model import CudaSource
from klineage.store.db import Store
from klineage.workload import load_workload


def main() -> None:
    with Store(shipped_store(Path("skills_db/skills.duckdb"))) as store:
        skills = load_skills(store)
    every = environment().get_template("skills.md.j2").render(cards=[to_markdown(s) for s in skills])
    print(
        f"{len(skills)} shipped skills; every card with its evidence: {len(every.encode())} bytes, "
        f"~{estimate_tokens([(every, True)], [])} tokens (local estimate, bytes / 3)"
    )
    print(
        "| workload | matching skills | cards sent | prompt bytes | est. tokens | every card, est. tokens |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for d in sorted(p for p in Path("expert_kernels").iterdir() if (p / "naive.cu").is_file()):
        wl = load_workload(d)
        src = CudaSource.from_text((d / "naive.cu").read_text(), "naive.cu")
        found = match_skills(src, skills, Target(wl.name, tuple(wl.dtypes)), mechanical_only=False)
        ranked = [m.skill for m in rank(found.applicable, "curriculum", random.Random(0))]
        move = Move(ranked[0].skill_id, ranked[0]) if ranked else Move("free")
        req = ProposalRequest(wl, src.text, move, "", 1, "emu", ranked)
        p = build_prompt(req)
        size = sum(len(t.encode()) for t, _ in p.system) + len(p.messages[0]["content"][0]["text"].encode())
        old = estimate_tokens(
            [(system_prompt(wl, "emu"), True), (every, True)],
            [{"role": "user", "content": [{"type": "text", "text": task_prompt(req)}]}],
        )
        print(f"| {wl.name} | {len(ranked)} | {len(p.cards)} | {size} | {p.tokens} | {old} |")


if __name__ == "__main__":
    main()
