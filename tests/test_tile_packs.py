"""Packed (16-byte) global loads for a block's tile staging loop (vectorize's `tile_load_pack`,
issue 25): found in the tiled sgemm the GEMM operators write and in a tiled GEMM written in another
author's idiom (a `#define` tile, separate row/column declarations, B staged transposed), applied
behind an alignment dispatch, accepted by the emu gate on odd shapes (K not a multiple of 4, so
packs fall back lane by lane), and removed back to the exact kernel by the dispatch's removal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, ptx_of
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt import tile_packs as TP
from klineage.deopt.registry import get_operator
from klineage.source.model import CudaSource

ROOT = Path(__file__).resolve().parents[1]
SGEMM = ROOT / "expert_kernels" / "sgemm"
OP = get_operator("vectorize")

#: a tiled GEMM as another author writes it: a #define tile, a 1-D block of TILE * TILE / 4
#: threads each owning a 4-row strip, row and column declared apart, A staged row-major with the
#: guard spelled per coordinate and B staged transposed (Bt[c][r] = B[(k0 + r) * N + col0 + c])
OTHER = """#include <cuda_runtime.h>
#define TILE 32

__global__ void gemm_tiles(const float* A, const float* B, float* C, float alpha, float beta,
                           int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bt[TILE][TILE + 1];
    const int t = threadIdx.x;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int tc = t % TILE, tr = t / TILE * 4;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += TILE) {
        for (int i = t; i < TILE * TILE; i += blockDim.x) {
            int r = i / TILE;
            int c = i % TILE;
            int gr = row0 + r;
            As[r][c] = (gr < M && k0 + c < K) ? A[(size_t)gr * K + k0 + c] : 0.0f;
        }
        for (int i = t; i < TILE * TILE; i += blockDim.x) {
            int r = i / TILE;
            int c = i % TILE;
            Bt[c][r] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk)
            for (int q = 0; q < 4; ++q) acc[q] += As[tr + q][kk] * Bt[tc][kk];
        __syncthreads();
    }
    for (int q = 0; q < 4; ++q) {
        const int row = row0 + tr + q, col = col0 + tc;
        if (row < M && col < N) C[(size_t)row * N + col] = alpha * acc[q] + beta * C[(size_t)row * N + col];
    }
}

extern "C" void launch(const float* A, const float* B, float* C, float alpha, float beta, int M, int N,
                       int K, cudaStream_t stream) {
    gemm_tiles<<<dim3((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), TILE * TILE / 4, 0, stream>>>(
        A, B, C, alpha, beta, M, N, K);
}
"""


def _packed(src: CudaSource) -> CudaSource:
    """Every tile staging loop packed, one forward step each (each step re-finds the others)."""
    while True:
        sites = [s for s in OP.find_forward(src) if s.details.get("kind") == "tile_load_pack"]
        if not sites:
            return src
        assert all(p.holds for p in OP.preconditions(src, sites[0]))
        src = OP.apply(src, sites[0])


def _unpacked(src: CudaSource) -> CudaSource:
    while True:
        sites = [s for s in OP.find(src) if s.details.get("kind") == "aligned_dispatch"]
        if not sites:
            return src
        src = OP.remove(src, sites[0])


def _tiled_sgemm() -> CudaSource:
    src = CudaSource.from_file(SGEMM / "naive.cu")
    for name in ("gemm_tiling", "register_blocking", "deep_micro_tile"):
        op = get_operator(name)
        src = op.apply(src, op.find_forward(src)[0])
    return src


def test_the_tiled_sgemm_stages_both_tiles_in_float4_packs(tmp_path: Path) -> None:
    src = _tiled_sgemm()
    loads = TP.tile_loads(src)
    assert [(t.pointer, t.whole_tile) for t in loads] == [("A", True), ("B", True)]
    out = _packed(src)
    assert out.text.count("*reinterpret_cast<const float4*>") == 2
    assert "kl_lane_at" not in out.text  # the once-a-tile form
    assert out.text.count("// KLineage vectorize:") == 1  # both tiles under one dispatch
    assert _unpacked(out).text == src.text  # the dispatch's removal restores the kernel exactly
    assert_passes(out.text, SGEMM, tmp_path, "sgemm_packed.cu")
    assert "ld.global.v4.f32" in ptx_of(out.text, tmp_path)


def test_another_authors_tiles_take_packs_and_stay_correct_on_odd_shapes(tmp_path: Path) -> None:
    src = CudaSource.from_text(OTHER, "other.cu")
    loads = TP.tile_loads(src)
    assert [(t.pointer, t.rows, t.cols, t.row_var, t.col_var) for t in loads] == [
        ("A", "TILE", "TILE", "r", "c"),
        ("B", "TILE", "TILE", "r", "c"),
    ]
    assert [t.whole_tile for t in loads] == [True, True]
    out = _packed(src)
    assert _unpacked(out).text == src.text
    # B's tile is stored transposed: its packs are consecutive in global memory all the same
    assert "Bt[(c + 0)][r] = kl_v_2.x;" in out.text and "As[r][(c + 3)] = kl_v.w;" in out.text
    assert len(re.findall(r"kl_tile_in\w*\(0, 0\)", out.text)) == 2  # one test a tile, none a pack
    assert_passes(src.text, SGEMM, tmp_path, "other.cu")
    assert_passes(out.text, SGEMM, tmp_path, "other_packed.cu")


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # the guard reads memory: it is not re-evaluated lane by lane
        ("(gr < M && k0 + c < K)", "(gr < M && k0 + c < K && A[0] > -1.0f)", "guard reads memory"),
        # the element written is indexed by a local other than the row and the column
        ("As[r][c] =", "As[gr - row0][c] =", "store indexed by a local"),
        # the loop does not cover the tile (rows x columns)
        (
            "i < TILE * TILE; i += blockDim.x) {\n            int r = i / TILE;\n            int c = i % TILE;\n            int gr",
            "i < TILE * TILE - 1; i += blockDim.x) {\n            int r = i / TILE;\n            int c = i % TILE;\n            int gr",
            "extent not rows x columns",
        ),
        # a column that is not `i % C` with the row's C
        ("int c = i % TILE;\n            int gr", "int c = i % 16;\n            int gr", "other divisor"),
    ],
)
def test_loops_it_cannot_read_lane_by_lane_are_left_alone(old: str, new: str, why: str) -> None:
    assert old in OTHER, why
    src = CudaSource.from_text(OTHER.replace(old, new, 1), "other.cu")
    assert [t.pointer for t in TP.tile_loads(src)] == ["B"], why


def test_half_precision_tiles_are_not_float4_packs() -> None:
    text = OTHER.replace("const float* A", "const __half* A").replace(
        "A[(size_t)gr * K + k0 + c]", "__half2float(A[(size_t)gr * K + k0 + c])"
    )
    src = CudaSource.from_text("#include <cuda_fp16.h>\n" + text, "other.cu")
    assert [t.pointer for t in TP.tile_loads(src)] == ["B"]


def _staging_loop_lines(text: str) -> list[int]:
    lines = text.splitlines()
    return [i for i, ln in enumerate(lines) if re.match(r"\s*for \(int kl_e = kl_tid;", ln)]


def test_the_tiles_pragmas_go_with_their_loops_in_one_dispatch(tmp_path: Path) -> None:
    """Each staging loop under `#pragma unroll`: still one dispatch for both, each pragma kept on
    both sides, and the removal writes the two loops back exactly."""
    lines = _tiled_sgemm().text.splitlines()
    for i in reversed(_staging_loop_lines("\n".join(lines))):
        lines.insert(i, lines[i][: len(lines[i]) - len(lines[i].lstrip())] + "#pragma unroll")
    src = CudaSource.from_text("\n".join(lines) + "\n", "sgemm_unrolled.cu")
    assert [len(g) for g in TP.tile_groups(src)] == [2]
    out = _packed(src)
    assert out.text.count("// KLineage vectorize:") == 1 and out.text.count("#pragma unroll") == 4
    assert _unpacked(out).text == src.text
    assert_passes(out.text, SGEMM, tmp_path, "sgemm_unrolled_packed.cu")


@pytest.mark.parametrize("between", ["", "        __syncwarp();"])
def test_loops_apart_take_a_dispatch_each(between: str) -> None:
    """A blank line or a statement between the two loops: one dispatch a loop (the removal could
    not write back what lay between them), and the kernel comes back exactly."""
    lines = _tiled_sgemm().text.splitlines()
    lines.insert(_staging_loop_lines("\n".join(lines))[1], between)
    src = CudaSource.from_text("\n".join(lines) + "\n", "sgemm_apart.cu")
    assert [len(g) for g in TP.tile_groups(src)] == [1, 1]
    out = _packed(src)
    assert out.text.count("// KLineage vectorize:") == 2
    assert _unpacked(out).text == src.text


def test_a_fallback_block_with_its_own_declarations_keeps_its_braces() -> None:
    """Another author's dispatch whose scalar path declares a name: the removal keeps the block,
    so the name cannot shadow one of the enclosing scope after it."""
    text = """__global__ void k(const float* x, float* y, int n) {
    int i = 3;
    if ((reinterpret_cast<unsigned long long>(x) % 16u) == 0) {
        const float4 v = *reinterpret_cast<const float4*>(x);
        y[0] = v.x;
    } else {
        int i = 0;
        for (; i < 1; ++i) y[i] = x[i];
    }
    y[1] = (float)i;
}
"""
    src = CudaSource.from_text(text, "k.cu")
    out = _unpacked(src)
    assert "{\n        int i = 0;" in out.text and "float4" not in out.text
    assert "y[1] = (float)i;" in out.text


def test_a_text_parsed_again_is_packed_again() -> None:
    """The materializer parses the same text many times: the sites found on one parse must be
    those of that parse (a per-text memo holding nodes once handed over another tree's)."""
    from materialize.providers.offline import apply_everywhere

    text = _tiled_sgemm().text
    for _ in range(2):
        after, done, refused = apply_everywhere(OP, CudaSource.from_text(text, "current.cu"))
        assert len(done) == 1 and not refused, refused  # both tiles: one site, one dispatch
        assert after.text.count("*reinterpret_cast<const float4*>") == 2


#: loops whose structure does not prove the once-a-tile test: each keeps the per-pack form (sound
#: for any layout) and the emu gate still accepts the kernel on odd shapes
_PER_PACK = [
    # A read column-major: the index steps by K along the column, not by one
    ("A[(size_t)gr * K + k0 + c]", "A[(size_t)(k0 + c) * M + gr]", "column stride not one"),
    # a comparison that is not monotone along the column (here always true: c < TILE)
    ("(gr < M && k0 + c < K)", "(gr < M && k0 + c < K && c != TILE)", "guard not monotone"),
    # a guard whose comparison mixes the row and the column
    ("(gr < M && k0 + c < K)", "(gr < M && k0 + c < K && r * c < M * K)", "guard mixes row and column"),
    # a division in the index (not affine)
    ("A[(size_t)gr * K + k0 + c]", "A[(size_t)gr * K + (k0 + c) / 1]", "division in the index"),
]


@pytest.mark.parametrize(("old", "new", "why"), _PER_PACK)
def test_structure_that_does_not_prove_a_whole_tile_keeps_the_per_pack_test(
    old: str, new: str, why: str
) -> None:
    assert old in OTHER, why
    src = CudaSource.from_text(OTHER.replace(old, new, 1), "other.cu")
    assert [(t.pointer, t.whole_tile) for t in TP.tile_loads(src)] == [("A", False), ("B", True)], why
    out = _packed(src)
    assert out.text.count("kl_lane_at(") >= 4 and len(re.findall(r"kl_tile_in\w*\(0, 0\)", out.text)) == 1, (
        why
    )
    assert _unpacked(out).text == src.text, why


#: spellings of the same structure: each still proves the whole tile (the type of a local, an
#: integer cast of any width); a local of a float type is not integer arithmetic
_SPELLINGS = [
    ("int gr = row0 + r;", "unsigned int gr = row0 + r;", True),
    ("int gr = row0 + r;", "const long long gr = row0 + r;", True),
    ("A[(size_t)gr * K + k0 + c]", "A[(long long)gr * K + static_cast<unsigned>(k0) + c]", True),
    ("(gr < M && k0 + c < K)", "((int)gr < M && (unsigned long long)(k0 + c) < K)", True),
    ("int gr = row0 + r;", "float gr = row0 + r;", False),
]


@pytest.mark.parametrize(("old", "new", "whole"), _SPELLINGS)
def test_integer_spellings_read_the_same(old: str, new: str, whole: bool) -> None:
    assert old in OTHER
    src = CudaSource.from_text(OTHER.replace(old, new, 1), "other.cu")
    assert [(t.pointer, t.whole_tile) for t in TP.tile_loads(src)] == [("A", whole), ("B", True)]


@pytest.mark.parametrize("case", [1, 3])
def test_the_per_pack_form_is_correct_where_the_whole_tile_is_not_provable(case: int, tmp_path: Path) -> None:
    old, new, why = _PER_PACK[case]  # both edits keep the GEMM: the packed kernel must pass its check
    out = _packed(CudaSource.from_text(OTHER.replace(old, new, 1), "other.cu"))
    assert "kl_lane_at" in out.text, why
    assert_passes(out.text, SGEMM, tmp_path, f"per_pack_{case}.cu")


_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


@st.composite
def _guards(draw: st.DrawFn) -> list[tuple[int, int, int, str, bool]]:
    """Conjunctions of `!?(a*r + b*c + k0 OP M)` with small coefficients (some in both, some in none)."""
    atoms = st.tuples(
        st.integers(-3, 3),
        st.integers(-3, 3),
        st.integers(-2, 2),
        st.sampled_from(sorted(_OPS)),
        st.booleans(),
    )
    return draw(st.lists(atoms, min_size=1, max_size=4))


@settings(max_examples=60, deadline=None)
@given(guard=_guards(), k0=st.integers(-40, 40), m=st.integers(-40, 40), rows=st.integers(1, 9))
def test_a_whole_tile_test_is_only_taken_where_the_corners_prove_the_whole_tile(
    guard: list[tuple[int, int, int, str, bool]], k0: int, m: int, rows: int
) -> None:
    """Whenever the analysis takes the once-a-tile test, a guard true at the two corners it
    tests is true on every element of the tile (checked by brute force on random values)."""
    text = " && ".join(
        f"{'!' if neg else ''}({a} * r + {b} * c + {s} * k0 {op} M)" for a, b, s, op, neg in guard
    )
    kernel = OTHER.replace("(gr < M && k0 + c < K)", f"({text})", 1).replace(
        "TILE * TILE; i", f"{rows} * TILE; i", 1
    )
    (load, *_) = TP.tile_loads(CudaSource.from_text(kernel, "g.cu"))
    assert load.pointer == "A"

    def holds(r: int, c: int) -> bool:
        return all(_OPS[op](a * r + b * c + s * k0, m) != neg for a, b, s, op, neg in guard)

    cols = 32
    if load.whole_tile and holds(0, 0) and holds(rows - 1, cols - 1):
        assert all(holds(r, c) for r in range(rows) for c in range(cols)), text
    if any(a and b for a, b, *_ in guard):
        assert not load.whole_tile  # a comparison moving with both the row and the column
