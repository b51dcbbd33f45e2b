"""GEMM tiling: a naive one-output-per-thread GEMM becomes a shared-memory tiled kernel whose K loop
is split into BK-wide tiles of A (BM x BK) and B (BK x BN) staged by the whole block, with each
thread accumulating a TM x TN register micro-tile (`acc[TM][TN]`, 1 x 1 here).

Forward (`apply`) on the structure read by gemm_loop.analyze (any author's spelling of the naive
loop nest, on its canonical form): the kernel body is re-assembled from the loop's own parts. The
factors are staged as written (`A[row * K + k]`, an accessor macro, a conversion such as
`__bfloat162float(A[...])`) with `row` and `k` bound to the tile element each thread loads; a
tile element outside the guard's extents or the loop's bound is staged as zero, so adding its
product changes nothing and the sum keeps the naive loop's order. The epilogue runs once per micro
-tile element with `row`, `col` and the accumulator re-declared. The block tile is written as
`BM = (BM / TM) * TM` threads (sizes derived from the launch's thread count) and the launch's grid
and block are rewritten from the guard's extents, which is the form register_blocking scales into
a 2-D micro-tile. Refused, with the failing fact, on anything gemm_loop does not recognise.

Backward (`find`): a K loop stepping by a tile width whose body synchronizes and accumulates
products read from `__shared__` arrays (or pointers into them), by FMAs or by tensor-core MMAs
(`mma.sync` / `wgmma` PTX in a device function, WMMA's `mma_sync`). `remove` un-tiles the whole
kernel back to one thread per output: gemm_untile reads the operands' global addresses (two
coordinates, one following a block index), the extents and the value stored per output element
(directly, or through a shared staging buffer), and writes the naive loop gemm_loop reads, with
the launch set to 16 x 16 threads over the output; refused, with the failing fact, otherwise.
"""

from __future__ import annotations

import math
import re

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt import gemm_untile as untile
from klineage.deopt.base import Operator, Precondition, Site
from klineage.deopt.gemm_loop import GemmLoop, block_threads, gemm_loops
from klineage.deopt.gemm_untile import TiledGemm
from klineage.source import edit
from klineage.source.canon import canonical_form
from klineage.source.constructs import Function, LaunchSite
from klineage.source.model import CudaSource
from klineage.source.syntax import squash

#: thread count used when the launch's block cannot be evaluated, and the most the tiled kernel uses
DEFAULT_THREADS = 256
MAX_THREADS = 256
#: A's tile is stored k-major, its rows padded by 4 elements (16 bytes): the transposing stores
#: spread over the banks and every row stays 16-byte aligned
A_PAD = 4


class GemmTiling(Operator):
    name = "gemm_tiling"
    category = "tiling"
    intent = (
        "Tile a GEMM through shared memory: split the K loop into BK-wide steps, stage the BM x BK tile "
        "of A and the BK x BN tile of B once per block (zero outside the matrix), synchronize, and "
        "accumulate from the tiles into a per-thread TM x TN register micro-tile."
    )
    mechanical_apply = True

    # ---- backward ----------------------------------------------------------------------------
    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        shared = {d.name for d in src.shared_decls}
        if not shared:
            return []
        mmas = _mma_functions(src)
        for k in src.kernels:
            fn = src.node_for(k)
            staged = _shared_aliases(src, fn, shared)
            # a staged read: assigned (`a = As[..]`) or brace-initialized (`T const a{As[..]}`)
            reads = re.compile(
                r"(?:=|(?<![\w.])(?!else\{|do\{)\w+\{)[^;=]*(?<![\w.])("
                + "|".join(re.escape(s) for s in sorted(staged))
                + r")\b"
            )
            taken: list[ts.Node] = []
            for loop in (n for n in T.walk(fn) if n.type == "for_statement"):
                if any(t.start_byte <= loop.start_byte < t.end_byte for t in taken):
                    continue
                cl = T.counting_loop(src, loop, any_step=True)
                text = squash(src.text_of(loop))
                if cl is None or "__syncthreads()" not in text:
                    continue
                mma = any(re.search(rf"(?<![\w.]){re.escape(m)}\s*\(", text) for m in mmas)
                if not mma and not reads.search(text):
                    continue
                if mma or re.search(r"\+=[^;]*\*|fmaf?\(", text):
                    taken.append(loop)
                    sites.append(self.site(src, loop, f"K loop over shared tiles in {k.name}", kernel=k.name))
        return sites

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self.untile_plan(src, site)[0]

    def untile_plan(
        self, src: CudaSource, site: Site, any_depth: bool = False
    ) -> tuple[list[Precondition], TiledGemm | None]:
        """The facts of un-tiling the kernel at a `find` site, and what was read; `any_depth`
        leaves out the one-output-per-thread fact (deep_micro_tile re-derives a micro-tile)."""
        kernel = next((k for k in src.kernels if k.name == site.details.get("kernel")), None)
        loop = next(
            (
                n
                for n in T.walk(src.tree.root_node)
                if n.type == "for_statement" and n.start_byte == site.start
            ),
            None,
        )
        if kernel is None or loop is None:
            return [Precondition("tiled_k_loop", False, "the K loop is not in this source", "Layout")], None
        try:
            t = untile.read(src, kernel, loop)
        except untile.NotTiled as e:
            return [Precondition("tiled_gemm_read", False, str(e), "Layout")], None
        facts = [
            Precondition(
                "tiled_gemm_read",
                True,
                f"{t.a.pointer} read at (blockIdx.{t.a.out_axis} rows, k), {t.b.pointer} at (k, blockIdx."
                f"{t.b.out_axis} columns), {t.c.pointer} written with one expression of the accumulator; "
                f"extents {t.m} x {t.n}, K loop over {t.k}",
                "Layout",
            )
        ]
        one = t.per_thread == 1 or any_depth
        facts.append(
            Precondition(
                "one_output_per_thread",
                one,
                "each thread accumulates one output (a deeper micro-tile is deep_micro_tile's and "
                "register_blocking's to take back first)"
                if one
                else f"each thread accumulates {t.per_thread or 'a non-constant number of'} outputs",
                "Layout",
            )
        )
        launches = T.launches_of(src, kernel.name)
        fn = src.node_for(kernel)
        ok = bool(launches) and all(
            T.kernel_expr_in_launcher(src, kernel, ls, e, fn) is not None
            for ls in launches
            for e in (t.m, t.n)
        )
        facts.append(
            Precondition(
                "extents_at_launch",
                ok,
                "every launch passes the extents" if ok else "a launch's extents cannot be read",
                "Layout",
            )
        )
        bounded = "__launch_bounds__" in squash(
            src.text_of(fn)[: fn.child_by_field_name("body").start_byte - fn.start_byte]
        )  # type: ignore[union-attr]
        facts.append(
            Precondition(
                "no_launch_bounds",
                not bounded,
                "the kernel declares no __launch_bounds__ (the naive launch uses 16 x 16 threads)"
                if not bounded
                else "a __launch_bounds__ may forbid the naive 16 x 16 block",
                "Hardware",
            )
        )
        return facts, t

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return self.untile(src, site)

    def untile(self, src: CudaSource, site: Site, any_depth: bool = False) -> CudaSource:
        """The kernel at a `find` site as one thread per output (the naive loop)."""
        facts, t = self.untile_plan(src, site, any_depth)
        self._check(facts)
        assert t is not None
        kernel = next(k for k in src.kernels if k.name == t.kernel)
        fn = src.node_for(kernel)
        edits = [edit.Edit(t.body_start, t.body_end, untile.naive_body(t, {p.name for p in kernel.params}))]
        for ls in T.launches_of(src, kernel.name):
            m, n = (T.kernel_expr_in_launcher(src, kernel, ls, e, fn) for e in (t.m, t.n))
            extent = {t.a.out_axis: m, t.b.out_axis: n}
            dims = [T.ceil_div(extent.get(d, "1"), "16") if d in extent else "1" for d in "xyz"]
            cfg = T.config_nodes(src, ls)
            edits.append(edit.replace(cfg[0], f"dim3({', '.join(dims)})"))
            block = ["16" if d in extent else "1" for d in "xyz"]
            edits.append(edit.replace(cfg[1], f"dim3({', '.join(block)})"))
            if len(cfg) > 2:
                edits.append(edit.replace(cfg[2], "0"))
        edits += _own_constants(src, kernel.name)
        return edit.apply_edits(src, edits)

    # ---- forward -----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        """Kernels whose canonical form is a naive GEMM loop nest (gemm_loop.analyze)."""
        canon = canonical_form(src).source
        out = []
        for k, g in gemm_loops(canon):
            mine = next((f for f in src.kernels if f.name == k.name), None)
            if mine is not None and not isinstance(g, str):
                out.append(self.site(src, mine, f"naive GEMM loop nest in {k.name}", kernel=k.name))
        return out

    def _plan(self, src: CudaSource, site: Site) -> tuple[list[Precondition], CudaSource, GemmLoop | None]:
        canon = canonical_form(src).source
        kernel = next((k for k in canon.kernels if k.name == site.details.get("kernel")), None)
        if kernel is None:
            return (
                [Precondition("kernel_found", False, f"no kernel {site.details.get('kernel')}")],
                canon,
                None,
            )
        found = dict((k.name, g) for k, g in gemm_loops(canon))
        g = found.get(kernel.name, "no loop accumulating a product")
        if isinstance(g, str):
            return [Precondition("gemm_shaped", False, g, "Layout")], canon, None
        facts = [
            Precondition(
                "gemm_shaped",
                True,
                f"{g.acc.name} accumulates {g.a.pointer}({g.row.name}, {g.k.name}) * "
                f"{g.b.pointer}({g.k.name}, {g.col.name}), indices affine, bounded by the guard",
                "Layout",
            )
        ]
        launches = T.launches_of(canon, kernel.name)
        ok = bool(launches) and all(self._extents(canon, kernel, g, ls) is not None for ls in launches)
        facts.append(
            Precondition(
                "extents_at_launch",
                ok,
                "every launch passes the guard's extents"
                if ok
                else "a launch's extents cannot be read from its arguments",
                "Layout",
            )
        )
        return facts, canon, g

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._plan(src, site)[0]

    def _extents(self, src: CudaSource, kernel: Function, g: GemmLoop, ls) -> tuple[str, str] | None:  # noqa: ANN001
        fn = src.node_for(kernel)
        m = T.kernel_expr_in_launcher(src, kernel, ls, g.m_extent, fn)
        n = T.kernel_expr_in_launcher(src, kernel, ls, g.n_extent, fn)
        return (m, n) if m is not None and n is not None else None

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        facts, canon, g = self._plan(src, site)
        self._check(facts)
        assert g is not None
        kernel = next(k for k in canon.kernels if k.name == g.kernel)
        launches = T.launches_of(canon, kernel.name)
        tx, ty = _layout(_threads(canon, launches))
        p = _prefix(kernel.name)
        edits = []
        for ls in launches:
            m, n = self._extents(canon, kernel, g, ls)  # type: ignore[misc]
            cfg = T.config_nodes(canon, ls)
            grid = f"dim3({T.ceil_div(n, p + 'BN')}, {T.ceil_div(m, p + 'BM')})"
            edits.append(edit.replace(cfg[0], grid))
            edits.append(edit.replace(cfg[1], f"dim3({p}BN / {p}TN, {p}BM / {p}TM)"))
        edits.append(edit.Edit(g.body_start, g.body_end, _body(g, p)))
        start = _decl_start(canon, kernel)
        consts = (
            f"// {kernel.name}: block tile {p}BM x {p}BN, K tile {p}BK, register micro-tile {p}TM x {p}TN\n"
            f"constexpr int {p}BM = {ty};\nconstexpr int {p}BN = {tx};\nconstexpr int {p}BK = {min(tx, ty, 16)};\n"
            f"constexpr int {p}TM = 1;\nconstexpr int {p}TN = 1;\n\n"
        )
        edits.append(edit.Edit(start, start, consts))
        return edit.apply_edits(canon, edits)


def _own_constants(src: CudaSource, kernel: str) -> list[edit.Edit]:
    """Deletions of the tile constants this operator's forward step declared for `kernel`, which
    the untiled kernel no longer reads (and the forward step declares again)."""
    p = re.escape(_prefix(kernel))
    m = re.search(
        rf"// {re.escape(kernel)}: block tile [^\n]*\n(?:constexpr int {p}\w+ = [^;\n]+;\n)+\n?", src.text
    )
    if m is None:
        return []
    start, end = (len(src.text[:i].encode()) for i in (m.start(), m.end()))
    return [edit.Edit(start, end, "")]


def _mma_functions(src: CudaSource) -> set[str]:
    """Callees that accumulate a tile product on tensor cores: device functions issuing
    `mma.sync` / `wgmma` PTX, and the WMMA API's `mma_sync`."""
    out = {"mma_sync", "wmma::mma_sync", "nvcuda::wmma::mma_sync"}
    for f in src.functions:
        if f.kind == "device" and re.search(
            r"\b(mma\.sync|wgmma\.mma_async)\b", src.text_of(src.node_for(f))
        ):
            out.add(f.name)
    return out


def _shared_aliases(src: CudaSource, fn: ts.Node, shared: set[str]) -> set[str]:
    """The shared arrays and the locals of `fn` pointing into them (`T* As = (T*)smem;`)."""
    out = set(shared)
    for _ in range(3):
        for d in T.walk(fn):
            ident = d.child_by_field_name("declarator") if d.type == "init_declarator" else None
            value = d.child_by_field_name("value") if ident is not None else None
            if ident is None or value is None or ident.type != "pointer_declarator":
                continue
            nm = squash(src.text_of(ident)).lstrip("*")
            if re.fullmatch(r"\w+", nm) and set(re.findall(r"\w+", src.text_of(value))) & out:
                out.add(nm)
    return out


def _prefix(kernel: str) -> str:
    return f"k{kernel[:1].upper()}{kernel[1:]}_"


def _decl_start(src: CudaSource, kernel: Function) -> int:
    node = src.node_for(kernel)
    while node.parent is not None and node.parent.type == "template_declaration":
        node = node.parent
    return node.start_byte


def _threads(src: CudaSource, launches: list[LaunchSite]) -> int:
    """The launches' thread count per block, at most MAX_THREADS (the 8 x 8 micro-tile that
    deep_micro_tile grows keeps 64 accumulators a thread); DEFAULT_THREADS when it is unknown."""
    n = block_threads(src, launches)
    if n is None or n < 32 or n & (n - 1):
        return DEFAULT_THREADS
    return min(n, MAX_THREADS)


def _layout(threads: int) -> tuple[int, int]:
    """A near-square (x, y) thread layout of `threads` (a power of two), x the wider."""
    x = 1 << math.ceil(math.log2(threads) / 2)
    return x, threads // x


def _body(g: GemmLoop, p: str) -> str:
    acc_t = g.acc.type.replace("const", "").strip()
    row_t = g.row.type.replace("const", "").strip()
    col_t = g.col.type.replace("const", "").strip()
    k_t = g.k.type.replace("const", "").strip()
    bm, bn, bk, tm, tn = (p + s for s in ("BM", "BN", "BK", "TM", "TN"))
    nthreads = f"({bm} / {tm}) * ({bn} / {tn})"
    row_ok = " && ".join(f"!({c})" for c in g.row_clauses)
    col_ok = " && ".join(f"!({c})" for c in g.col_clauses)

    def load(
        tile: str,
        rows: str,
        cols: str,
        var_r: str,
        var_c: str,
        value: str,
        ok: str,
        contiguous_cols: bool,
        at: str = "[kl_r][kl_c]",
    ) -> str:
        # element kl_e of the tile: the contiguous dimension of the global index varies fastest
        r, c = (
            ("kl_e / " + cols, "kl_e % " + cols) if contiguous_cols else ("kl_e % " + rows, "kl_e / " + rows)
        )
        return (
            f"        for (int kl_e = kl_tid; kl_e < {rows} * {cols}; kl_e += {nthreads}) {{\n"
            f"            const int kl_r = {r}, kl_c = {c};\n"
            f"            {var_r}\n"
            f"            {var_c}\n"
            f"            {tile}{at} = ({ok}) ? static_cast<{acc_t}>({value}) : static_cast<{acc_t}>(0);\n"
            f"        }}\n"
        )  # fmt: skip

    uniform = "".join(f"    {u}\n" for u in g.uniform)
    k_cond = g.k_cond
    a_load = load(
        "kl_As",
        bm,
        bk,
        f"const {row_t} {g.row.name} = kl_row0 + kl_r;",
        f"const {k_t} {g.k.name} = kl_k0 + kl_c;",
        g.a.text,
        f"{row_ok} && ({k_cond})",
        g.a.k_contiguous,
        "[kl_c][kl_r]",  # stored k-major: a thread's rows are contiguous in shared memory
    )
    b_load = load(
        "kl_Bs",
        bk,
        bn,
        f"const {k_t} {g.k.name} = kl_k0 + kl_r;",
        f"const {col_t} {g.col.name} = kl_col0 + kl_c;",
        g.b.text,
        f"{col_ok} && ({k_cond})",
        not g.b.k_contiguous,
    )
    mac = (
        "kl_accum[kl_i][kl_j] += kl_a[kl_i] * kl_b[kl_j];"
        if g.combine == "add"
        else "kl_accum[kl_i][kl_j] = fmaf(kl_a[kl_i], kl_b[kl_j], kl_accum[kl_i][kl_j]);"
    )
    epilogue = "".join(f"            {s}\n" for s in g.epilogue)
    derived = "".join(f"            {d}\n" for d in g.derived)
    rows = f"kl_ty * kl_vm + (kl_i / kl_vm) * ({bm} / {tm} * kl_vm) + kl_i % kl_vm"
    cols = f"kl_tx * kl_vn + (kl_j / kl_vn) * ({bn} / {tn} * kl_vn) + kl_j % kl_vn"
    return f"""{{
{uniform}    __shared__ __align__(16) {acc_t} kl_As[{bk}][{bm} + {A_PAD}];
    __shared__ __align__(16) {acc_t} kl_Bs[{bk}][{bn}];
    const int kl_tx = threadIdx.x, kl_ty = threadIdx.y, kl_tid = kl_ty * ({bn} / {tn}) + kl_tx;
    // a thread's micro-tile rows (columns) in groups of 4 adjacent ones when its size allows:
    // each group is read from shared memory as one 16-byte load
    constexpr int kl_vm = {tm} % 4 == 0 ? 4 : 1, kl_vn = {tn} % 4 == 0 ? 4 : 1;
    const int kl_row0 = blockIdx.y * {bm}, kl_col0 = blockIdx.x * {bn};
    {acc_t} kl_accum[{tm}][{tn}];
    for (int kl_i = 0; kl_i < {tm}; ++kl_i)
        for (int kl_j = 0; kl_j < {tn}; ++kl_j) kl_accum[kl_i][kl_j] = {g.acc_init};
    for (int kl_k0 = 0; kl_k0 < {g.k_extent}; kl_k0 += {bk}) {{
{a_load}{b_load}        __syncthreads();
        for (int kl_kk = 0; kl_kk < {bk}; ++kl_kk) {{
            {acc_t} kl_a[{tm}], kl_b[{tn}];
            for (int kl_i = 0; kl_i < {tm}; ++kl_i) kl_a[kl_i] = kl_As[kl_kk][{rows}];
            for (int kl_j = 0; kl_j < {tn}; ++kl_j) kl_b[kl_j] = kl_Bs[kl_kk][{cols}];
            for (int kl_i = 0; kl_i < {tm}; ++kl_i)
                for (int kl_j = 0; kl_j < {tn}; ++kl_j) {mac}
        }}
        __syncthreads();
    }}
    for (int kl_i = 0; kl_i < {tm}; ++kl_i)
        for (int kl_j = 0; kl_j < {tn}; ++kl_j) {{
            const {row_t} {g.row.name} = kl_row0 + {rows};
            const {col_t} {g.col.name} = kl_col0 + {cols};
{derived}            if ({g.guard}) continue;
            {g.acc.type} {g.acc.name} = kl_accum[kl_i][kl_j];
{epilogue}        }}
}}"""
