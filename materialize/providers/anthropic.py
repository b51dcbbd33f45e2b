"""The `anthropic` provider: a jinja2 prompt (rules, matching skill cards, code, gate feedback) cut
to a token budget and sent through klineage.llm's Anthropic client; the kernel is the reply's last
```cuda block.

Money, retries and timeouts live in the client (klineage.llm.anthropic_provider); this class turns
a move into a prompt that fits `prompt_budget` tokens (counted by the client: the API's
count_tokens where reachable) and a reply into a candidate, or into a clear rejection. When the
API still answers that the prompt is too long, the budget is halved and the call made once more.
"""

from __future__ import annotations

from collections.abc import Callable

from klineage.llm.base import Completion, ContextTooLong, Exchange, Ledger, LLMProvider
from klineage.materialize.prompts import DEFAULT_BUDGET, Prompt, fit_prompt
from klineage.materialize.providers.base import Proposal, ProposalRequest, Provider, register_provider
from klineage.materialize.reply import NoKernel, extract_kernel


@register_provider
class AnthropicProvider(Provider):
    name = "anthropic"
    mechanical = False
    attempts_per_move = 2  # a second try on the same kernel sees the first one's gate feedback

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        max_cost_usd: float | None = None,
        max_tokens: int = 16000,
        llm: LLMProvider | None = None,
        prompt_budget: int = DEFAULT_BUDGET,
        **client_options: object,
    ) -> None:
        if llm is None:
            from klineage.llm.anthropic_provider import AnthropicLLM

            llm = AnthropicLLM(model, base_url=base_url, max_cost_usd=max_cost_usd, **client_options)  # type: ignore[arg-type]
        self.llm = llm
        self.model = llm.model
        self.max_tokens = max_tokens
        self.prompt_budget = prompt_budget

    @property
    def ledger(self) -> Ledger:
        return self.llm.ledger

    def set_recorder(self, recorder: Callable[[Exchange], None] | None) -> None:
        self.llm.recorder = recorder  # type: ignore[attr-defined]

    def _ask(self, request: ProposalRequest, budget: int) -> tuple[Prompt, Completion]:
        prompt = fit_prompt(request, budget, self.llm.count_tokens)
        c = self.llm.complete(
            prompt.system,
            prompt.messages,
            max_tokens=self.max_tokens,
            purpose=f"materialize:{request.move.label}",
        )
        return prompt, c

    def propose(self, request: ProposalRequest) -> Proposal:
        """One exchange (two when the first prompt was too long for the model); CostLimitReached
        and LLMError propagate to the loop, which ends the run with the reason."""
        try:
            prompt, c = self._ask(request, self.prompt_budget)
        except ContextTooLong:
            prompt, c = self._ask(request, self.prompt_budget // 2)  # a second ContextTooLong ends the run
        usage = {
            "input_tokens": c.usage.input_tokens,
            "output_tokens": c.usage.output_tokens,
            "cache_read_tokens": c.usage.cache_read_tokens,
            "cache_write_tokens": c.usage.cache_write_tokens,
            "prompt_tokens": prompt.tokens,
            "cards": len(prompt.cards),
        }
        try:
            code = extract_kernel(c.text)
        except NoKernel as e:
            return Proposal(None, f"rejected reply: {e}", c.cost_usd, [c.exchange_id], usage)
        return Proposal(
            code, f"{c.model}: {c.usage.output_tokens} output tokens", c.cost_usd, [c.exchange_id], usage
        )
