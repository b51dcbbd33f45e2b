"""Stride analysis of a naive permute, and the shared-memory tiled transpose that replaces it.

A naive transpose or permute written by anyone is, structurally, a kernel whose one global store
copies one element of another array, `out[W] = in[R]`, where the thread finds its coordinates
either by splitting a flat index with `/` and `%` (`b = o / per; r = o % per; c = r / R; ...`) or
as one index per grid dimension bounded by a guard (`row < M && col < N`). `analyze` reads that
structure on the syntax tree (names and spellings do not matter): the coordinates, their extents,
and the stride of each coordinate in the read and in the write, as products of the kernel's
parameters. When the read walks one coordinate contiguously and the write another, consecutive
threads can never be coalesced on both sides; a tile staged through shared memory can
(`tiled_body`, `tiled_launch`): a block loads a 32 x 32 tile along the read's contiguous
coordinate, synchronizes, and stores it along the write's, with bounds checks for odd sizes and
every other coordinate (the batch) taken from the block index.

Anything outside this model (loops, other statements, non-affine indices, a value that is not a
plain copy) makes `analyze` return None with the reason, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import poly as P
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import file_constants, fresh_name, paren, subst_idents, unparenthesized

TILE = 32
ROWS = 8  # block = TILE x ROWS threads; each thread moves TILE / ROWS elements each way


class NotACopy(Exception):
    """The kernel is not a naive element copy this analysis models; the message says where."""


#: a polynomial as C text (kept here too: the copy analysis's callers read it from this module)
c_text = P.c_text


# ---- values the kernel computes ------------------------------------------------------------------


@dataclass(frozen=True)
class Digit:
    """`(index % hi) / lo` of a thread's index along one grid dimension (`hi` None: unbounded)."""

    base: str  # the grid dimension: x, y or z
    lo: tuple[tuple[P.Factors, int], ...]
    hi: tuple[tuple[P.Factors, int], ...] | None

    @staticmethod
    def of(base: str, lo: P.Poly, hi: P.Poly | None) -> Digit:
        return Digit(base, tuple(sorted(lo.items())), None if hi is None else tuple(sorted(hi.items())))

    @property
    def lo_poly(self) -> P.Poly:
        return dict(self.lo)

    @property
    def hi_poly(self) -> P.Poly | None:
        return None if self.hi is None else dict(self.hi)

    @property
    def symbol(self) -> str:
        """The coordinate's name inside polynomials (never a C identifier)."""
        hi = "inf" if self.hi is None else c_text(dict(self.hi))
        return f"@{self.base}[{c_text(dict(self.lo))}:{hi}]"


Value = P.Poly | Digit


@dataclass(frozen=True)
class Coord:
    """One coordinate of the copy: its extent and its strides in the read and the write."""

    symbol: str
    label: str  # the kernel's name for it (a local), or "the x index"
    extent: P.Poly
    read_stride: P.Poly
    write_stride: P.Poly


@dataclass(frozen=True)
class StridedCopy:
    """The structure of `dst[W] = src[R]`: which coordinate each side walks contiguously."""

    kernel: str
    src: str  # the pointer read
    dst: str  # the pointer written
    elem: str  # element type
    coords: tuple[Coord, ...]
    read_offset: P.Poly
    write_offset: P.Poly
    store_start: int  # the store statement (the site)
    store_end: int

    def unit(self, side: str) -> Coord | None:
        """The coordinate whose stride is 1 in the read ("read") or the write ("write")."""
        for c in self.coords:
            if (c.read_stride if side == "read" else c.write_stride) == {(): 1}:
                return c
        return None

    @property
    def transposed(self) -> tuple[Coord, Coord] | None:
        """(P, Q): the read is contiguous along P, the write along Q, P != Q; else None."""
        p, q = self.unit("read"), self.unit("write")
        return (p, q) if p is not None and q is not None and p.symbol != q.symbol else None


# ---- the analysis ------------------------------------------------------------------------------

_THREAD = re.compile(r"^(threadIdx|blockIdx|blockDim)\.([xyz])$")


class _Reader:
    """Evaluates the kernel's straight-line statements into polynomials and digits."""

    def __init__(self, src: CudaSource, kernel: Function, fn: ts.Node) -> None:
        self.src, self.kernel, self.fn = src, kernel, fn
        self.params = {p.name for p in kernel.params if not p.is_pointer}
        self.consts = file_constants(src)
        self.env: dict[str, Value] = {}
        self.bounds: dict[str, P.Poly] = {}  # grid dimension -> exclusive bound of its whole index
        self.written = X.assigned_names(fn)
        self.digits: dict[str, Digit] = {}  # every digit an index or product used, by symbol

    def text(self, n: ts.Node) -> str:
        return self.src.text_of(n)

    def fail(self, n: ts.Node, why: str) -> NotACopy:
        return NotACopy(f"line {n.start_point.row + 1}: {why} (`{self.text(n).strip()[:60]}`)")

    # expressions
    def value(self, n: ts.Node) -> Value:
        n = unparenthesized(n, clause=True)
        t = n.type
        if t == "number_literal":
            value = P.int_literal(self.text(n))
            if value is None:
                raise self.fail(n, "not an integer literal")
            return P.const(value)
        if t == "identifier":
            name = self.text(n)
            if name in self.env:
                return self.env[name]
            if name in self.params or name in self.consts:
                if name in self.written:
                    raise self.fail(n, f"{name} is reassigned")
                return {(name,): 1} if name not in self.consts else P.const(self.consts[name])
            raise self.fail(n, f"{name} is not a parameter, constant or single-assignment local")
        if t == "cast_expression":
            return self.value(n.child_by_field_name("value"))  # type: ignore[arg-type]
        if t == "call_expression" and X.callee_name(n) == "static_cast":
            args = n.child_by_field_name("arguments")
            if args is not None and len(args.named_children) == 1:
                return self.value(args.named_children[0])
        thread = self._thread_index(n)
        if thread is not None:
            return Digit.of(thread, P.const(1), None)
        if t == "binary_expression":
            op = self.text(n.children[1])
            a = self.value(n.child_by_field_name("left"))  # type: ignore[arg-type]
            b = self.value(n.child_by_field_name("right"))  # type: ignore[arg-type]
            if op in ("/", "%"):
                return self._digit(n, a, b, op)
            a, b = self.poly(a), self.poly(b)
            if op == "+":
                return P.add(a, b)
            if op == "-":
                return P.add(a, b, -1)
            if op == "*":
                return P.mul(a, b)
            raise self.fail(n, f"operator {op} in an index")
        if t == "field_expression":
            m = _THREAD.match(re.sub(r"\s+", "", self.text(n)))
            if m and m.group(1) == "blockDim":
                return {(f"blockDim.{m.group(2)}",): 1}
        raise self.fail(n, "an expression the stride analysis does not model")

    def _thread_index(self, n: ts.Node) -> str | None:
        """`blockIdx.d * blockDim.d + threadIdx.d` in any order, casts anywhere: the thread's whole
        index along d."""
        n = self._bare(n)
        if n.type != "binary_expression" or self.text(n.children[1]) != "+":
            return None
        terms = [self._bare(n.child_by_field_name(f)) for f in ("left", "right")]  # type: ignore[arg-type]
        for a, b in (terms, terms[::-1]):
            m = _THREAD.match(re.sub(r"\s+", "", self.text(a)))
            if (
                not m
                or m.group(1) != "threadIdx"
                or b.type != "binary_expression"
                or self.text(b.children[1]) != "*"
            ):
                continue
            d = m.group(2)
            factors = {
                re.sub(r"\s+", "", self.text(self._bare(b.child_by_field_name(f)))) for f in ("left", "right")
            }  # type: ignore[arg-type]
            if factors == {f"blockIdx.{d}", f"blockDim.{d}"}:
                return d
        return None

    def _bare(self, n: ts.Node) -> ts.Node:
        """`n` without parentheses, C casts and `static_cast<T>(...)`."""
        while True:
            n = unparenthesized(n, clause=True)
            if n.type == "cast_expression" and n.child_by_field_name("value") is not None:
                n = n.child_by_field_name("value")  # type: ignore[assignment]
            elif n.type == "call_expression" and X.callee_name(n) == "static_cast":
                args = n.child_by_field_name("arguments")
                if args is None or len(args.named_children) != 1:
                    return n
                n = args.named_children[0]
            else:
                return n

    def poly(self, v: Value) -> P.Poly:
        if isinstance(v, Digit):
            self.digits[v.symbol] = v
            return {(v.symbol,): 1}
        return v

    def _digit(self, n: ts.Node, a: Value, b: Value, op: str) -> Digit:
        if not isinstance(a, Digit) or isinstance(b, Digit) or P.mono(b) is None:
            raise self.fail(n, f"`{op}` other than a thread index split by a product of sizes")
        if op == "/":
            return Digit.of(a.base, P.mul(a.lo_poly, b), a.hi_poly)
        hi = P.mul(a.lo_poly, b)
        if a.hi is not None and P.div(a.hi_poly, hi) is None:  # type: ignore[arg-type]
            raise self.fail(n, "a `%` whose modulus does not divide the enclosing one")
        return Digit.of(a.base, a.lo_poly, hi)

    # guards
    def bound(self, cond: ts.Node, negated: bool) -> None:
        """Record `index < E` facts from a guard (`negated`: an early-return condition `index >= E`)."""
        cond = unparenthesized(cond, clause=True)
        if cond.type == "binary_expression" and self.text(cond.children[1]) in ("&&", "||"):
            if self.text(cond.children[1]) != ("||" if negated else "&&"):
                raise self.fail(cond, "a guard that is not a conjunction of bounds")
            self.bound(cond.child_by_field_name("left"), negated)  # type: ignore[arg-type]
            self.bound(cond.child_by_field_name("right"), negated)  # type: ignore[arg-type]
            return
        if cond.type != "binary_expression":
            raise self.fail(cond, "a guard that is not a bound")
        op = self.text(cond.children[1])
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
        want = ">=" if negated else "<"
        a, b = self.value(left), self.value(right)  # type: ignore[arg-type]
        if not isinstance(a, Digit):
            a, b, op = b, a, flip.get(op, op)
        if op != want or not isinstance(a, Digit) or isinstance(b, Digit):
            raise self.fail(cond, f"a guard other than `index {want} bound`")
        if a.lo != (((), 1),) or a.hi is not None:
            raise self.fail(cond, "a bound on a part of the index, not the whole index")
        if a.base in self.bounds:
            raise self.fail(cond, f"two bounds on the thread index along {a.base}")
        self.bounds[a.base] = b

    # statements
    def statements(self, block: ts.Node) -> ts.Node:
        """Read declarations and guards in order; return the one store statement."""
        stmts = [c for c in block.named_children if c.type != "comment"]
        for i, s in enumerate(stmts):
            last = i == len(stmts) - 1
            if s.type == "declaration":
                for d in s.children_by_field_name("declarator"):
                    if d.type != "init_declarator":
                        raise self.fail(s, "a local declared without a value")
                    name = self.text(d.child_by_field_name("declarator"))  # type: ignore[arg-type]
                    if not re.fullmatch(r"\w+", name) or name in self.written or name in self.env:
                        raise self.fail(s, f"local {name} is not a single-assignment scalar")
                    self.env[name] = self.value(d.child_by_field_name("value"))  # type: ignore[arg-type]
                continue
            if s.type == "if_statement" and s.child_by_field_name("alternative") is None:
                body = s.child_by_field_name("consequence")
                inner = [c for c in body.named_children if c.type != "comment"] if body is not None else []
                if body is not None and (
                    body.type == "return_statement" or [c.type for c in inner] == ["return_statement"]
                ):
                    self.bound(s.child_by_field_name("condition"), negated=True)  # type: ignore[arg-type]
                    continue
                if last and body is not None:
                    self.bound(s.child_by_field_name("condition"), negated=False)  # type: ignore[arg-type]
                    return self.statements(body) if body.type == "compound_statement" else self._store(body)
            if last and s.type == "expression_statement":
                return self._store(s)
            raise self.fail(s, "a statement other than locals, bounds and one copy")
        raise NotACopy(f"{self.kernel.name}: no store")

    def _store(self, s: ts.Node) -> ts.Node:
        e = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
        if e is None or e.type != "assignment_expression" or self.text(e.children[1]) != "=":
            raise self.fail(s, "the last statement is not a plain store")
        return s


def _access(r: _Reader, n: ts.Node) -> tuple[str, P.Poly]:
    """(pointer, index) of `p[i]` or `__ldg(&p[i])`."""
    n = unparenthesized(n, clause=True)
    if n.type == "call_expression" and X.callee_name(n) == "__ldg":
        args = n.child_by_field_name("arguments")
        arg = (
            unparenthesized(args.named_children[0], clause=True)
            if args is not None and len(args.named_children) == 1
            else n
        )
        if arg.type == "pointer_expression" and arg.children[0].type == "&":
            n = unparenthesized(arg.child_by_field_name("argument"), clause=True)  # type: ignore[arg-type]
    if n.type != "subscript_expression":
        raise r.fail(n, "not a load or store of one element")
    base = n.child_by_field_name("argument")
    lst = next((c for c in n.children if c.type == "subscript_argument_list"), None)
    if base is None or base.type != "identifier" or lst is None or len(lst.named_children) != 1:
        raise r.fail(n, "not a one-dimensional access of a pointer parameter")
    return r.text(base), r.poly(r.value(lst.named_children[0]))


def _ladder(r: _Reader, digits: list[Digit], base: str) -> list[tuple[Digit, P.Poly]]:
    """The digits used along one grid dimension, lowest first, with their extents; they must tile
    the whole index exactly (`[1, a) [a, b) ... [z, bound)`)."""
    bound = r.bounds.get(base)
    if bound is None:
        raise NotACopy(f"no bound on the thread index along {base} (the grid covers what?)")
    left = set(digits)
    out: list[tuple[Digit, P.Poly]] = []
    lo: P.Poly = P.const(1)
    while left:
        d = next((d for d in left if d.lo_poly == lo), None)
        if d is None:
            raise NotACopy(
                f"the parts of the index along {base} do not tile it (none starts at {c_text(lo)})"
            )
        left.remove(d)
        top = d.hi_poly if d.hi is not None else bound
        if top is None or (d.hi is None and left) or (not left and top != bound):
            raise NotACopy(f"the parts of the index along {base} do not end at its bound {c_text(bound)}")
        ext = P.div(top, lo)
        if ext is None:
            raise NotACopy(f"extent {c_text(top)} / {c_text(lo)} along {base} is not a product of sizes")
        out.append((d, ext))
        lo = top
    return out


def analyze(src: CudaSource, kernel: Function) -> StridedCopy:
    """The strided-copy structure of `kernel`, or NotACopy with the reason."""
    if kernel.template_params:
        raise NotACopy(f"{kernel.name} is a template")
    fn = src.node_for(kernel)
    if any(d.function == kernel.name for d in src.shared_decls):
        raise NotACopy(f"{kernel.name} already uses shared memory")
    body = fn.child_by_field_name("body")
    assert body is not None
    r = _Reader(src, kernel, fn)
    store = r.statements(body)
    assign = store.named_children[0]
    dst, w = _access(r, assign.child_by_field_name("left"))  # type: ignore[arg-type]
    srcp, rd = _access(r, assign.child_by_field_name("right"))  # type: ignore[arg-type]
    pointers = {p.name: p for p in kernel.params if p.is_pointer}
    if dst not in pointers or srcp not in pointers or dst == srcp:
        raise r.fail(assign, "not a copy from one pointer parameter to another")
    # coordinates: the digits the indices use; a whole index used beside its parts is their sum
    syms = {**r.digits, **{d.symbol: d for d in (Digit.of(b, P.const(1), None) for b in "xyz")}}
    used = {f for p in (w, rd) for k in p for f in k if f.startswith("@")}
    coords: list[tuple[Digit, P.Poly]] = []
    for base in sorted({syms[s].base for s in used}):
        whole = Digit.of(base, P.const(1), None)
        parts = [syms[s] for s in used if syms[s].base == base and s != whole.symbol]
        if whole.symbol in used and not parts:
            parts = [whole]
        ladder = _ladder(r, parts, base)
        coords += ladder
        if whole.symbol in used and parts != [whole]:
            expansion: P.Poly = {}
            for d, _ in ladder:
                expansion = P.add(expansion, P.mul({(d.symbol,): 1}, d.lo_poly))
            w, rd = (_expand(p, whole.symbol, expansion) for p in (w, rd))
    read_strides, read_off = _strides(r, rd, [d.symbol for d, _ in coords], assign)
    write_strides, write_off = _strides(r, w, [d.symbol for d, _ in coords], assign)
    labels: dict[str, str] = {}
    for name, v in r.env.items():
        if isinstance(v, Digit):
            labels.setdefault(v.symbol, name)
    elem = next(p.type for p in kernel.params if p.name == dst)
    elem = " ".join(x for x in re.sub(r"\*|\b(const|__restrict__|__restrict|restrict)\b", " ", elem).split())
    return StridedCopy(
        kernel=kernel.name,
        src=srcp,
        dst=dst,
        elem=elem,
        coords=tuple(
            Coord(
                d.symbol,
                labels.get(d.symbol, f"the {d.base} index"),
                ext,
                read_strides[d.symbol],
                write_strides[d.symbol],
            )
            for d, ext in coords
        ),
        read_offset=read_off,
        write_offset=write_off,
        store_start=store.start_byte,
        store_end=store.end_byte,
    )


def _expand(p: P.Poly, sym: str, by: P.Poly) -> P.Poly:
    out: P.Poly = {}
    for k, v in p.items():
        if sym in k:
            rest = list(k)
            rest.remove(sym)
            out = P.add(out, P.mul({tuple(rest): v}, by))
        else:
            out = P.add(out, {k: v})
    return out


def _strides(r: _Reader, p: P.Poly, coords: list[str], at: ts.Node) -> tuple[dict[str, P.Poly], P.Poly]:
    """Each coordinate's coefficient in an index that must be affine in them, and the rest."""
    strides: dict[str, P.Poly] = {c: {} for c in coords}
    rest: P.Poly = {}
    for k, v in p.items():
        cs = [f for f in k if f.startswith("@")]
        if len(cs) > 1 or any(f.startswith("blockDim") for f in k):
            raise r.fail(at, "an index that is not affine in the thread's coordinates")
        if cs:
            if cs[0] not in strides:
                raise r.fail(at, "an index that uses a coordinate outside the tiling")
            k2 = list(k)
            k2.remove(cs[0])
            strides[cs[0]] = P.add(strides[cs[0]], {tuple(k2): v})
        else:
            rest = P.add(rest, {k: v})
    return strides, rest


# ---- the tiled transpose ------------------------------------------------------------------------


def tiled_body(copy: StridedCopy, kernel: Function) -> str:
    """A kernel body moving the copy through a TILE x TILE shared tile: the read coalesced along
    its contiguous coordinate P, the write along Q, bounds checked on both (odd sizes)."""
    pq = copy.transposed
    assert pq is not None
    p, q = pq
    batch = [c for c in copy.coords if c.symbol not in (p.symbol, q.symbol)]
    taken = {x.name for x in kernel.params}
    n = {
        k: fresh_name(taken, k)
        for k in ("tile", "tx", "ty", "nP", "nQ", "t", "p0", "q0", "rbase", "wbase", "k")
    }
    bnames = [fresh_name(taken, f"b{i}") for i in range(len(batch))]
    lines = [
        "{",
        "    // tiled transpose: coalesced reads along one coordinate, coalesced writes along the other",
        f"    __shared__ {copy.elem} {n['tile']}[{TILE}][{TILE}];",
        f"    const int {n['tx']} = threadIdx.x, {n['ty']} = threadIdx.y;",
        f"    const size_t {n['nP']} = {c_text(p.extent)}, {n['nQ']} = {c_text(q.extent)};",
        *_element_path(copy, n, bnames),
        f"    size_t {n['t']} = blockIdx.x;",
        f"    const size_t {n['p0']} = {n['t']} % (({n['nP']} + {TILE - 1}) / {TILE}) * {TILE};",
        f"    {n['t']} /= ({n['nP']} + {TILE - 1}) / {TILE};",
        f"    const size_t {n['q0']} = {n['t']} % (({n['nQ']} + {TILE - 1}) / {TILE}) * {TILE};",
        f"    {n['t']} /= ({n['nQ']} + {TILE - 1}) / {TILE};",
    ]
    lines += _split(n["t"], batch, bnames, "    ")
    names = {c.symbol: b for c, b in zip(batch, bnames, strict=True)}

    def base(side: str) -> str:
        off = copy.read_offset if side == "read" else copy.write_offset
        poly = dict(off)
        for c in batch:
            poly = P.add(poly, P.mul({(c.symbol,): 1}, c.read_stride if side == "read" else c.write_stride))
        return c_text(poly, names)

    def at(stride: P.Poly, idx: str) -> str:
        return idx if stride == {(): 1} else f"({idx}) * ({c_text(stride)})"

    tx, ty, k, tile = n["tx"], n["ty"], n["k"], n["tile"]
    p0, q0, np_, nq = n["p0"], n["q0"], n["nP"], n["nQ"]
    load = f"{copy.src}[{n['rbase']} + {at(q.read_stride, f'{q0} + {ty} + {k}')} + {at(p.read_stride, f'{p0} + {tx}')}]"
    dest = f"{copy.dst}[{n['wbase']} + {at(p.write_stride, f'{p0} + {ty} + {k}')} + {at(q.write_stride, f'{q0} + {tx}')}]"
    lines += [
        f"    const size_t {n['rbase']} = {base('read')}, {n['wbase']} = {base('write')};",
        f"    for (int {k} = 0; {k} < {TILE}; {k} += {ROWS}) {{",
        f"        if ({p0} + {tx} < {np_} && {q0} + {ty} + {k} < {nq}) {tile}[{ty} + {k}][{tx}] = {load};",
        "    }",
        "    __syncthreads();",
        f"    for (int {k} = 0; {k} < {TILE}; {k} += {ROWS}) {{",
        f"        if ({q0} + {tx} < {nq} && {p0} + {ty} + {k} < {np_}) {dest} = {tile}[{tx}][{ty} + {k}];",
        "    }",
        "}",
    ]
    return "\n".join(lines)


def _split(t: str, coords: list[Coord], names: list[str], indent: str) -> list[str]:
    """Declarations that split the counter `t` into `coords` (the first fastest, the last the rest)."""
    out = []
    for i, (c, b) in enumerate(zip(coords, names, strict=True)):
        if i == len(coords) - 1:
            out.append(f"{indent}const size_t {b} = {t};")
        else:
            out.append(f"{indent}const size_t {b} = {t} % ({c_text(c.extent)});")
            out.append(f"{indent}{t} /= {c_text(c.extent)};")
    return out


def _element_path(copy: StridedCopy, n: dict[str, str], bnames: list[str]) -> list[str]:
    """Shape-aware: when either side is shorter than a tile, a tile would leave most of its
    threads idle, so each thread copies one element in the write's order (uniform per launch)."""
    p, q = copy.transposed  # type: ignore[misc]
    batch = [c for c in copy.coords if c.symbol not in (p.symbol, q.symbol)]
    order = [q, p, *batch]
    names = [f"{n['q0']}_e", f"{n['p0']}_e", *bnames]
    by = {c.symbol: nm for c, nm in zip(order, names, strict=True)}
    total: P.Poly = P.const(1)
    for c in copy.coords:
        total = P.mul(total, c.extent)

    def addr(side: str) -> str:
        poly = dict(copy.read_offset if side == "read" else copy.write_offset)
        for c in copy.coords:
            poly = P.add(poly, P.mul({(c.symbol,): 1}, c.read_stride if side == "read" else c.write_stride))
        return c_text(poly, by)

    t = n["t"]
    return [
        f"    if ({n['nP']} < {TILE} || {n['nQ']} < {TILE}) {{  // shorter than a tile: one element per thread",
        f"        size_t {t} = (size_t)blockIdx.x * {TILE * ROWS} + {n['ty']} * {TILE} + {n['tx']};",
        f"        if ({t} >= {c_text(total)}) return;",
        *_split(t, order, names, "        "),
        f"        {copy.dst}[{addr('write')}] = {copy.src}[{addr('read')}];",
        "        return;",
        "    }",
    ]


def tiled_grid(copy: StridedCopy, args: dict[str, str]) -> str:
    """The launch's grid for `tiled_body`, over the launcher's argument texts: tiles, or one
    thread per element when either side is shorter than a tile."""
    pq = copy.transposed
    assert pq is not None
    p, q = pq
    names = {k: paren(v) for k, v in args.items()}
    parts = [f"(({c_text(c.extent, names)} + {TILE - 1}) / {TILE})" for c in (p, q)]
    parts += [paren(c_text(c.extent, names)) for c in copy.coords if c.symbol not in (p.symbol, q.symbol)]
    total: P.Poly = P.const(1)
    for c in copy.coords:
        total = P.mul(total, c.extent)
    small = f"{paren(c_text(p.extent, names))} < {TILE} || {paren(c_text(q.extent, names))} < {TILE}"
    per_element = f"({c_text(total, names)} + {TILE * ROWS - 1}) / {TILE * ROWS}"
    return f"(unsigned)({small} ? {per_element} : {' * '.join(parts)})"


def tiled_block() -> str:
    return f"dim3({TILE}, {ROWS})"


def substitute(text: str, mapping: dict[str, str]) -> str:
    return subst_idents(text, mapping)
