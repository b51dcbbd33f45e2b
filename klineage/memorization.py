"""Memorization check: is a produced kernel a copy of an expert source, and does any skill carrier
smuggle a large part of its source kernel?

Three measures between two CUDA texts, all on the tree-sitter-cuda parse (comments dropped):

- ``jaccard5``: Jaccard of the *sets* of 5-grams of raw tokens (the parse tree's leaves; string,
  char and number literals are one token each). Sensitive to verbatim copying; renaming lowers it.
- ``ast``: the normalized-AST measure. The tree is serialized in pre-order as node labels: named
  internal nodes by their type, leaves by their text, except that user identifiers become ``ID``
  and literals ``LIT`` (CUDA/C API names such as ``threadIdx``, ``__shfl_xor_sync`` or ``expf``
  stay, because a copier cannot rename them without breaking the kernel). The measure is the
  multiset Jaccard (sum of minima over sum of maxima) of 8-grams of that sequence. We chose
  linearized k-grams over whole-subtree hashes because moving one statement changes the hash of
  every enclosing subtree up to the root (a large, size-weighted loss), but disturbs only the
  k-grams that straddle the moved statement's edges here; renaming, whitespace and comments
  change nothing at all.
- ``longest_run``: the longest common contiguous run of normalized tokens (the leaves with the
  same ``ID``/``LIT`` abstraction), in tokens, and ``run_fraction``, that run over the shorter
  kernel's token count. It catches a verbatim chunk pasted into a larger, otherwise different
  kernel.

A pair is a copy when ``ast >= AST_THRESHOLD`` (0.70) or ``jaccard5 >= JACCARD_THRESHOLD`` (0.75)
or the run is both ``>= RUN_THRESHOLD`` (150 tokens) and ``>= RUN_FRACTION`` (20%) of the shorter
kernel.

Calibration (``calibrate()``, reproduced by tests/test_memorization.py): positives are every
expert kernel (expert_kernels/*/expert.cu, examples/*/expert.cu; 15 files) disguised by
``disguise`` -- every user identifier renamed, comments dropped and new ones added, whitespace
and indentation changed, one pair of independent adjacent declarations per block swapped --
compared with its original, three seeds each (45 pairs). Negatives are every pair of expert
kernels of different operator families (sum, softmax, layernorm, rmsnorm, transpose, topk, gemm,
attention, vector_add; 98 pairs) and every held-out naive kernel against every expert
(23 x 15 = 345 pairs). Measured on this corpus (2026-12-02, 10:40 UTC, with attention_fwd and
gemm_bf16 as they stood then):

=================================  ========  =====  ===========  ============
pairs                              jaccard5  ast    longest_run  run_fraction
=================================  ========  =====  ===========  ============
disguised copies, minimum          0.043     0.903  184          0.237
different operators, maximum       0.441     0.526  241          0.111
held-out naive vs expert, maximum  0.108     0.160  33           0.25
=================================  ========  =====  ===========  ============

The worst negatives: layernorm(_bf16) vs rmsnorm on every token measure (0.441 / 0.526 / run 105:
one author, shared helpers), and attention_fwd vs gemm_bf16 on the run (241 tokens, one shared
helper, but 11% of gemm_bf16). The weakest copies are the small kernels on AST (transpose_batched
0.903, row_sum 0.913) and sgemm on the run fraction (0.237). For reference, same-operator pairs
score as copies, as they are: layernorm vs layernorm_bf16 0.98, softmax vs softmax_fp16 0.87,
transpose vs transpose_batched 0.89 (AST); sgemm vs gemm_bf16 (SIMT vs tensor cores) 0.20.

Thresholds: AST 0.70 (0.17 above the worst negative, 0.20 below the weakest copy; renamed copies
are caught by it alone); 5-gram Jaccard 0.75 (renaming makes it useless against disguised
copies, min 0.04, so it only flags undisguised copies, which score ~1.0; 0.31 above the worst
negative); the run: 150 tokens (about a dozen statements; shared idioms such as warp-shuffle
reductions and launch boilerplate are 20-50) and 20% of the shorter kernel (0.09 above the worst
negative, 0.04 below the weakest copy) -- a shared helper of one author is not a copy, a kernel a
fifth of which is one verbatim expert chunk is.

Carriers: a skill's carrier (a unified diff) must hold at most ``CARRIER_MAX_FRACTION`` (0.35) of
its source kernel's tokens: the tokens of the diff's after-side lines (context and added lines,
the optimized code it shows) that are lines of the expert kernel, over that kernel's tokens
(``carrier_overlap``). Measured on mined skills (launch_bounds, pragma_unroll, restrict from
row_sum and vector_add): 0.11-0.25 on row_sum, the smallest expert (262 tokens); a carrier that is
the whole naive-to-expert diff scores ~1.0. The walker caps a carrier at 60 diff lines with 2 lines
of context, a run of more than 12 added lines showing only its first and last 4 (grid_reduce on
reduce_sum brings a whole vectorized path back with the grid: 0.42 of the expert in full, 0.24
elided); past a third of the kernel the card starts to be the kernel. Exception: a carrier that
reproduces fewer than ``CARRIER_MIN_TOKENS`` (= RUN_THRESHOLD, 150) source tokens passes at any
fraction -- it is too short to carry a copy the kernel check would flag, and in a tiny kernel
(row_sum, 26 lines) two edits with their context are already half the file.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import tree_sitter as ts

from klineage.source.parser import parse

AST_THRESHOLD = 0.70
JACCARD_THRESHOLD = 0.75
RUN_THRESHOLD = 150
#: ... and the run must also cover this fraction of the shorter kernel's normalized tokens
RUN_FRACTION = 0.20
CARRIER_MAX_FRACTION = 0.35
#: a carrier holding fewer source tokens than a flagged copy's run cannot carry a copy
CARRIER_MIN_TOKENS = RUN_THRESHOLD
AST_NGRAM = 8
TOKEN_NGRAM = 5

#: vector-type and dim3 members (``threadIdx.x``, ``v.w``): fields only, a variable ``y`` is a user name
_VECTOR_FIELDS = frozenset({"x", "y", "z", "w"})

#: leaves that are one token each (their children are not descended into)
_ATOMIC = frozenset(
    {
        "string_literal",
        "char_literal",
        "raw_string_literal",
        "system_lib_string",
        "number_literal",
        "concatenated_string",
    }
)
_LITERALS = _ATOMIC | {"true", "false", "nullptr"}
_IDENTIFIERS = frozenset(
    {"identifier", "field_identifier", "type_identifier", "namespace_identifier", "statement_identifier"}
)
_COMMENTS = frozenset({"comment"})

#: CUDA/C API names that stay as they are under normalization (renaming them breaks the kernel)
API_NAMES = frozenset(
    """
threadIdx blockIdx blockDim gridDim warpSize dim3 cudaStream_t size_t uint8_t int8_t uint32_t
int32_t uint64_t int64_t __half __half2 __nv_bfloat16 __nv_bfloat162 float2 float4 int2 int4 half2 half
__syncthreads __syncwarp __shfl_sync __shfl_xor_sync __shfl_down_sync __shfl_up_sync __ballot_sync
__any_sync __all_sync __activemask __ldg __restrict__ atomicAdd atomicMax atomicMin atomicCAS atomicExch
expf exp logf log sqrtf rsqrtf sqrt fmaxf fminf fabsf erff tanhf sinf cosf __expf __logf __fdividef
__frcp_rn __fmul_rn __half2float __float2half __float2half_rn __bfloat162float __float2bfloat16
__float2bfloat16_rn __floats2half2_rn make_float2 make_float4 make_int2 make_int4
make_half2 __halves2half2 __hadd __hmul __hfma __hmax __hadd2 __hmul2 __hfma2 printf memcpy __half22float2 __low2float __high2float max min INFINITY
reinterpret_cast static_cast std cooperative_groups
""".split()
)


# ---- tokens ---------------------------------------------------------------------------------


def _leaves(node: ts.Node) -> Iterable[ts.Node]:
    """Leaves in source order; atomic literals count as one leaf; comments are skipped."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in _COMMENTS:
            continue
        if n.child_count == 0 or n.type in _ATOMIC:
            if n.end_byte > n.start_byte:
                yield n
            continue
        stack.extend(reversed(n.children))


def _is_api(n: ts.Node, text: str) -> bool:
    return text in API_NAMES or (n.type == "field_identifier" and text in _VECTOR_FIELDS)


def _norm_leaf(n: ts.Node) -> str:
    text = (n.text or b"").decode("utf-8", "replace")
    if n.type in _IDENTIFIERS:
        return text if _is_api(n, text) else "ID"
    if n.type in _LITERALS:
        return "LIT"
    if n.type == "preproc_arg":
        return re.sub(r"\b\d[\w.]*", "LIT", " ".join(text.split()))
    return text


@lru_cache(maxsize=512)
def _views(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(raw tokens, normalized tokens, normalized pre-order AST labels) of one source text."""
    root = parse(text).root_node
    raw: list[str] = []
    norm: list[str] = []
    for leaf in _leaves(root):
        raw.append((leaf.text or b"").decode("utf-8", "replace").strip())
        norm.append(_norm_leaf(leaf))
    labels: list[str] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in _COMMENTS:
            continue
        if n.child_count == 0 or n.type in _ATOMIC:
            if n.end_byte > n.start_byte:
                labels.append(_norm_leaf(n))
            continue
        if n.is_named:
            labels.append(f"<{n.type}>")
        stack.extend(reversed(n.children))
    return tuple(raw), tuple(norm), tuple(labels)


def tokens(text: str) -> list[str]:
    """Raw tokens: the parse tree's leaves (literals whole), comments dropped."""
    return list(_views(text)[0])


def normalized_tokens(text: str) -> list[str]:
    """Tokens with user identifiers as ``ID`` and literals as ``LIT``."""
    return list(_views(text)[1])


# ---- measures -------------------------------------------------------------------------------


def _ngrams(seq: Sequence[str], n: int) -> list[tuple[str, ...]]:
    if len(seq) < n:
        return [tuple(seq)] if seq else []
    return [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]


def jaccard(a: Sequence[str], b: Sequence[str], n: int = TOKEN_NGRAM) -> float:
    """Set Jaccard of n-grams."""
    sa, sb = set(_ngrams(a, n)), set(_ngrams(b, n))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def multiset_jaccard(a: Sequence[str], b: Sequence[str], n: int = AST_NGRAM) -> float:
    """Multiset Jaccard of n-grams: sum of minimum counts over sum of maximum counts."""
    ca, cb = Counter(_ngrams(a, n)), Counter(_ngrams(b, n))
    if not ca and not cb:
        return 1.0
    inter = sum((ca & cb).values())
    union = sum((ca | cb).values())
    return inter / union


@lru_cache(maxsize=256)
def _automaton(a: tuple[str, ...]) -> tuple[list[dict[str, int]], list[int], list[int]]:
    """Suffix automaton of a token sequence: (transitions, suffix links, lengths)."""
    nxt: list[dict[str, int]] = [{}]
    link = [-1]
    length = [0]
    last = 0
    for tok in a:
        cur = len(nxt)
        nxt.append({})
        link.append(-1)
        length.append(length[last] + 1)
        p = last
        while p != -1 and tok not in nxt[p]:
            nxt[p][tok] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = nxt[p][tok]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(nxt)
                nxt.append(dict(nxt[q]))
                link.append(link[q])
                length.append(length[p] + 1)
                while p != -1 and nxt[p].get(tok) == q:
                    nxt[p][tok] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        last = cur
    return nxt, link, length


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common contiguous run: `b` walked through a suffix automaton of `a`
    (linear time, exact)."""
    if not a or not b:
        return 0
    nxt, link, length = _automaton(tuple(a))
    best = state = run = 0
    for tok in b:
        while state and tok not in nxt[state]:
            state = link[state]
            run = length[state]
        if tok in nxt[state]:
            state = nxt[state][tok]
            run += 1
        else:
            state, run = 0, 0
        best = max(best, run)
    return best


@lru_cache(maxsize=512)
def _profile(text: str) -> tuple[frozenset[tuple[str, ...]], Counter[tuple[str, ...]], tuple[str, ...]]:
    """(raw-token 5-gram set, AST-label 8-gram multiset, normalized tokens) of one text, cached."""
    raw, norm, labels = _views(text)
    return frozenset(_ngrams(raw, TOKEN_NGRAM)), Counter(_ngrams(labels, AST_NGRAM)), norm


@dataclass(frozen=True)
class Similarity:
    """How alike two kernels are; ``is_copy`` applies the documented thresholds."""

    jaccard5: float
    ast: float
    longest_run: int
    is_copy: bool
    run_fraction: float = 0.0  # longest_run over the shorter kernel's normalized token count

    def to_dict(self) -> dict[str, Any]:
        return {
            "jaccard5": round(self.jaccard5, 4),
            "ast": round(self.ast, 4),
            "longest_run": self.longest_run,
            "run_fraction": round(self.run_fraction, 4),
            "is_copy": self.is_copy,
        }


def is_copy(jaccard5: float, ast: float, longest_run: int, run_fraction: float = 1.0) -> bool:
    """The documented rule: any one measure over its threshold (the run needs both its length and
    its share of the shorter kernel)."""
    long_run = longest_run >= RUN_THRESHOLD and run_fraction >= RUN_FRACTION
    return ast >= AST_THRESHOLD or jaccard5 >= JACCARD_THRESHOLD or long_run


def similarity(a_text: str, b_text: str) -> Similarity:
    """All three measures between two CUDA source texts."""
    ga, ca, na = _profile(a_text)
    gb, cb, nb = _profile(b_text)
    j = len(ga & gb) / len(ga | gb) if (ga or gb) else 1.0
    inter = sum((ca & cb).values())
    union = sum(ca.values()) + sum(cb.values()) - inter  # sum of maxima
    s = inter / union if union else 1.0
    run = longest_common_run(nb, na) if len(na) <= len(nb) else longest_common_run(na, nb)
    frac = run / min(len(na), len(nb)) if na and nb else 0.0
    return Similarity(j, s, run, is_copy(j, s, run, frac), frac)


@dataclass
class MemorizationReport:
    """One produced kernel against every expert source."""

    per_source: dict[str, Similarity] = field(default_factory=dict)

    @property
    def copies(self) -> list[str]:
        return sorted(k for k, v in self.per_source.items() if v.is_copy)

    @property
    def is_copy(self) -> bool:
        return bool(self.copies)

    @property
    def closest(self) -> tuple[str, Similarity] | None:
        if not self.per_source:
            return None
        name = max(self.per_source, key=lambda k: (self.per_source[k].ast, self.per_source[k].jaccard5))
        return name, self.per_source[name]

    def to_dict(self) -> dict[str, Any]:
        near = self.closest
        return {
            "is_copy": self.is_copy,
            "copies": self.copies,
            "closest": None if near is None else {"source": near[0], **near[1].to_dict()},
            "per_source": {k: v.to_dict() for k, v in sorted(self.per_source.items())},
        }


def check_kernel(text: str, expert_sources: Mapping[str, str]) -> MemorizationReport:
    """Similarity of a produced kernel to every expert source."""
    return MemorizationReport({name: similarity(text, src) for name, src in expert_sources.items()})


def expert_sources(root: str | Path = ".") -> dict[str, str]:
    """Every expert source of the corpus and the examples, by workload folder name."""
    root = Path(root)
    out: dict[str, str] = {}
    for pattern in ("expert_kernels/*/expert.cu", "examples/*/expert.cu"):
        for p in sorted(root.glob(pattern)):
            out[p.parent.name] = p.read_text()
    return out


# ---- carriers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CarrierCheck:
    """How much of its source kernel one skill's carrier holds, per source workload."""

    skill_id: str
    workload: str
    carrier_tokens: int
    source_tokens: int
    fraction: float
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "skill_id": self.skill_id,
            "workload": self.workload,
            "carrier_tokens": self.carrier_tokens,
            "source_tokens": self.source_tokens,
            "fraction": round(self.fraction, 4),
            "ok": self.ok,
        }


def carrier_after_text(carrier: str) -> str:
    """The after side of a unified diff: context and added lines, markers stripped."""
    out = []
    for line in carrier.splitlines():
        if line.startswith(("+++", "---", "@@", "... (")):
            continue
        if line.startswith(("+", " ")):
            out.append(line[1:])
        elif line == "":
            out.append("")
    return "\n".join(out)


def _count_tokens(text: str) -> int:
    return len(_views(text)[0]) if text.strip() else 0


def carrier_overlap(carrier: str, source: str) -> tuple[int, int]:
    """(tokens of the source kernel the carrier reproduces, tokens of the source kernel).

    A carrier line counts when it is (whitespace aside) a line of the source, each source line
    matched at most once: so a skill merged from several workloads is charged only against the
    kernel its carrier really came from."""
    pool = Counter(" ".join(line.split()) for line in source.splitlines() if line.strip())
    held: list[str] = []
    for line in carrier_after_text(carrier).splitlines():
        key = " ".join(line.split())
        if key and pool[key] > 0:
            pool[key] -= 1
            held.append(line)
    return _count_tokens("\n".join(held)), _count_tokens(source)


def check_carriers(
    skills: Iterable[Any], sources: Mapping[str, str], max_fraction: float = CARRIER_MAX_FRACTION
) -> list[CarrierCheck]:
    """For each skill and each workload in its provenance (or scope) that has a source text: the
    source tokens its carrier reproduces over the source's tokens; ok when that stays at or below
    ``max_fraction``, or when the carrier holds fewer than ``CARRIER_MIN_TOKENS`` of them (too few
    to carry a copy the kernel check would flag: a tiny kernel's every carrier is a large fraction
    of it). Skills whose source is unknown are skipped."""
    out: list[CarrierCheck] = []
    for skill in skills:
        carrier = getattr(skill, "carrier", "") or ""
        names = [p.get("workload") for p in getattr(skill, "provenance", []) or [] if isinstance(p, dict)]
        if not names:
            names = list((getattr(skill, "scope", {}) or {}).get("workloads", []))
        for name in dict.fromkeys(n for n in names if n in sources):
            held, total = carrier_overlap(carrier, sources[name])
            frac = held / total if total else 0.0
            ok = frac <= max_fraction or held < CARRIER_MIN_TOKENS
            out.append(CarrierCheck(getattr(skill, "skill_id", "?"), name, held, total, frac, ok))
    return out


# ---- calibration ----------------------------------------------------------------------------

_FAMILIES = {
    "reduce_sum": "sum",
    "reduce_sum_rows": "sum",
    "row_sum": "sum",
    "softmax": "softmax",
    "softmax_fp16": "softmax",
    "layernorm": "layernorm",
    "layernorm_bf16": "layernorm",
    "rmsnorm": "rmsnorm",
    "transpose": "transpose",
    "transpose_batched": "transpose",
    "topk": "topk",
    # second lineages of a structural skill (issue 24): written on purpose with their sibling's
    # structure (a grid reduction, row reductions, a register-cached row softmax, a tiled
    # transpose), so the calibration does not count them as different operators
    "dot": "sum",
    "row_max": "sum",
    "log_softmax": "softmax",
    "permute_nhwc": "transpose",
    "vector_add": "vector_add",
    "sgemm": "gemm",
    "gemm_bf16": "gemm",
    "linear_relu_bf16": "gemm",  # the second 16-bit GEMM lineage (issue 25)
    "attention_fwd": "attention",
    "attention_gqa": "attention",
}


def family(name: str) -> str:
    """The operator family of a corpus workload: the table above, else the name without dtype and
    variant suffixes (a future ``softmax_bf16`` joins ``softmax``, not the negatives)."""
    if name in _FAMILIES:
        return _FAMILIES[name]
    base = re.sub(r"(_(fp16|fp32|bf16|f16|f32|half|fwd|bwd|batched|rows|cols|[0-9]+d))+$", "", name)
    return _FAMILIES.get(base, base)


def rename_identifiers(text: str, rename: Callable[[str], str]) -> str:
    """Every user identifier (not a CUDA/C API name, not ``__``-prefixed, not ``launch``) replaced by
    ``rename(name)``, consistently; comments dropped."""
    data = text.encode()
    edits: list[tuple[int, int, bytes]] = []
    names: dict[str, str] = {}
    stack = [parse(data).root_node]
    while stack:
        n = stack.pop()
        if n.type in _COMMENTS:
            edits.append((n.start_byte, n.end_byte, b""))
        elif n.child_count == 0 and n.type in _IDENTIFIERS:
            old = (n.text or b"").decode()
            if not _is_api(n, old) and not old.startswith("__") and old not in ("launch", "main"):
                new = names.get(old)
                if new is None:
                    new = names[old] = rename(old)
                edits.append((n.start_byte, n.end_byte, new.encode()))
        else:
            stack.extend(n.children)
    for s, e, r in sorted(edits, reverse=True):
        data = data[:s] + r + data[e:]
    return data.decode()


def disguise(text: str, seed: int = 0) -> str:
    """A copy meant to evade a naive detector: independent adjacent declarations swapped, every
    user identifier renamed consistently, comments dropped and new ones added, indentation and
    blank lines changed. Used to calibrate the thresholds."""
    rng = random.Random(seed)
    fresh = iter(range(1 << 30))
    text = rename_identifiers(_swap_pass(text, rng), lambda _: f"q{rng.randrange(16**4):04x}_{next(fresh)}")
    lines = []
    for line in text.splitlines():
        body = line.strip()
        if not body:
            continue
        if body.startswith("#"):
            lines.append(body)
            continue
        indent = "\t" * ((len(line) - len(line.lstrip())) // 4)
        lines.append(indent + body + ("  /* step */" if rng.random() < 0.15 and body.endswith(";") else ""))
        if rng.random() < 0.1:
            lines.append("")
    return "\n".join(lines) + "\n"


def _first_name(node: ts.Node) -> str | None:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            return (n.text or b"").decode()
        stack.extend(reversed(n.children))
    return None


def _declared(stmt: ts.Node) -> set[str]:
    """Names a declaration statement introduces (one per declarator)."""
    out: set[str] = set()
    for c in stmt.named_children:
        if c.type in (
            "init_declarator",
            "identifier",
            "array_declarator",
            "pointer_declarator",
            "reference_declarator",
        ):
            name = _first_name(c)
            if name:
                out.add(name)
    return out


def _used(stmt: ts.Node) -> set[str]:
    out: set[str] = set()
    stack = [stmt]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.add((n.text or b"").decode())
        stack.extend(n.children)
    return out


def _swap_pass(text: str, rng: random.Random) -> str:
    """In each block, swap one pair of adjacent declarations that do not refer to each other."""
    data = text.encode()
    edits: list[tuple[int, int, bytes]] = []
    stack = [parse(data).root_node]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "compound_statement":
            continue
        kids = [c for c in n.named_children if c.type != "comment"]
        pairs = [
            (a, b)
            for a, b in zip(kids, kids[1:], strict=False)
            if a.type == b.type == "declaration"
            and not (_declared(a) & _used(b))
            and not (_declared(b) & _used(a))
        ]
        if pairs:
            a, b = rng.choice(pairs)
            between = data[a.end_byte : b.start_byte]
            edits.append(
                (
                    a.start_byte,
                    b.end_byte,
                    data[b.start_byte : b.end_byte] + between + data[a.start_byte : a.end_byte],
                )
            )
    # blocks nest, but the chosen pairs are declarations (no nested blocks), so edits never overlap
    for s, e, r in sorted(edits, reverse=True):
        data = data[:s] + r + data[e:]
    return data.decode()


@dataclass
class Calibration:
    """Measured similarities of known copies and known non-copies."""

    copies: list[tuple[str, Similarity]]
    different_ops: list[tuple[str, str, Similarity]]
    heldout_vs_expert: list[tuple[str, str, Similarity]]

    def summary(self) -> dict[str, dict[str, float]]:
        def agg(rows: list[Similarity], fn: Any) -> dict[str, float]:
            if not rows:
                return {}
            return {
                "jaccard5": fn(r.jaccard5 for r in rows),
                "ast": fn(r.ast for r in rows),
                "longest_run": fn(r.longest_run for r in rows),
            }

        return {
            "copies_min": agg([s for _, s in self.copies], min),
            "different_ops_max": agg([s for *_, s in self.different_ops], max),
            "heldout_vs_expert_max": agg([s for *_, s in self.heldout_vs_expert], max),
        }


def calibrate(root: str | Path = ".", seeds: Sequence[int] = (0, 1, 2)) -> Calibration:
    """Similarities of disguised copies of every expert, of every pair of different-family experts,
    and of every held-out naive kernel against every expert."""
    root = Path(root)
    experts = expert_sources(root)
    copies = [(name, similarity(src, disguise(src, seed))) for name, src in experts.items() for seed in seeds]
    names = sorted(experts)
    diff = [
        (a, b, similarity(experts[a], experts[b]))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if family(a) != family(b)
    ]
    held = [
        (p.parent.name, name, similarity(p.read_text(), src))
        for p in sorted(root.glob("heldout/*/naive.cu"))
        for name, src in experts.items()
    ]
    return Calibration(copies, diff, held)
