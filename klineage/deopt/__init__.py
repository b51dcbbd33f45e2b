"""De-optimization operators: each expert technique as a rule that finds, removes and, where
mechanical, re-applies it. `registry.operators()` lists them in the soft removal order."""

from klineage.deopt.base import CATEGORIES, Operator, Precondition, Refused, Site
from klineage.deopt.registry import get_operator, operators

__all__ = ["CATEGORIES", "Operator", "Precondition", "Refused", "Site", "get_operator", "operators"]
