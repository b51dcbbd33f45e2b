"""The LLM de-optimization operator: open vocabulary, where rules cannot reach.

A model (any provider of klineage.llm) is asked to remove exactly one optimization of its
choice, naming its category and locus. Its answer is held to the same rules as a rule
operator's edit before the gate ever sees it: it must parse, keep the launcher, and differ
from the input after normalization; then the walker gates it like any other candidate.

A provider failure (LLMError: retries spent, a refused request, unreadable replies) is not a
refusal of one candidate: it ends the mining run (status `failed` with the reason, CLI exit 3),
and every later ask fails at once without a call. A spent `--llm-max-cost` only stops the asking:
each later ask is refused without a call and the rule operators mine on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

import jinja2

from klineage.deopt.base import CATEGORIES, Refused
from klineage.errors import SourceError
from klineage.llm.base import Completion, CostLimitReached, LLMError, LLMProvider
from klineage.source.model import CudaSource
from klineage.source.text import normalize

_HEADER = re.compile(r"\{[^{}]*\"category\"[^{}]*\}", re.S)
_FENCE = re.compile(r"```[ \t]*(?:cuda|cu|c\+\+|cpp)[^\n]*\n(.*?)```", re.S)


@dataclass(frozen=True)
class LLMRemoval:
    """A model's proposed simplification, checked statically (not yet gated)."""

    source: str
    category: str
    locus: str
    intent: str
    completion: Completion

    @property
    def operator(self) -> str:
        return f"llm:{self.category}"


def _template() -> jinja2.Template:
    text = resources.files("klineage.deopt").joinpath("llm_remove.md.j2").read_text()
    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True).from_string(text)


def render_prompt(
    source: str, signature: str, already: list[str] | None = None, feedback: str | None = None
) -> str:
    return _template().render(
        source=source,
        signature=signature,
        already=already or [],
        feedback=feedback,
        categories=list(CATEGORIES),
    )


def parse_reply(reply: str, before: CudaSource) -> tuple[str, dict[str, str]]:
    """(new source, header) from a reply; Refused saying what is wrong with it."""
    blocks = _FENCE.findall(reply)
    if not blocks:
        raise Refused("llm: the reply has no ```cuda code block")
    new = blocks[-1].rstrip() + "\n"
    m = _HEADER.search(reply.split("```", 1)[0])
    if not m:
        raise Refused('llm: the reply does not name what it removed (a JSON line with "category")')
    try:
        header = {k: str(v) for k, v in json.loads(m.group(0)).items()}
    except json.JSONDecodeError as e:
        raise Refused(f"llm: the header line is not valid JSON ({e.msg})") from None
    category = header.get("category", "")
    if category not in (*CATEGORIES, "other"):
        raise Refused(f"llm: unknown category '{category}' (known: {', '.join(CATEGORIES)}, other)")
    try:
        src = CudaSource.from_text(new, before.path)
    except SourceError as e:
        raise Refused(f"llm: the simplified file does not parse: {e}") from None
    if "launch" not in [f.name for f in src.launchers]:
        raise Refused('llm: the simplified file lost its extern "C" launch launcher')
    if normalize(new) == normalize(before.text):
        raise Refused("llm: the simplified file is the input unchanged")
    return new, header


class LLMOperator:
    """Asks `provider` for one removal; `propose` returns it checked, or raises Refused/LLMError."""

    name = "llm"

    def __init__(self, provider: LLMProvider, max_tokens: int = 16000) -> None:
        self.provider = provider
        self.max_tokens = max_tokens
        self.failure: LLMError | None = None  # the provider failure that ended the asking
        self.spent: str = ""  # why no more is asked (the cost limit), else ""

    def propose(
        self, src: CudaSource, signature: str, already: list[str] | None = None, feedback: str | None = None
    ) -> LLMRemoval:
        if self.failure is not None:
            raise self.failure
        if self.spent:
            raise Refused(f"llm: not asked: {self.spent}")
        prompt = render_prompt(src.text, signature, already, feedback)
        system = [("You simplify CUDA kernels for a research tool. Follow the answer format exactly.", True)]
        try:
            completion = self.provider.complete(
                system,
                [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
                max_tokens=self.max_tokens,
                purpose="deopt",
            )
        except CostLimitReached as e:
            self.spent = str(e)
            raise Refused(f"llm: not asked: {e}") from None
        except LLMError as e:
            self.failure = e
            raise
        new, header = parse_reply(completion.text, src)
        return LLMRemoval(
            new, header["category"], header.get("locus", ""), header.get("intent", ""), completion
        )
