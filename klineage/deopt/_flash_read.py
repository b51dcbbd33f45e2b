"""Read a fused attention kernel back into its three phases (flash_fusion's backward step).

A fused kernel is recognised on structure: a kernel whose loop over key tiles holds an online
softmax (a running max through fmax and a rescale exp(m_old - m_new)), launched by a launcher
that has a pointer parameter no launch passes (the scratch the unfused form would write).

It can be un-fused when it is written in the element-accessor form: kernel-local lambdas that
give, per element, the row guard (`bool(row)`), the score of a scratch index (`float(idx)`, with
its dot loop), the term of an output index and a key (`float(idx, key)`) and the output write
(`void(idx, float acc)`, opening with the term's statements). The three kernels are then written
in the canonical naive form (a thread per scratch element, per row, per output).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Refused
from klineage.source import edit
from klineage.source import nodes as N
from klineage.source.constructs import Function, LaunchSite
from klineage.source.model import CudaSource
from klineage.source.syntax import unparen_text

_EXP = r"(?:__expf|expf|exp|__exp)"
_MAX = r"(?:fmaxf|fmax|max)"


@dataclass(frozen=True)
class Lambda:
    name: str
    params: tuple[tuple[str, str], ...]  # (type, name)
    ret: str
    stmts: tuple[str, ...]
    node: ts.Node


@dataclass(frozen=True)
class Fused:
    name: str
    kernel: Function
    node: ts.Node
    launch: LaunchSite
    scratch: str  # the launcher's pointer parameter no launch passes
    tile_loop: ts.Node


def _lambdas(src: CudaSource, body: ts.Node) -> list[Lambda]:
    out = []
    for s in body.named_children:
        if s.type != "declaration":
            continue
        d = s.child_by_field_name("declarator")
        lam = d.child_by_field_name("value") if d is not None and d.type == "init_declarator" else None
        if lam is None or lam.type != "lambda_expression":
            continue
        decl = next((c for c in lam.named_children if c.type == "lambda_declarator"), None)
        plist = next((c for c in decl.named_children if c.type == "parameter_list"), None) if decl else None
        ret = (
            next((c for c in decl.named_children if c.type == "trailing_return_type"), None) if decl else None
        )
        lbody = lam.child_by_field_name("body")
        if plist is None or ret is None or lbody is None:
            continue
        params = []
        for p in (c for c in plist.named_children if c.type == "parameter_declaration"):
            t = src.text_of(p)
            name = re.findall(r"\w+", t)[-1]
            params.append((t[: t.rfind(name)].strip(), name))
        stmts = tuple(src.text_of(c) for c in lbody.named_children if c.type != "comment")
        rtype = src.text_of(ret).replace("->", "").strip()
        out.append(Lambda(T.decl_name(s) or "", tuple(params), rtype, stmts, s))
    return out


def _tile_loop(src: CudaSource, body: ts.Node) -> ts.Node | None:
    """The loop whose body holds the online softmax (fmax and exp(m_old - m_new))."""
    for n in T.walk(body):
        if n.type != "for_statement":
            continue
        t = T.squash(src.text_of(n))
        if re.search(rf"{_MAX}\(", t) and re.search(rf"{_EXP}\((\w+)-(\w+)\)", t) and "__syncthreads" in t:
            return n
    return None


def _scratch_param(src: CudaSource, launcher: ts.Node) -> str | None:
    fn = next((f for f in src.launchers if f.start == launcher.start_byte), None)
    if fn is None:
        return None
    passed = {a.strip() for ls in src.launch_sites if fn.start <= ls.start < fn.end for a in ls.args}
    free = [p.name for p in fn.params if p.is_pointer and p.name not in passed and "float" in p.type]
    return free[0] if len(free) == 1 else None


def fused(src: CudaSource) -> list[Fused]:
    out = []
    for ls in src.launch_sites:
        fn = src.kernel(ls.name)
        launcher = T.enclosing_launcher(src, ls)
        if fn is None or launcher is None:
            continue
        node = src.node_for(fn)
        loop = _tile_loop(src, node.child_by_field_name("body"))
        scratch = _scratch_param(src, launcher)
        if loop is not None and scratch is not None:
            out.append(Fused(fn.name, fn, node, ls, scratch, loop))
    return out


@dataclass(frozen=True)
class Parts:
    f: Fused
    rowok: Lambda
    score: Lambda
    term: Lambda
    out: Lambda
    guard: str
    rows: str  # scratch rows, kernel side
    length: str  # key count, kernel side
    columns: str  # outputs per row, kernel side
    exp: str
    rows_host: str
    length_host: str
    columns_host: str


def _opens(out: Lambda, term: Lambda) -> bool:
    """Whether the output lambda opens with the term's statements (its guard returning nothing)."""
    pre = [re.sub(r"return\s+0\.0f\s*;", "return;", s) for s in term.stmts[:-1]]
    return out.params[0][1] == term.params[0][1] and list(out.stmts[: len(pre)]) == pre


def _one(lams: list[Lambda], ret: str, n: int, why: str, pred=lambda lam: True) -> Lambda:  # noqa: ANN001
    hit = [x for x in lams if x.ret.replace("const", "").strip() == ret and len(x.params) == n and pred(x)]
    if len(hit) != 1:
        raise Refused(f"{len(hit)} lambdas for {why} (one `{ret}` of {n} argument(s) expected)")
    return hit[0]


def _name(src: CudaSource, fn: ts.Node, text: str) -> str:
    """A local name resolved to its initializer, casts off (kernel side); must be one identifier."""
    t = T.strip_casts(T.resolve_local(src, fn, text)).strip("()")
    if not re.fullmatch(r"\w+", t):
        raise Refused(f"`{text}` is not a parameter of the kernel")
    return t


def read(src: CudaSource, kernel: str) -> Parts:
    f = next((x for x in fused(src) if x.name == kernel), None)
    if f is None:
        raise Refused(f"no fused attention kernel '{kernel}'")
    lams = _lambdas(src, f.node.child_by_field_name("body"))
    rowok = _one(lams, "bool", 1, "the row guard")
    score = _one(lams, "float", 1, "the score", lambda x: any(s.lstrip().startswith("for") for s in x.stmts))
    out = _one(lams, "void", 2, "the output")
    term = _one(lams, "float", 2, "the term", lambda x: _opens(out, x))
    g = (
        re.fullmatch(r"return\s*!\s*\((.*)\)\s*;", rowok.stmts[-1].strip(), re.S)
        if len(rowok.stmts) == 1
        else None
    )
    if g is None:
        raise Refused("the row guard is not `return !(cond);`")
    hdr = T.squash(src.text_of(f.tile_loop).split(")", 1)[0])
    m = re.search(r";\w+<(.+?);\w+\+=", hdr)
    calls = [n for n in T.walk(f.node) if n.type == "call_expression" and T.call_name(n) == out.name]
    arg0 = T.strip_casts(src.text_of(T.call_args(calls[0])[0])) if len(calls) == 1 else ""
    cm = re.fullmatch(r"\(?\w+\)?\*(\w+)\+.+", arg0)
    e = re.search(rf"({_EXP})\(\w+-\w+\)", T.squash(src.text_of(f.tile_loop)))
    if m is None or cm is None or e is None:
        raise Refused("no key-tile bound, output columns or rescale exp read")
    length, columns = _name(src, f.node, m.group(1)), _name(src, f.node, cm.group(1))
    rows = re.fullmatch(
        rf"\(?{rowok.params[0][1]}\)?>=(.+)", unparen_text(T.strip_casts(unparen_text(g.group(1))))
    )
    host = [
        T.kernel_expr_in_launcher(src, f.kernel, f.launch, x, f.node)
        for x in (rows.group(1) if rows else "", length, columns)
    ]
    if any(h is None for h in host):
        raise Refused("rows, key count or columns are not launch-time sizes")
    return Parts(f, rowok, score, term, out, g.group(1), rows.group(1), length, columns, e.group(1), *host)  # type: ignore[arg-type,union-attr]


def _params(src: CudaSource, f: Fused) -> str:
    plist = N.func_declarator(f.node).child_by_field_name("parameters")
    return src.text_of(plist).strip()[1:-1]


def kernels(src: CudaSource, p: Parts) -> str:
    """The three naive kernels (scratch as the last parameter)."""
    ps = _params(src, p.f) + ", float* P"
    base = p.f.name
    (it, idx), (st, row) = p.score.params[0], p.rowok.params[0]
    last = p.score.stmts[-1].strip()
    value = re.fullmatch(r"return\s+(.*);", last, re.S)
    if value is None:
        raise Refused("the score lambda does not end in `return value;`")
    score = "\n    ".join(re.sub(r"return\s+-INFINITY\s*;", "return;", s) for s in p.score.stmts[:-1])
    (ct, cidx), (jt, j) = p.term.params
    t = re.fullmatch(r"return\s+(.*);", p.term.stmts[-1].strip(), re.S)
    if t is None or p.out.params[0][1] != cidx:
        raise Refused("the term lambda does not end in `return term;` over the output's index")
    pre = "\n    ".join(re.sub(r"return\s+0\.0f\s*;", "return;", s) for s in p.term.stmts[:-1])
    post = "\n    ".join(p.out.stmts[len(p.term.stmts) - 1 :])
    acc = p.out.params[1][1]
    tid = "(long long)blockIdx.x * blockDim.x + threadIdx.x"
    return f"""__global__ void {base}_scores({ps}) {{
    const {it} {idx} = {tid};
    if ({idx} >= (long long)({p.rows}) * {p.length}) return;
    {score}
    P[{idx}] = {value.group(1)};
}}

__global__ void {base}_softmax({ps}) {{
    const {st} {row} = {tid};
    if ({unparen_text(p.guard)}) return;
    float* kl_p = P + {row} * {p.length};
    float kl_mx = -INFINITY;
    for (int kl_j = 0; kl_j < {p.length}; ++kl_j) kl_mx = fmaxf(kl_mx, kl_p[kl_j]);
    float kl_sum = 0.0f;
    for (int kl_j = 0; kl_j < {p.length}; ++kl_j) kl_sum += {p.exp}(kl_p[kl_j] - kl_mx);
    for (int kl_j = 0; kl_j < {p.length}; ++kl_j) kl_p[kl_j] = {p.exp}(kl_p[kl_j] - kl_mx) / kl_sum;
}}

__global__ void {base}_weighted({ps}) {{
    const {ct} {cidx} = {tid};
    {pre}
    const long long kl_row = {cidx} / {p.columns};
    const float* kl_w = P + kl_row * {p.length};
    float {acc} = 0.0f;
    for ({jt} {j} = 0; {j} < {p.length}; ++{j}) {acc} += kl_w[{j}] * {T.paren(t.group(1))};
    {post}
}}
"""


def unfuse(src: CudaSource, kernel: str) -> CudaSource:
    """The three-phase form of the fused kernel `kernel` (the launcher's scratch written again)."""
    p = read(src, kernel)
    f = p.f
    launcher = T.enclosing_launcher(src, f.launch)
    base, args = f.name, ", ".join(f.launch.args) + f", {f.scratch}"
    stream = f", {f.launch.stream}" if f.launch.stream else ""
    rows, length, cols = (T.paren(x) for x in (p.rows_host, p.length_host, p.columns_host))

    def grid(n: str) -> str:
        return f"(unsigned)(((long long){n} + 255) / 256), 256, 0{stream}"

    three = (
        f"{base}_scores<<<{grid(f'{rows} * {length}')}>>>({args});\n"
        f"    {base}_softmax<<<{grid(rows)}>>>({args});\n"
        f"    {base}_weighted<<<{grid(f'{rows} * {cols}')}>>>({args});"
    )
    stmt = src.node_for(f.launch)
    while stmt.parent is not None and stmt.type != "expression_statement":
        stmt = stmt.parent
    attrs = [
        c
        for c in src.calls(r"cudaFuncSetAttribute")
        if launcher is not None and launcher.start_byte <= c.start < launcher.end_byte
        and re.match(rf"\s*\(?\s*&?\s*{re.escape(base)}\b", src.text_of(c).split("(", 1)[1])
    ]  # fmt: skip
    edits = [edit.replace(stmt, three), edit.replace(f.node, kernels(src, p).rstrip())]
    for c in attrs:
        node = src.node_for(c)
        while node.parent is not None and node.type != "expression_statement":
            node = node.parent
        edits.append(edit.delete(src, node))
    return edit.apply_edits(src, edits)
