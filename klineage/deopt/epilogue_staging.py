"""Epilogue staged through shared memory: the warps store their WMMA accumulator fragments into a
shared-memory image of the block's output tile, wait at a barrier, then stream the image out to
global memory in wide rows (`int4` copies, a warp per run of rows: cuda_hgemm's base kernel), so
that the global stores are full 128-byte lines instead of a fragment's 32-byte pieces.

Backward: each fragment is stored straight to its place in global memory
(`store_matrix_sync(C + origin + s / LD * ldc + s % LD, frag, ldc, mem_row_major)`, s its offset
in the image), and the barrier and the copy-out loop go. The kernel must end with the three.

Read on structure, checked by evaluation: the addresses of the copy-out's reads (shared) and
writes (global) and of the fragment stores are resolved through the kernel's pointer locals
(`&smem[0][0] + E`, `&C[E]`, `(int4 *)(P + E) + k`) to element offsets, and evaluated for every
thread of the block and every loop index at two sets of sample sizes: the copy-out must write
global offset `origin + (s / LD) * ldc + s % LD` for shared offset s (ldc one integer parameter
of the kernel), and copy exactly the image's elements the fragments fill. No mechanical forward
step: the skill it records is for an LLM provider.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit, syntax
from klineage.source.model import CudaSource
from klineage.source.syntax import (
    file_constants,
    int_program,
    paren,
    run_int,
    squash,
    subst_idents,
    unparen_text,
    walk,
)

_STORE = re.compile(r"(?:[\w:]*::)?store_matrix_sync")
_VEC = {"int4": 16, "float4": 16, "uint4": 16, "int2": 8, "float2": 8}
_SIZE = (("double", 8), ("float", 4), ("int", 4), ("half", 2), ("bfloat16", 2))
#: block-uniform names without a value get these, one set per sample (two sets: a relation that
#: holds at both is not an accident of one value)
_SAMPLES = (3, 5)


@dataclass(frozen=True)
class _Epilogue:
    fn: ts.Node
    stores: ts.Node  # the loop nest of fragment stores
    call: ts.Node  # the store_matrix_sync call
    barrier: ts.Node
    copy: ts.Node  # the copy-out loop
    dst: str  # the copy's written address, as text
    srcx: str  # its read address


def _only_call(loop: ts.Node) -> ts.Node | None:
    """The single store_matrix_sync call at the bottom of a perfect loop nest (declarations allowed)."""
    node = loop
    while node.type == "for_statement":
        body = node.child_by_field_name("body")
        stmts = syntax.named(body) if body is not None and body.type == "compound_statement" else [body]
        rest = [s for s in stmts if s is not None and s.type != "declaration"]
        if len(rest) != 1:
            return None
        node = rest[0]
    if node.type != "expression_statement" or not node.named_children:
        return None
    call = node.named_children[0]
    if call.type != "call_expression" or not _STORE.fullmatch(T.call_name(call)):
        return None
    return call


def _copy(src: CudaSource, loop: ts.Node) -> tuple[str, str] | None:
    """(written address, read address) of a loop whose body is one `*D = *S;`."""
    body = loop.child_by_field_name("body")
    stmts = syntax.named(body) if body is not None and body.type == "compound_statement" else [body]
    if loop.type != "for_statement" or len(stmts) != 1 or stmts[0] is None:
        return None
    s = stmts[0]
    if s.type != "expression_statement" or not s.named_children:
        return None
    a = s.named_children[0]
    if a.type != "assignment_expression" or a.child_by_field_name("operator").type != "=":
        return None
    left, right = (squash(src.text_of(a.child_by_field_name(f))) for f in ("left", "right"))
    if not (left.startswith("*") and right.startswith("*")):
        return None
    return left[1:], right[1:]


def read(src: CudaSource, fn: ts.Node) -> _Epilogue:
    body = syntax.named(fn.child_by_field_name("body"))
    if len(body) < 3:
        raise Refused("the kernel is too short to end with a staged epilogue")
    stores, barrier, copy = body[-3:]
    call = _only_call(stores) if stores.type == "for_statement" else None
    if call is None:
        raise Refused("the kernel does not end with a loop nest of fragment stores")
    if squash(src.text_of(barrier)) != "__syncthreads();":
        raise Refused("no barrier between the fragment stores and the copy-out")
    got = _copy(src, copy)
    if got is None:
        raise Refused("the kernel's last statement is not a copy loop `*D = *S;`")
    return _Epilogue(fn, stores, call, barrier, copy, got[0], got[1])


# ---- addresses ----------------------------------------------------------------------------------


def _split_plus(text: str) -> tuple[str, str] | None:
    """`A+B` split at the first top-level `+` (A a term without a top-level operator)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch in "+-*/%" and i > 0:
            return (text[:i], text[i + 1 :]) if ch == "+" else None
    return None


class _Addresses:
    """Element offsets of pointer expressions, through the kernel's pointer locals."""

    def __init__(self, src: CudaSource, fn: ts.Node) -> None:
        self.src, self.fn = src, fn
        self.arrays: dict[str, int] = {}  # array / pointer parameter -> element size
        for n in walk(fn):
            if n.type in ("parameter_declaration", "declaration"):
                t = src.text_of(n)
                name = T.decl_name(n) or ""
                if ("*" in t or "[" in t) and name:
                    size = next((s for k, s in _SIZE if k in src.text_of(n.child_by_field_name("type"))), 0)
                    if size:
                        self.arrays[name] = size

    def resolve(self, text: str, depth: int = 0) -> tuple[str, str]:
        """(array, element offset text) of an address; Refused when it cannot be read."""
        t = unparen_text(squash(text))
        if depth > 6:
            raise Refused(f"address {text} nests too deep")
        m = re.fullmatch(r"\((\w+)\*\)(.+)", t)
        if m and m.group(1) in _VEC:
            inner, k = m.group(2), "0"
            parts = _split_plus(inner)
            if parts is not None and parts[0].startswith("("):
                inner, k = parts
            base, off = self.resolve(inner, depth + 1)
            width = _VEC[m.group(1)] // self.arrays[base]
            return base, _plus(off, f"{width}*{paren(k)}" if k != "0" else "0")
        m = re.fullmatch(r"\((?:const)?\w+\*\)(.+)", t)
        if m:
            return self.resolve(m.group(1), depth + 1)
        m = re.fullmatch(r"&(\w+)\[0\]\[0\]", t)
        if m:
            return m.group(1), "0"
        m = re.fullmatch(r"&(\w+)\[(.+)\]", t)
        if m and "][" not in m.group(2):
            return m.group(1), m.group(2)
        if re.fullmatch(r"\w+", t):
            if t in self.arrays and T.init_text(self.src, self.fn, t) is None:
                return t, "0"
            init = T.init_text(self.src, self.fn, t)
            if init is None:
                raise Refused(f"{t} is not a pointer the kernel initialises once")
            return self.resolve(squash(init), depth + 1)
        parts = _split_plus(t)
        if parts is not None:
            base, off = self.resolve(parts[0], depth + 1)
            return base, _plus(off, parts[1])
        raise Refused(f"address {text} is not a pointer plus an offset")


def _plus(a: str, b: str) -> str:
    return b if a == "0" else a if b == "0" else f"{paren(a)}+{paren(b)}"


# ---- evaluation ---------------------------------------------------------------------------------


class _Env:
    """Integer values of the kernel's names for one thread at one sample."""

    def __init__(self, src: CudaSource, ep: _Epilogue, sample: int, params: dict[str, int]) -> None:
        self.src, self.ep = src, ep
        self.consts = file_constants(CudaSource.from_text(re.sub(r"//[^\n]*", "", src.text)))
        self.params, self.sample = params, sample
        decls = [n for n in syntax.named(ep.fn.child_by_field_name("body"))[:-3] if n.type == "declaration"]
        named = [(T.decl_name(n) or "", n) for n in decls]
        self.decls = [
            (nm, init) for nm, n in named if nm and (init := T.init_text(src, ep.fn, nm)) is not None
        ]
        #: locals whose value reads the thread index, directly or through another such local
        self.dependent: set[str] = set()
        for nm, init in self.decls:
            words = set(re.findall(r"\w+", init))
            if "threadIdx" in words or words & self.dependent:
                self.dependent.add(nm)

    def locals_for(self, thread: int) -> dict[str, int]:
        env = {**self.consts, **self.params, "threadIdx_x": thread}
        env.update({f"blockIdx_{a}": self.sample for a in "xyz"})
        for name, init in self.decls:
            v = _eval(init, env)
            if v is not None:
                env[name] = v
            elif name not in self.dependent:
                env[name] = self.sample * 7 + len(name)  # block-uniform: any value
        return env


def _eval(text: str, env: dict[str, int]) -> int | None:
    """`text` at `env` (names spelled as `int_program` reads them: `threadIdx_x`)."""
    return run_int(
        int_program(re.sub(r"\((?:size_t|int|unsigned|unsignedint|long)\)", "", squash(text))), env
    )


def _fold(text: str) -> str:
    """`text` with each parenthesized group of literals only replaced by its value."""
    while (m := re.search(r"\(([\d+\-*/%]+)\)", text)) and (v := _eval(m.group(1), {})) is not None:
        text = text[: m.start()] + str(v) + text[m.end() :]
    return text


def _loop_values(src: CudaSource, loop: ts.Node, env: dict[str, int]) -> tuple[str, range] | None:
    c = T.counting_loop(src, loop)
    if c is None:
        return None
    var, init, cond, _, step = c
    lo = _eval(src.text_of(init), env)
    hi = _eval(src.text_of(cond.child_by_field_name("right")), env)
    if lo is None or hi is None or step != "1":
        return None
    return var, range(lo, hi + (src.text_of(cond.child_by_field_name("operator")) == "<="))


def _nest(src: CudaSource, loop: ts.Node) -> list[ts.Node]:
    out = []
    node: ts.Node | None = loop
    while node is not None and node.type == "for_statement":
        out.append(node)
        body = node.child_by_field_name("body")
        inner = [s for s in syntax.named(body) if s.type == "for_statement"] if body is not None else []
        node = inner[0] if body is not None and body.type == "compound_statement" and inner else body
    return out


def _uses_outside(src: CudaSource, ep: _Epilogue, array: str) -> list[int]:
    """Lines naming `array` outside the copy-out, other than the declarations of pointer locals
    into it that only the copy-out reads."""
    body = ep.fn.child_by_field_name("body")
    inside = (ep.copy.start_byte, ep.copy.end_byte)

    def outside(n: ts.Node) -> bool:
        return not inside[0] <= n.start_byte < inside[1]

    names = {array}
    for d in (n for n in walk(body) if n.type == "declaration" and outside(n)):
        name = T.decl_name(d) or ""
        if array in re.findall(r"\w+", src.text_of(d)) and name != array:
            names.add(name)
    lines = []
    for n in walk(body):
        if n.type != "identifier" or n.text.decode() not in names or not outside(n):
            continue
        decl = T.statement_ancestor(n)
        own = decl.type == "declaration" and (T.decl_name(decl) or "") in names - {array}
        if not own:
            lines.append(src.line_of(n.start_byte))
    return sorted(set(lines))


class EpilogueStaging(Operator):
    name = "epilogue_staging"
    category = "staging"
    intent = (
        "Stage the output tile in shared memory: fragments stored to a shared image, a barrier, "
        "then wide coalesced copies of whole rows to global memory"
    )

    def find(self, src: CudaSource) -> list[Site]:
        out = []
        for k in src.kernels:
            try:
                ep = read(src, src.node_for(k))
            except Refused:
                continue
            out.append(
                self.site(src, ep.copy, f"output tile staged in shared memory in {k.name}", kernel=k.name)
            )
        return out

    def _epilogue(self, src: CudaSource, site: Site) -> _Epilogue:
        k = src.kernel(site.details["kernel"])
        if k is None:
            raise Refused(f"{self.name}: no kernel {site.details['kernel']}")
        return read(src, src.node_for(k))

    def _plan(self, src: CudaSource, ep: _Epilogue) -> tuple[str, str, str, str, str]:
        """(global array, origin text, shared offset text of the store, image row length text,
        global row length name); Refused with the relation that fails."""
        addr = _Addresses(src, ep.fn)
        gbase, goff = addr.resolve(ep.dst)
        sbase, soff = addr.resolve(ep.srcx)
        args = T.call_args(ep.call)
        if len(args) != 4 or squash(src.text_of(args[3])).split("::")[-1] != "mem_row_major":
            raise Refused("the fragments are not stored row-major")
        fbase, foff = addr.resolve(squash(src.text_of(args[0])))
        if fbase != sbase or gbase == sbase:
            raise Refused("the fragments are not stored into the image the copy-out reads")
        if addr.arrays.get(gbase) != addr.arrays.get(sbase):
            raise Refused("the image and the output have different element types")
        ld = squash(src.text_of(args[2]))
        kernel = src.kernel(T.N.func_name(ep.fn))
        ints = [
            p.name
            for p in (kernel.params if kernel is not None else ())
            if not p.is_pointer and re.search(r"\b(?:int|size_t|unsigned|long)\b", p.type)
        ]
        for ldc in ints:
            origins = self._holds(src, ep, goff, soff, foff, ld, ldc, ints)
            if origins is None:
                continue
            origin = self._origin(src, ep, goff)
            for sample, value in origins.items():
                env = _Env(src, ep, sample, self._params(ints, sample)).locals_for(0)
                if _eval(origin, env) != value:
                    raise Refused(f"the tile's origin {origin} is not the copy-out's")
            return gbase, origin, foff, ld, ldc
        raise Refused("the copy-out does not write shared offset s to origin + (s / LD) * ldc + s % LD")

    def _holds(
        self,
        src: CudaSource,
        ep: _Epilogue,
        goff: str,
        soff: str,
        foff: str,
        ld: str,
        ldc: str,
        ints: list[str],
    ) -> dict[int, int] | None:
        """The tile's origin at each sample when the relation holds for `ldc`, else None."""
        threads = self._threads(src, ep)
        if threads is None:
            return None
        origins: dict[int, int] = {}
        for sample in _SAMPLES:
            params = self._params(ints, sample)
            env = _Env(src, ep, sample, params)
            copied, stored, origin = set(), set(), None
            for t in range(threads):
                base = env.locals_for(t)
                ldv = _eval(ld, base)
                if ldv is None:
                    return None
                for vals in self._iterations(src, ep.copy, base):
                    e = {**base, **vals}
                    s, g = _eval(soff, e), _eval(goff, e)
                    if s is None or g is None:
                        return None
                    o = g - ((s // ldv) * params[ldc] + s % ldv)
                    if origin is None:
                        origin = o
                    if o != origin:
                        return None
                    copied.add(s)
                for vals in self._iterations(src, ep.stores, base):
                    f = _eval(foff, {**base, **vals})
                    if f is None:
                        return None
                    stored.add(f)
            width = min((b - a for a, b in itertools.pairwise(sorted(copied))), default=1)
            covered = {s + w for s in copied for w in range(width)}
            frag = {f + r * ldv + c for f in stored for r in range(16) for c in range(16)}
            if covered != frag or origin is None:
                return None
            origins[sample] = origin
        return origins

    @staticmethod
    def _params(ints: list[str], sample: int) -> dict[str, int]:
        return {p: 64 * sample + 16 * i for i, p in enumerate(ints)}

    def _threads(self, src: CudaSource, ep: _Epilogue) -> int | None:
        name = T.N.func_name(ep.fn)
        launches = T.launches_of(src, name)
        if not launches:
            return None
        consts = file_constants(CudaSource.from_text(re.sub(r"//[^\n]*", "", src.text)))
        sizes = {_eval(src.text_of(T.config_nodes(src, ls)[1]), consts) for ls in launches}
        return sizes.pop() if len(sizes) == 1 and None not in sizes else None

    def _iterations(self, src: CudaSource, loop: ts.Node, env: dict[str, int]) -> list[dict[str, int]]:
        out: list[dict[str, int]] = [{}]
        for lp in _nest(src, loop):
            nxt = []
            for vals in out:
                got = _loop_values(src, lp, {**env, **vals})
                if got is None:
                    return []
                var, rng = got
                nxt += [{**vals, var: v} for v in rng]
            out = nxt
        return out

    def _origin(self, src: CudaSource, ep: _Epilogue, goff: str) -> str:
        """The global offset of the image's first element, as text: the copy's written offset at
        thread 0 and the loop's first index, the thread-dependent locals inlined."""
        ints = [n for n in re.findall(r"\w+", goff) if n not in ("threadIdx",)]
        envs = [_Env(src, ep, sample, self._params(ints, sample)) for sample in _SAMPLES]
        first, second = (e.locals_for(0) for e in envs)
        text = goff
        for _ in range(4):
            names = set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)(?![\w.(])", text)) & envs[0].dependent
            if not names:
                break
            # a value the samples agree on is the thread's own (a warp index); else keep the text
            text = subst_idents(
                text,
                {
                    n: str(first[n]) if n in first and first[n] == second.get(n) else paren(squash(init))
                    for n in names
                    if (init := T.init_text(src, ep.fn, n)) is not None
                },
            )
        loops = {c[0]: "0" for lp in _nest(src, ep.copy) if (c := T.counting_loop(src, lp)) is not None}
        return _fold(subst_idents(text, loops).replace("threadIdx.x", "0"))

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        try:
            ep = self._epilogue(src, site)
            gbase, *_ = self._plan(src, ep)
        except Refused as e:
            return [Precondition("tile_image", False, str(e), "Storage")]
        stray = _uses_outside(src, ep, gbase)
        return [
            Precondition(
                "tile_image",
                True,
                "the copy-out writes the image's elements to origin + row * ldc + column, and the "
                "fragments fill exactly the elements it copies",
                "Storage",
            ),
            Precondition(
                "output_only_in_copy",
                not stray,
                f"{gbase} is read and written only by the copy-out (the barrier kept every earlier "
                "access before it)" + (f"; also on line(s) {', '.join(map(str, stray))}" if stray else ""),
                "Storage",
            ),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        ep = self._epilogue(src, site)
        gbase, origin, foff, ld, ldc = self._plan(src, ep)
        args = T.call_args(ep.call)
        f = paren(foff)
        addr = f"{gbase} + {paren(origin)} + {f} / {paren(ld)} * {ldc} + {f} % {paren(ld)}"
        return edit.apply_edits(
            src,
            [
                edit.replace(args[0], addr),
                edit.replace(args[2], ldc),
                edit.delete(src, ep.barrier),
                edit.delete(src, ep.copy),
            ],
        )
