"""Tensor-core MMA through the WMMA API (`wmma::fragment`, `load_matrix_sync`, `mma_sync`,
`store_matrix_sync`, `fill_fragment`): one warp-wide instruction multiplies 16x16x16 tiles.

Backward, on a kernel that is a shared-memory tiled GEMM accumulating in WMMA fragments (its
global reads, extents and output expression read by gemm_untile, the epilogue through
`store_matrix_sync` included): the kernel becomes the naive loop, one thread per output summing
in float, which is what the forward step (below) takes onto tensor cores again, as inline-PTX
`mma.sync` fed by `ldmatrix` (wmma_gemm: a fixed register layout lets the epilogue run on the
accumulators in registers; WMMA leaves that layout open). Any other
function with WMMA: the fragments and the four WMMA calls are redirected to `kl_wmma`, a small
namespace inserted once at the top of the file that has the same names and signatures and does the
same tile product with scalar FMA loops: an A/B fragment holds its whole tile in every lane, an
accumulator fragment holds M*N/32 elements per lane (WMMA leaves that mapping unspecified, so code
that treats fragments opaquely or element-wise computes the same function). Shapes m16n16k16,
m32n8k16 and m8n32k16 with half, bf16 or tf32 inputs are recognised.

Refused: fragments that cross a function boundary (parameters, or passed to other functions), double
or sub-byte fragments, and inline-PTX `mma.sync` / `wgmma` (their register fragment layouts are
fixed by the PTX ISA; this operator does not rewrite them).
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.deopt import wmma_gemm
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.deopt.gemm_loop import GemmLoop, gemm_loops
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.smem_padding import resolve_int
from klineage.source import edit
from klineage.source.canon import canonical_form
from klineage.source.constructs import LaunchSite
from klineage.source.model import CudaSource

CALLS = ("fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync")
_CALL_RE = re.compile(r"^(?:(?:nvcuda::)?wmma::)(" + "|".join(CALLS) + r")$")
_QUAL_RE = re.compile(r"(?<![\w:])(?:nvcuda::)?wmma::")
_FRAG_RE = re.compile(r"(?:nvcuda::)?wmma::fragment\s*<(?P<args>[^;{}]*?)>")
SHAPES = {(16, 16, 16), (32, 8, 16), (8, 32, 16)}
_ELEM = {
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "wmma::precision::tf32": 4,
    "precision::tf32": 4,
    "float": 4,
}

HELPERS = """
// KLineage tensor_core: WMMA fragments and calls as scalar FMA loops (see deopt/tensor_core.py).
namespace kl_wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision { struct tf32 {}; }
template <typename T> struct storage { using type = T; };
template <> struct storage<precision::tf32> { using type = float; };
__device__ __forceinline__ int lane_id() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31;
}
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment;
// A: the whole M x K tile in every lane, stored row-major.
template <int M, int N, int K, typename T, typename Layout>
struct fragment<matrix_a, M, N, K, T, Layout> {
    static constexpr int rows = M, cols = K, num_elements = M * K;
    static constexpr bool is_row_major = std::is_same<Layout, kl_wmma::row_major>::value;
    typename storage<T>::type x[M * K];
};
// B: the whole K x N tile in every lane, stored row-major.
template <int M, int N, int K, typename T, typename Layout>
struct fragment<matrix_b, M, N, K, T, Layout> {
    static constexpr int rows = K, cols = N, num_elements = K * N;
    static constexpr bool is_row_major = std::is_same<Layout, kl_wmma::row_major>::value;
    typename storage<T>::type x[K * N];
};
// Accumulator: lane l owns elements l * E .. l * E + E - 1 of the row-major M x N tile.
template <int M, int N, int K, typename T>
struct fragment<accumulator, M, N, K, T, void> {
    static constexpr int rows = M, cols = N, num_elements = M * N / 32;
    T x[M * N / 32];
};
template <typename F, typename V> __device__ __forceinline__ void fill_fragment(F& f, const V& v) {
    for (int e = 0; e < F::num_elements; ++e) f.x[e] = v;
}
template <typename Use, int M, int N, int K, typename T, typename L, typename P>
__device__ __forceinline__ void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ld) {
    using F = fragment<Use, M, N, K, T, L>;
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c)
            f.x[r * F::cols + c] = F::is_row_major ? p[r * ld + c] : p[c * ld + r];
}
template <int M, int N, int K, typename T, typename P>
__device__ __forceinline__ void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p,
                                                 unsigned ld, layout_t layout) {
    using F = fragment<accumulator, M, N, K, T>;
    for (int e = 0; e < F::num_elements; ++e) {
        const int i = lane_id() * F::num_elements + e, r = i / N, c = i % N;
        f.x[e] = layout == mem_row_major ? p[r * ld + c] : p[c * ld + r];
    }
}
template <int M, int N, int K, typename T, typename P>
__device__ __forceinline__ void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f,
                                                  unsigned ld, layout_t layout) {
    using F = fragment<accumulator, M, N, K, T>;
    for (int e = 0; e < F::num_elements; ++e) {
        const int i = lane_id() * F::num_elements + e, r = i / N, c = i % N;
        if (layout == mem_row_major) p[r * ld + c] = f.x[e];
        else p[c * ld + r] = f.x[e];
    }
}
template <int M, int N, int K, typename TD, typename TA, typename LA, typename TB, typename LB, typename TC>
__device__ __forceinline__ void mma_sync(fragment<accumulator, M, N, K, TD>& d,
                                         const fragment<matrix_a, M, N, K, TA, LA>& a,
                                         const fragment<matrix_b, M, N, K, TB, LB>& b,
                                         const fragment<accumulator, M, N, K, TC>& c) {
    constexpr int E = M * N / 32;
    for (int e = 0; e < E; ++e) {
        const int i = lane_id() * E + e, r = i / N, col = i % N;
        float s = static_cast<float>(c.x[e]);
        for (int k = 0; k < K; ++k) s = fmaf(static_cast<float>(a.x[r * K + k]), static_cast<float>(b.x[k * N + col]), s);
        d.x[e] = static_cast<TD>(s);
    }
}
}  // namespace kl_wmma
"""


def _wmma_calls(fn: ts.Node) -> list[ts.Node]:
    return X.calls_in(fn, lambda n: bool(_CALL_RE.match(n)))


def _fragment_types(src: CudaSource, fn: ts.Node) -> list[ts.Node]:
    """`wmma::fragment<...>` type nodes in the function (declarations and parameters)."""
    out = []
    for n in X.walk(fn):
        if n.type in ("template_type", "qualified_identifier") and _FRAG_RE.fullmatch(src.text_of(n).strip()):
            if (
                n.parent is not None
                and n.parent.type == "qualified_identifier"
                and _FRAG_RE.fullmatch(src.text_of(n.parent).strip())
            ):
                continue
            out.append(n)
    return out


def _fragment_vars(src: CudaSource, fn: ts.Node) -> dict[str, list[str]]:
    """name -> template arguments of each fragment variable declared in `fn`."""
    out: dict[str, list[str]] = {}
    for decl in (n for n in X.walk(fn) if n.type in ("declaration", "parameter_declaration")):
        t = decl.child_by_field_name("type")
        if t is None or not (m := _FRAG_RE.fullmatch(src.text_of(t).strip())):
            continue
        args = [a.strip() for a in m.group("args").split(",")]
        for d in decl.children_by_field_name("declarator"):
            name, _, _ = X.declarator_name(
                d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            )
            if name:
                out[name] = args
    return out


def _ptx_mma(src: CudaSource, fn: ts.Node) -> list[ts.Node]:
    return [
        n
        for n in X.walk(fn)
        if n.type in ("gnu_asm_expression", "asm_statement")
        and re.search(r"\b(?:mma\.sync|wgmma)\b", src.text_of(n))
    ]


class TensorCore(Operator):
    name = "tensor_core"
    category = "matrix_instruction"
    intent = (
        "Multiply tiles on tensor cores with WMMA (16x16x16 fragments, mma_sync) instead of per-thread "
        "scalar FMA loops."
    )
    mechanical_apply = True  # forward on naive 16-bit GEMM loops (wmma_gemm)

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn in X.code_functions(src):
            calls = _wmma_calls(fn)
            fname = X.N.func_name(fn)
            if any(X.callee_name(c).endswith("mma_sync") for c in calls) or (
                calls and _fragment_types(src, fn)
            ):
                shapes = sorted({",".join(a[1:4]) for a in _fragment_vars(src, fn).values() if len(a) >= 5})
                sites.append(
                    self.site(
                        src,
                        fn,
                        f"WMMA in {fname}: {len(calls)} call(s), shape(s) {'; '.join(shapes) or '?'}",
                        kind="wmma",
                        function=fname,
                        shapes="; ".join(shapes),
                    )
                )
            for asm in _ptx_mma(src, fn):
                sites.append(
                    self.site(
                        src,
                        asm,
                        f"inline PTX MMA in {fname} at line {asm.start_point.row + 1}",
                        kind="ptx",
                        function=fname,
                    )
                )
        return sites

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details["kind"] == "ptx":
            return [
                Precondition(
                    "wmma_api",
                    False,
                    "inline PTX mma.sync/wgmma: its per-register fragment layout is "
                    "fixed by the PTX ISA and is not rewritten by this operator",
                    "Hardware",
                )
            ]
        fn = src.node_at(site.anchor)
        if fn is None:
            return [Precondition("site_present", False, "the function is gone")]
        tiled = _tiled_gemm(src, site)
        if tiled is not None:
            return tiled[1]
        frags = _fragment_vars(src, fn)
        facts = []
        params = [
            n for n in X.walk(fn) if n.type == "parameter_declaration" and _FRAG_RE.search(src.text_of(n))
        ]
        passed = []
        for c in X.calls_in(fn, lambda n: not _CALL_RE.match(n)):
            for a in X.call_args(c):
                base = X.pointer_base(a)
                if base is not None and base.text is not None and base.text.decode() in frags:
                    passed.append(f"{src.text_of(c)[:40]} (line {c.start_point.row + 1})")
        ok = not params and not passed
        facts.append(
            Precondition(
                "fragments_local",
                ok,
                "fragments are declared and used in this function only"
                if ok
                else "fragments cross a function boundary: "
                + "; ".join([f"parameter `{src.text_of(p)[:40]}`" for p in params] + passed),
                "Storage",
            )
        )
        bad = []
        for name, args in frags.items():
            shape = tuple(resolve_int(src, a) for a in args[1:4]) if len(args) >= 5 else ()
            if shape not in SHAPES or args[4] not in _ELEM and "accumulator" not in args[0]:
                bad.append(f"{name}<{', '.join(args)}>")
            if "accumulator" in args[0] and len(args) >= 5 and args[4] not in ("float", "half", "__half"):
                bad.append(f"{name}<{', '.join(args)}>")
        facts.append(
            Precondition(
                "supported_fragments",
                not bad,
                "fragments are m16n16k16/m32n8k16/m8n32k16 with half, bf16 or tf32 inputs"
                if not bad
                else "unsupported fragment(s): " + "; ".join(bad),
                "Data types",
            )
        )
        return facts

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("kind") == "gemm":
            return self._gemm_plan(src, site)[0]
        fn = src.node_at(site.anchor)
        facts = [
            Precondition("tensor_cores", True, "sm_70+ (half), sm_80+ (bf16, tf32)", "Hardware"),
            Precondition(
                "warp_uniform", True, "all 32 lanes of a warp execute every WMMA call together", "Hardware"
            ),
        ]
        if fn is None or site.details.get("kind") != "wmma":
            return facts
        frags = _fragment_vars(src, fn)
        shapes = sorted({"m{}n{}k{}".format(*a[1:4]) for a in frags.values() if len(a) >= 5})
        types = sorted({a[4] for a in frags.values() if len(a) >= 5 and "accumulator" not in a[0]})
        accs = sorted({a[4] for a in frags.values() if len(a) >= 5 and "accumulator" in a[0]})
        facts.append(
            Precondition(
                "tile_shape",
                bool(shapes),
                f"tiles are {', '.join(shapes)}: M, N, K padded or divisible",
                "Layout",
            )
        )
        facts.append(
            Precondition(
                "input_dtype",
                bool(types),
                f"inputs {', '.join(types)}, accumulation in {', '.join(accs)}",
                "Data types",
            )
        )
        lds = []
        for c in _wmma_calls(fn):
            if X.callee_name(c).endswith("load_matrix_sync") or X.callee_name(c).endswith(
                "store_matrix_sync"
            ):
                args = X.call_args(c)
                if len(args) >= 3:
                    lds.append((src.text_of(args[2]), resolve_int(src, src.text_of(args[2]))))
        bad = [t for t, v in lds if v is not None and v % 8 != 0]
        facts.append(
            Precondition(
                "ldm_multiple_of_16_bytes",
                not bad,
                "leading dimensions are multiples of 8 elements; tile pointers 32-byte aligned"
                if not bad
                else f"leading dimension(s) {', '.join(bad)} not a multiple of 8",
                "Layout",
            )
        )
        return facts

    # ---- forward: a naive 16-bit GEMM loop to mma.sync (wmma_gemm) --------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        canon = canonical_form(src).source
        out = []
        for k, g in gemm_loops(canon):
            mine = next((f for f in src.kernels if f.name == k.name), None)
            if mine is not None and not isinstance(g, str) and wmma_gemm.why_not(g) is None:
                out.append(
                    self.site(
                        src,
                        mine,
                        f"16-bit GEMM loop in {k.name} onto tensor cores",
                        kernel=k.name,
                        kind="gemm",
                    )
                )
        return out

    def _gemm_plan(
        self, src: CudaSource, site: Site
    ) -> tuple[list[Precondition], CudaSource, GemmLoop | None]:
        canon = canonical_form(src).source
        found = {k.name: g for k, g in gemm_loops(canon)}
        g = found.get(site.details.get("kernel", ""), "no loop accumulating a product")
        if isinstance(g, str):
            return [Precondition("gemm_shaped", False, g, "Layout")], canon, None
        why = wmma_gemm.why_not(g)
        facts = [
            Precondition(
                "gemm_shaped", True, f"{g.acc.name} sums {g.a.text} * {g.b.text} over {g.k.name}", "Layout"
            ),
            Precondition(
                "sixteen_bit_factors",
                why is None,
                why or "both factors are the same 16-bit type converted to float; the sum is float",
                "Data types",
            ),
        ]
        kernel = next(k for k in canon.kernels if k.name == g.kernel)
        fn = canon.node_for(kernel)
        launches = T.launches_of(canon, kernel.name)
        ok = bool(launches) and all(
            T.kernel_expr_in_launcher(canon, kernel, ls, e, fn) is not None
            for ls in launches
            for e in (g.m_extent, g.n_extent)
        )
        facts.append(
            Precondition("extents_at_launch", ok, "every launch passes the guard's extents", "Layout")
        )
        if why is None:
            smem = wmma_gemm.smem_bytes(g)
            facts.append(
                Precondition(
                    "smem_fits",
                    smem <= wmma_gemm.SMEM_LIMIT_SM90,
                    f"{wmma_gemm.STAGES} stages of both tiles take {smem} bytes of dynamic shared memory "
                    f"(sm_90 allows {wmma_gemm.SMEM_LIMIT_SM90} a block once the launcher raises the limit)",
                    "Hardware",
                )
            )
        return facts, canon, g

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        facts, canon, g = self._gemm_plan(src, site)
        self._check(facts)
        assert g is not None
        kernel = next(k for k in canon.kernels if k.name == g.kernel)
        fn = canon.node_for(kernel)
        edits = [edit.Edit(g.body_start, g.body_end, wmma_gemm.body(g))]
        smem = wmma_gemm.smem_bytes(g)
        for ls in T.launches_of(canon, kernel.name):
            m, n = (T.kernel_expr_in_launcher(canon, kernel, ls, e, fn) for e in (g.m_extent, g.n_extent))
            cfg = T.config_nodes(canon, ls)
            grid = f"dim3({T.ceil_div(n, str(wmma_gemm.BN))}, {T.ceil_div(m, str(wmma_gemm.BM))})"  # type: ignore[arg-type]
            edits += [edit.replace(cfg[0], grid), edit.replace(cfg[1], f"dim3({wmma_gemm.THREADS})")]
            edits += _dynamic_smem(canon, ls, cfg, smem)
        return edit.apply_edits(canon, edits)

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        if fn is None:
            raise Refused(f"{self.name}: the function is gone")
        tiled = _tiled_gemm(src, site)
        if tiled is not None:
            naive = GemmTiling().untile(src, tiled[0], any_depth=True)
            return edit.apply_edits(naive, _unused_wmma_headers(naive, naive.text))
        text = _QUAL_RE.sub("kl_wmma::", src.text_of(fn))
        edits = [edit.replace(fn, text)]
        rest = src.text_bytes[: fn.start_byte].decode() + src.text_bytes[fn.end_byte :].decode()
        edits += _unused_wmma_headers(src, rest)
        if "namespace kl_wmma" not in src.text:
            pos = X.after_includes(src)
            extra = "" if "<type_traits>" in src.text else "#include <type_traits>\n"
            edits.append(edit.Edit(pos, pos, extra + HELPERS))
        return edit.apply_edits(src, edits)


def _dynamic_smem(src: CudaSource, ls: LaunchSite, cfg: list[ts.Node], smem: int) -> list[edit.Edit]:
    """The launch asks for `smem` bytes of dynamic shared memory, after raising the kernel's limit
    (over 48 KB a block must opt in): the launch statement becomes `{ cudaFuncSetAttribute(...);
    launch; }`, a block so that it stays one statement under an `if`."""
    call = src.node_for(ls)
    stmt = call.parent if call.parent is not None and call.parent.type == "expression_statement" else None
    if stmt is None or len(cfg) < 2:
        raise Refused("tensor_core: the launch is not a statement of its own")
    name = ls.name + (f"<{', '.join(ls.template_args)}>" if ls.template_args else "")
    attr = f"cudaFuncSetAttribute({name}, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});"
    size = (
        [edit.replace(cfg[2], str(smem))]
        if len(cfg) > 2
        else [edit.Edit(cfg[1].end_byte, cfg[1].end_byte, f", {smem}")]
    )
    return [
        edit.Edit(stmt.start_byte, stmt.start_byte, f"{{\n        {attr}\n        "),
        *size,
        edit.Edit(stmt.end_byte, stmt.end_byte, "\n    }"),
    ]


def _tiled_gemm(src: CudaSource, site: Site) -> tuple[Site, list[Precondition]] | None:
    """The gemm_tiling site of the kernel at `site` and the facts of un-tiling it, when the kernel
    reads as a tiled GEMM whose accumulators are WMMA fragments; else None."""
    tiling = GemmTiling()
    for s in tiling.find(src):
        if s.details.get("kernel") != site.details.get("function"):
            continue
        facts, t = tiling.untile_plan(src, s, any_depth=True)
        if t is not None and t.fragments:
            frag = Precondition(
                "fragment_accumulators",
                True,
                f"the K loop accumulates in WMMA fragments ({t.acc_type}); the naive loop sums in "
                f"{t.acc_type} one output a thread",
                "Data types",
            )
            return s, [frag, *facts]
    return None


def _unused_wmma_headers(src: CudaSource, rest: str) -> list[edit.Edit]:
    """Deletions of `#include <mma.h>` and `using namespace nvcuda;` when `rest` (the code outside
    the rewritten function) names WMMA no more."""
    if _QUAL_RE.search(rest.replace("kl_wmma::", "")) or re.search(r"\bfragment\s*<", rest):
        return []
    edits = []
    for pat in (
        r"^[ \t]*#[ \t]*include\s*<mma\.h>[^\n]*\n",
        r"^[ \t]*using\s+namespace\s+nvcuda\s*;[^\n]*\n",
    ):
        for m in re.finditer(pat, src.text, re.M):
            a, b = len(src.text[: m.start()].encode()), len(src.text[: m.end()].encode())
            edits.append(edit.Edit(a, b, ""))
    return edits
