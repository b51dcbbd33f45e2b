"""The canonicalizer: before any operator looks at a kernel, bring it to one spelling.

Each rule is a small semantics-preserving rewrite (base.Rule); `canonical_form` runs them all to
a fixed point. The walker gates the result like any step and records expert -> canonical as the
lineage's first step, never as a skill: operators then read canonical forms only.
"""

from klineage.source.canon.aliases import SharedArrayAlias, ThreadIndexAlias
from klineage.source.canon.barriers import BarrierSpelling
from klineage.source.canon.base import Canonical, Rule, canonicalize
from klineage.source.canon.cg_tiles import CgTileSpelling
from klineage.source.canon.constants import ConstToConstexpr, DefineToConstexpr, EnumToConstexpr
from klineage.source.canon.guards import GuardToReturn
from klineage.source.canon.host_args import HostArgToConstexpr
from klineage.source.canon.initializers import BraceInitializer, FunctorCall
from klineage.source.canon.inline_helpers import InlineStagingHelper
from klineage.source.canon.lane_guard import WarpUniformLaneGuard
from klineage.source.canon.launch import InlineDim3
from klineage.source.canon.loops import InlineStride, WhileToFor
from klineage.source.canon.scopes import LoopLocalTemporary
from klineage.source.canon.shadow import HostShadowRename
from klineage.source.canon.templates import TemplateArgsToConstexpr
from klineage.source.canon.thread_index import ThreadIndexSpelling
from klineage.source.model import CudaSource

#: the operator name the walker records the canonical step under (never a skill)
CANON_STEP = "canonicalize"

#: every rule, in the order each round runs them
RULES: tuple[Rule, ...] = (
    HostShadowRename(),
    BraceInitializer(),
    FunctorCall(),
    InlineDim3(),
    DefineToConstexpr(),
    EnumToConstexpr(),
    ConstToConstexpr(),
    TemplateArgsToConstexpr(),
    HostArgToConstexpr(),
    BarrierSpelling(),
    CgTileSpelling(),
    ThreadIndexSpelling(),
    ThreadIndexAlias(),
    SharedArrayAlias(),
    LoopLocalTemporary(),
    WarpUniformLaneGuard(),
    WhileToFor(),
    InlineStride(),
    GuardToReturn(),
    InlineStagingHelper(),
)


def canonical_form(src: CudaSource) -> Canonical:
    """`src` with every rule run to a fixed point."""
    return canonicalize(src, RULES)


__all__ = ["CANON_STEP", "RULES", "Canonical", "Rule", "canonical_form", "canonicalize"]
