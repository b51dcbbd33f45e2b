"""Candidate providers for the materializer: `offline` (operators' apply) and `anthropic`."""

from klineage.materialize.providers.base import (
    Move,
    Proposal,
    ProposalRequest,
    Provider,
    make_provider,
    provider_names,
    register_provider,
)

__all__ = [
    "Move",
    "Proposal",
    "ProposalRequest",
    "Provider",
    "make_provider",
    "provider_names",
    "register_provider",
]
