"""Language-model providers behind one small interface, with token, cache and cost accounting.

`get_llm("anthropic", model=...)` returns an object with `complete(system, messages) -> Completion`.
The materializer builds its prompts on top of this; the LLM de-optimization operator can call the
same function. Providers register by name (`register_llm`), like plugins.
"""

from klineage.llm.base import (
    EXIT_PROVIDER_FAILED,
    Completion,
    ContextTooLong,
    CostLimitReached,
    Ledger,
    LLMError,
    LLMProvider,
    MissingKeyError,
    Usage,
    get_llm,
    llm_names,
    register_llm,
)
from klineage.llm.pricing import PRICES, PRICES_AS_OF, Price, cost_of, price_for

__all__ = [
    "EXIT_PROVIDER_FAILED",
    "PRICES",
    "PRICES_AS_OF",
    "Completion",
    "ContextTooLong",
    "CostLimitReached",
    "LLMError",
    "LLMProvider",
    "Ledger",
    "MissingKeyError",
    "Price",
    "Usage",
    "cost_of",
    "get_llm",
    "llm_names",
    "price_for",
    "register_llm",
]
