"""The canonicalizer (klineage/source/canon): each rule on the spellings it rewrites, the spellings
it must leave alone, the fixed point, and the gate's verdict on kernels written in other idioms."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.block_per_row import BlockPerRow
from klineage.deopt.registry import operators
from klineage.deopt.warp_per_row import WarpPerRow
from klineage.source.canon import RULES, canonical_form
from klineage.source.canon.barriers import BarrierSpelling
from klineage.source.canon.constants import ConstToConstexpr, DefineToConstexpr, EnumToConstexpr
from klineage.source.canon.guards import GuardToReturn
from klineage.source.canon.loops import InlineStride, WhileToFor
from klineage.source.canon.shadow import HostShadowRename
from klineage.source.canon.thread_index import ThreadIndexSpelling
from klineage.source.model import CudaSource
from klineage.source.text import normalize

DATA = Path(__file__).parent / "data" / "canon"
CORPUS = Path(__file__).parents[1] / "expert_kernels"


def _rw(rule, text: str) -> str:
    out = rule.rewrite(CudaSource.from_text(text))
    return normalize(out.text) if out is not None else "UNCHANGED"


K = "__global__ void k(float* x, int n) {{ {} }}"

CASES = [
    (
        WhileToFor(),
        K.format("int i = threadIdx.x; while (i < n) { x[i] = 0; i += 32; }"),
        K.format("for (int i = threadIdx.x; i < n; i += 32) { x[i] = 0; }"),
    ),
    (
        WhileToFor(),
        K.format("int i = threadIdx.x; float a = 1; while (i < n) { x[i] = a; i = i + 32; }"),
        K.format("float a = 1; for (int i = threadIdx.x; i < n; i += 32) { x[i] = a; }"),
    ),
    (
        WhileToFor(),
        K.format("int i = 0; while (i < n) { x[i] = 0; ++i; } x[0] = i;"),
        K.format("int i = 0; for (; i < n; ++i) { x[i] = 0; } x[0] = i;"),
    ),
    (
        InlineStride(),
        K.format("int s = blockDim.x * gridDim.x; for (int i = threadIdx.x; i < n; i += s) x[i] = 0;"),
        K.format("for (int i = threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] = 0;"),
    ),
    (
        BarrierSpelling(),
        "namespace cg = cooperative_groups;"
        + K.format(
            "cg::thread_block b = cg::this_thread_block(); x[0] = 1; b.sync(); cg::sync(b); "
            "cg::this_thread_block().sync();"
        ),
        "namespace cg = cooperative_groups;"
        + K.format("x[0] = 1; __syncthreads(); __syncthreads(); __syncthreads();"),
    ),
    (
        GuardToReturn(),
        K.format("int r = blockIdx.x; if (r < n && n > 1) { float v = 2; x[r] = v; }"),
        K.format("int r = blockIdx.x; if (r >= n || n <= 1) return; float v = 2; x[r] = v;"),
    ),
    (
        ThreadIndexSpelling(),
        K.format("int i = threadIdx.x + blockDim.x * blockIdx.x; x[i + 1] = 0;"),
        K.format("int i = blockIdx.x * blockDim.x + threadIdx.x; x[i + 1] = 0;"),
    ),
    (
        DefineToConstexpr(),
        "#define TILE (16 * 2)\n" + K.format("x[TILE] = 0;"),
        "constexpr int TILE = (16 * 2);" + K.format("x[TILE] = 0;"),
    ),
    (
        ConstToConstexpr(),
        "const uint TM = 8;\n" + K.format("x[TM] = 0;"),
        "constexpr unsigned int TM = 8;" + K.format("x[TM] = 0;"),
    ),
    (
        EnumToConstexpr(),
        "enum { BM = 64, BN };\n" + K.format("x[BN] = 0;"),
        "constexpr int BM = 64; constexpr int BN = 65;" + K.format("x[BN] = 0;"),
    ),
    (
        HostShadowRename(),
        'extern "C" void launch(int n) { dim3 gridDim(n); dim3 blockDim(4); f<<<gridDim, blockDim>>>(); }',
        'extern "C" void launch(int n) { dim3 grid_dim(n); dim3 block_dim(4); f<<<grid_dim, block_dim>>>(); }',
    ),
]


@pytest.mark.parametrize(
    ("rule", "before", "after"), CASES, ids=[f"{c[0].name}-{i}" for i, c in enumerate(CASES)]
)
def test_rule_rewrites_its_spelling(rule, before: str, after: str) -> None:
    assert _rw(rule, before) == normalize(after)


LEFT_ALONE = [
    # a `continue` would skip the step in the while loop but not in a for loop
    (WhileToFor(), K.format("int i = 0; while (i < n) { if (x[i] > 0) continue; x[i] = 0; ++i; }")),
    # the last statement steps another variable
    (WhileToFor(), K.format("int i = 0, j = 0; while (i < n) { x[i] = 0; ++j; }")),
    # the stride is computed by each thread
    (InlineStride(), K.format("int s = threadIdx.x + 1; for (int i = 0; i < n; i += s) x[i] = 0;")),
    # code after the guard runs for every thread
    (GuardToReturn(), K.format("int r = blockIdx.x; if (r < n) { x[r] = 1; } x[0] = 2;")),
    # a role test, not a bound: experts keep the branch
    (GuardToReturn(), K.format("int w = threadIdx.x / 32; if (w == 0) { x[w] = 1; }")),
    # the body redeclares a name the kernel's top level has
    (GuardToReturn(), K.format("int r = blockIdx.x; if (r < n) { int r = 2; x[r] = 1; }")),
    # the preprocessor tests the macro
    (DefineToConstexpr(), "#define TILE 16\n#if TILE > 8\n#endif\n" + K.format("x[TILE] = 0;")),
    # a tile group's sync is a warp's, not the block's
    (BarrierSpelling(), K.format("auto w = cg::tiled_partition<32>(cg::this_thread_block()); w.sync();")),
    # a const the file cannot compute
    (ConstToConstexpr(), K.format("const int m = n * 2; x[m] = 0;")),
    # device code never shadows; only host functions are renamed
    (HostShadowRename(), K.format("x[blockDim.x] = 0;")),
]


@pytest.mark.parametrize(
    ("rule", "text"), LEFT_ALONE, ids=[f"{c[0].name}-{i}" for i, c in enumerate(LEFT_ALONE)]
)
def test_rule_leaves_other_code_alone(rule, text: str) -> None:
    assert _rw(rule, text) == "UNCHANGED"


@pytest.mark.parametrize("name", ["block_sum", "row_sum"])
def test_canonical_form_is_a_fixed_point_and_passes_the_gate(name: str, tmp_path: Path) -> None:
    src = CudaSource.from_file(DATA / name / "expert.cu")
    canon = canonical_form(src)
    assert canon.changed
    assert canonical_form(canon.source).applied == ()
    assert_passes(canon.source.text, DATA / name, tmp_path)


def test_canonical_form_opens_the_row_operators() -> None:
    """A row guard written as a block hides the thread-per-row kernel from the row operators."""
    src = CudaSource.from_file(DATA / "row_sum" / "expert.cu")
    canon = canonical_form(src).source
    for op in (WarpPerRow(), BlockPerRow()):
        assert all(not all(f.holds for f in op.preconditions(src, s)) for s in op.find_forward(src))
        ok = [
            s.anchor.function
            for s in op.find_forward(canon)
            if all(f.holds for f in op.preconditions(canon, s))
        ]
        assert ok == ["row_sum"], op.name


def test_shipped_corpus_sites_do_not_change() -> None:
    """The corpus is written in canonical idioms already: no operator finds other sites in it."""
    ops = operators()
    for f in sorted(CORPUS.glob("*/expert.cu")):
        src = CudaSource.from_file(f)
        canon = canonical_form(src).source
        for op in ops:
            assert [s.summary for s in op.find(src)] == [s.summary for s in op.find(canon)], (f, op.name)


def test_rules_have_unique_names() -> None:
    assert len({r.name for r in RULES}) == len(RULES)


@pytest.mark.parametrize("beam", [1, 2])
def test_walker_records_the_canonical_step_and_never_a_skill(tmp_path: Path, beam: int) -> None:
    """expert -> canonical is the lineage's first step, gated and taken, then the walk goes on from
    the canonical form; the skills come from the later steps only."""
    from klineage.deopt.tile_size import TileSize
    from klineage.skills import extract_skills
    from klineage.store.db import Store
    from klineage.walker import WalkConfig, Walker
    from klineage.workload import load_workload

    store = Store(tmp_path / "s.duckdb")
    walker = Walker(store, WalkConfig(operators=[TileSize()], max_steps=1, beam=beam, roundtrip=False))
    summary = walker.walk(DATA / "row_sum")
    steps = store.rows(
        "SELECT s.operator, s.taken, s.accepted, st.depth FROM steps s JOIN states st"
        " ON st.workload = s.workload AND st.state_hash = s.from_state WHERE s.taken ORDER BY st.depth"
    )
    skills = extract_skills(store, load_workload(DATA / "row_sum"))
    canon_state = store.rows(
        "SELECT k.source FROM states s JOIN kernels k ON k.kernel_hash = s.state_hash WHERE s.depth = 1"
    )
    store.close()
    assert [(s["operator"], s["depth"]) for s in steps] == [("canonicalize", 0), ("tile_size", 1)]
    assert "if (row >= M) return;" in canon_state[0]["source"]
    assert [s.operator for s in skills] == ["tile_size"]
    assert summary.depth == 2


def test_initializer_spellings() -> None:
    from klineage.source.canon.initializers import BraceInitializer, FunctorCall

    assert _rw(
        BraceInitializer(), K.format("constexpr unsigned int T{8U}; size_t const i{threadIdx.x}; x[i] = T;")
    ) == normalize(K.format("constexpr unsigned int T = 8U; size_t const i = threadIdx.x; x[i] = T;"))
    assert _rw(BraceInitializer(), K.format("dim3 const b{4U, 1U}; x[0] = b.x;")) == "UNCHANGED"
    assert _rw(FunctorCall(), K.format("x[0] = cg::reduce(w, x[1], cg::plus<float>{});")) == normalize(
        K.format("x[0] = cg::reduce(w, x[1], cg::plus<float>());")
    )


def test_one_dimensional_dim3_is_written_at_the_launch() -> None:
    from klineage.source.canon.launch import InlineDim3

    host = 'extern "C" void launch(float* x, int n) {{ {} }}'
    assert _rw(InlineDim3(), host.format("dim3 g(n / 4, 1); dim3 b(4); k<<<g, b>>>(x);")) == normalize(
        host.format("k<<<(n / 4), 4>>>(x);")
    )
    assert _rw(InlineDim3(), host.format("dim3 g(n, 2); k<<<g, 4>>>(x);")) == "UNCHANGED"  # two-dimensional
    assert (
        _rw(InlineDim3(), host.format("dim3 g(n); k<<<g, 4>>>(x); x[0] = g.x;")) == "UNCHANGED"
    )  # read elsewhere
    assert (
        _rw(InlineDim3(), host.format("dim3 g(n); n = 2; k<<<g, 4>>>(x);")) == "UNCHANGED"
    )  # n changes first
