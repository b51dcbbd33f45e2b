"""Helpers for the parallel-structure operators (reductions, atomics, coarsening, grid-stride,
tile sizes, register blocking): compile-time integers, identifier substitution, the thread-index
idioms, launch-site edits and a small divergence analysis.

These answer questions about *how threads map to work*, which the source model (constructs and
anchors) does not: which launch feeds a kernel parameter, whether a branch is warp-uniform, which
compile-time value a name has in the launcher.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import tree_sitter as ts

from klineage.source import edit
from klineage.source import nodes as N
from klineage.source.constructs import Function, LaunchSite
from klineage.source.model import CudaSource
from klineage.source.syntax import (  # noqa: F401  (re-exported: the operators read them as T.<name>)
    ancestors,
    assigned_in,
    call_args,
    call_name,
    calls_named,
    decl_name,
    declarator_ident,
    eval_int,
    file_constants,
    fn_node_of,
    has_call,
    init_text,
    is_pow2,
    jumps_out,
    local_decls,
    paren,
    squash,
    statement_ancestor,
    subst_idents,
    uses_ident,
    walk,
)

# --- thread-index idioms --------------------------------------------------------------------------

_TID_FORMS = (
    re.compile(r"^\(?blockIdx\.x\*(?P<b>[\w.]+)\)?\+threadIdx\.x$"),
    re.compile(r"^\(?(?P<b>[\w.]+)\*blockIdx\.x\)?\+threadIdx\.x$"),
    re.compile(r"^threadIdx\.x\+\(?blockIdx\.x\*(?P<b>[\w.]+)\)?$"),
    re.compile(r"^threadIdx\.x\+\(?(?P<b>[\w.]+)\*blockIdx\.x\)?$"),
)
_STRIDE_FORMS = (
    re.compile(r"^\(?gridDim\.x\*(?P<b>[\w.]+)\)?$"),
    re.compile(r"^\(?(?P<b>[\w.]+)\*gridDim\.x\)?$"),
)


def strip_casts(text: str) -> str:
    t = squash(text)
    t = re.sub(r"static_cast<\w+>", "", t)
    t = re.sub(r"\((?:int|unsigned|unsignedint|size_t|longlong)\)", "", t)
    return t


def global_tid(text: str) -> str | None:
    """The block-size text B when `text` is blockIdx.x * B + threadIdx.x (any order), else None."""
    t = strip_casts(text)
    t = re.sub(r"\((blockIdx\.x|threadIdx\.x|blockDim\.x)\)", r"\1", t)
    for rx in _TID_FORMS:
        m = rx.match(t)
        if m:
            return m.group("b")
    return None


def grid_stride(text: str) -> str | None:
    """The block-size text B when `text` is gridDim.x * B (any order), else None."""
    t = strip_casts(text)
    for rx in _STRIDE_FORMS:
        m = rx.match(t)
        if m:
            return m.group("b")
    return None


def resolve_local(src: CudaSource, fn: ts.Node, text: str, depth: int = 3) -> str:
    """`text`, with a plain local name replaced by its (never reassigned) initializer, recursively."""
    t = text.strip()
    for _ in range(depth):
        if not re.fullmatch(r"\w+", t):
            break
        init = init_text(src, fn, t)
        if init is None:
            break
        t = init.strip()
    return t


# --- divergence -----------------------------------------------------------------------------------


def _tid_aliases_inlined(fn: ts.Node, t: str) -> str:
    """`t` with locals that only alias the thread index (`unsigned tid = threadIdx.x;`, never
    reassigned) written as `threadIdx.x`, so `tid / 32` reads as warp-uniform like `threadIdx.x / 32`."""
    decls = local_decls(fn)
    written = assigned_in(fn)
    aliases = {
        name: "threadIdx.x"
        for name, node in decls.items()
        if node.type == "init_declarator"
        and name not in written
        and (val := node.child_by_field_name("value")) is not None
        and squash(val.text.decode()) in ("threadIdx.x", "(threadIdx.x)", "(int)threadIdx.x")
    }
    return subst_idents(t, aliases) if aliases else t


def _thread_dep(src: CudaSource, fn: ts.Node, text: str, consts: Mapping[str, int], seen: set[str]) -> str:
    """'none', 'warp' (uniform within a warp) or 'lane' for expression text in `fn`."""
    t = _tid_aliases_inlined(fn, squash(text))
    kind = "none"
    warp_div = re.compile(r"threadIdx\.x(?:/(\w+)|>>(\w+))")
    for m in warp_div.finditer(t):
        w = m.group(1) or m.group(2)
        v = eval_int(w, consts)
        if m.group(2) is not None and v is not None:
            v = 1 << v
        kind = "warp" if v is not None and v % 32 == 0 else "lane"
        if kind == "lane":
            return "lane"
    rest = warp_div.sub("", t)
    if re.search(r"threadIdx\.[xyz]", rest):
        # threadIdx.y / .z with blockDim.x a multiple of 32 is warp-uniform; we cannot know: lane
        return "lane"
    decls = None
    for name in set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)", rest)):
        if name in seen or name in consts:
            continue
        if decls is None:
            decls = local_decls(fn)
        if name not in decls:
            continue
        node = decls[name]
        if node.type != "init_declarator":
            if node.parent is not None and node.parent.type == "parameter_declaration":
                continue  # parameters are uniform
            # declared without initializer (assigned later): be conservative if threads write it
            kind = _worst(kind, "lane" if _assigned_thread_dependent(src, fn, name, consts, seen) else "none")
            continue
        val = node.child_by_field_name("value")
        sub = _thread_dep(src, fn, src.text_of(val) if val else "", consts, seen | {name})
        if name in assigned_in(fn):
            sub = _worst(sub, "lane" if _assigned_thread_dependent(src, fn, name, consts, seen) else "none")
        kind = _worst(kind, sub)
    return kind


def _assigned_thread_dependent(
    src: CudaSource, fn: ts.Node, name: str, consts: Mapping[str, int], seen: set[str]
) -> bool:
    for n in walk(fn):
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left is not None and left.type == "identifier" and left.text == name.encode():
                right = n.child_by_field_name("right")
                if _thread_dep(src, fn, src.text_of(right) if right else "", consts, seen | {name}) != "none":
                    return True
    return False


def _worst(a: str, b: str) -> str:
    order = {"none": 0, "warp": 1, "lane": 2}
    return a if order[a] >= order[b] else b


def thread_dependence(src: CudaSource, fn: ts.Node, text: str) -> str:
    """How an expression in `fn` varies across threads: 'none', 'warp' or 'lane'."""
    return _thread_dep(src, fn, text, file_constants(src), set())


def guards(src: CudaSource, node: ts.Node) -> list[tuple[ts.Node, str]]:
    """Conditions that decide whether `node` runs: enclosing if/loop/?: conditions and earlier
    `if (...) return;` statements of enclosing blocks, innermost first, with their text."""
    out: list[tuple[ts.Node, str]] = []
    fn = fn_node_of(node)
    child, p = node, node.parent
    while p is not None and p != fn:
        if p.type == "if_statement":
            cond = p.child_by_field_name("condition")
            if cond is not None and child != cond:
                out.append((p, src.text_of(cond)))
        elif p.type in ("while_statement", "do_statement"):
            cond = p.child_by_field_name("condition")
            if cond is not None:
                out.append((p, src.text_of(cond)))
        elif p.type == "for_statement":
            cond = p.child_by_field_name("condition")
            if cond is not None and child == p.child_by_field_name("body"):
                out.append((p, src.text_of(cond)))
        elif p.type == "conditional_expression":
            cond = p.child_by_field_name("condition")
            if cond is not None and child != cond:
                out.append((p, src.text_of(cond)))
        elif p.type == "binary_expression" and p.child_by_field_name("operator") is not None:
            op = p.child_by_field_name("operator")
            if op is not None and op.type in ("&&", "||") and child == p.child_by_field_name("right"):
                left = p.child_by_field_name("left")
                out.append((p, src.text_of(left) if left else ""))
        elif p.type == "compound_statement":
            for sib in p.named_children:
                if sib.start_byte >= child.start_byte:
                    break
                if sib.type == "if_statement" and _returns(sib):
                    cond = sib.child_by_field_name("condition")
                    out.append((sib, src.text_of(cond) if cond else ""))
        child, p = p, p.parent
    return out


def _returns(if_stmt: ts.Node) -> bool:
    return any(n.type == "return_statement" for n in walk(if_stmt))


def divergence(src: CudaSource, node: ts.Node) -> tuple[str, str]:
    """('none'|'warp'|'lane', the worst condition's text) for the code path reaching `node`."""
    fn = fn_node_of(node)
    worst, why = "none", ""
    if fn is None:
        return worst, why
    consts = file_constants(src)
    for _, cond in guards(src, node):
        k = _thread_dep(src, fn, cond, consts, set())
        if _worst(worst, k) != worst:
            worst, why = k, squash(cond)
    return worst, why


# --- kernels and launches -------------------------------------------------------------------------


def kernel_of(src: CudaSource, node: ts.Node) -> Function | None:
    fn = fn_node_of(node)
    if fn is None:
        return None
    return next(
        (
            f
            for f in src.functions
            if f.start <= fn.start_byte
            and fn.end_byte <= f.end
            and f.node_type == "function_definition"
            and src.node_for(f) == fn
        ),
        None,
    )


def launches_of(src: CudaSource, kernel: str) -> list[LaunchSite]:
    return [ls for ls in src.launch_sites if ls.name == kernel]


def config_nodes(src: CudaSource, ls: LaunchSite) -> list[ts.Node]:
    call = src.node_for(ls)
    kcs = N.kernel_call_syntax(call)
    return [c for c in kcs.named_children if c.type != "comment"] if kcs is not None else []


def template_arg_nodes(src: CudaSource, ls: LaunchSite) -> list[ts.Node]:
    call = src.node_for(ls)
    _, targs = N.callee(call.child_by_field_name("function"))
    return list(targs)


def param_map(kernel: Function, ls: LaunchSite) -> dict[str, str]:
    """Kernel parameter name -> the launch argument text that feeds it."""
    return {p.name: a for p, a in zip(kernel.params, ls.args, strict=False)}


def template_map(src: CudaSource, kernel: Function, ls: LaunchSite) -> dict[str, str]:
    """Kernel template parameter -> the launch's template argument text (defaults filled in)."""
    out: dict[str, str] = {}
    for i, tp in enumerate(kernel.template_params):
        if i < len(ls.template_args):
            out[tp.name] = ls.template_args[i]
        elif tp.default is not None:
            out[tp.name] = tp.default
    return out


def enclosing_launcher(src: CudaSource, ls: LaunchSite) -> ts.Node | None:
    return N.enclosing_function(src.node_for(ls))


def kernel_expr_in_launcher(
    src: CudaSource, kernel: Function, ls: LaunchSite, text: str, kfn: ts.Node
) -> str | None:
    """Translate kernel-side expression text (over parameters, never-reassigned locals, template
    parameters and file constants) into launcher-side text at launch `ls`; None if it uses
    anything else (thread or block indices, loop variables, reassigned locals)."""
    consts = file_constants(src)
    pmap = {k: paren(v) for k, v in param_map(kernel, ls).items()}
    tmap = {k: paren(v) for k, v in template_map(src, kernel, ls).items()}
    t = text
    for _ in range(4):
        names = set(re.findall(r"(?<![\w.])(?<!->)([A-Za-z_]\w*)(?!\s*\()", t))
        locals_ = {}
        for nm in names:
            if nm in pmap or nm in tmap or nm in consts or nm in _KEYWORDS:
                continue
            init = init_text(src, kfn, nm)
            if init is None:
                return None
            locals_[nm] = paren(init)
        if not locals_:
            break
        t = subst_idents(t, locals_)
    if re.search(r"\b(threadIdx|blockIdx|blockDim|gridDim)\b", t):
        return None
    names = set(re.findall(r"(?<![\w.])(?<!->)([A-Za-z_]\w*)(?!\s*\()", t))
    if any(nm not in pmap and nm not in tmap and nm not in consts and nm not in _KEYWORDS for nm in names):
        return None
    return subst_idents(t, {**pmap, **tmap})


_KEYWORDS = frozenset(
    {
        "int",
        "unsigned",
        "long",
        "size_t",
        "static_cast",
        "sizeof",
        "float",
        "double",
        "const",
        "true",
        "false",
        "warpSize",
    }
)


def ident_used_outside_launch(src: CudaSource, launcher: ts.Node, name: str, ls: LaunchSite) -> list[int]:
    """Lines where launcher identifier `name` is read other than in `ls`'s grid and its own
    assignments (e.g. passed on as a count to another kernel)."""
    lines = []
    call = src.node_for(ls)
    grids = [cfg[0] for other in launches_of(src, ls.name) if (cfg := config_nodes(src, other))]
    for n in walk(launcher):
        if n.type != "identifier" or n.text != name.encode():
            continue
        if any(g.start_byte <= n.start_byte < g.end_byte for g in grids):
            continue
        p = n.parent
        if p is not None and p.type == "assignment_expression" and p.child_by_field_name("left") == n:
            continue
        if p is not None and p.type == "init_declarator":
            continue
        stmt = statement_ancestor(n)
        if stmt.type == "expression_statement" and name in assigned_in(stmt) and not _in(call, stmt):
            continue  # part of computing it: `blocks = blocks > cap ? cap : blocks;`
        if stmt.type == "if_statement" or (
            stmt.parent is not None and stmt.parent.type == "condition_clause"
        ):
            continue
        if _in_condition_of_self_update(n, name):
            continue
        lines.append(n.start_point.row + 1)
    return lines


def _in(outer: ts.Node, inner: ts.Node) -> bool:
    return outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte


def _in_condition_of_self_update(n: ts.Node, name: str) -> bool:
    p = n.parent
    while p is not None and p.type != "if_statement":
        if p.type.endswith("_statement") and p.type != "expression_statement":
            return False
        p = p.parent
    if p is None:
        return False
    cons = p.child_by_field_name("consequence")
    return cons is not None and name in assigned_in(cons)


def grid_is_dim3(src: CudaSource, ls: LaunchSite) -> bool:
    """Whether the launch's grid is a dim3 (`dim3(...)`, a braced list, or a dim3 variable of the
    launcher), not one count of blocks that arithmetic can scale."""
    cfg = config_nodes(src, ls)
    grid = squash(src.text_of(cfg[0])) if cfg else ""
    if not cfg or grid.startswith("dim3") or "{" in grid:
        return True
    launcher = enclosing_launcher(src, ls)
    return bool(
        launcher is not None
        and re.fullmatch(r"\w+", grid)
        and any(
            n.type == "declaration"
            and decl_name(n) == grid
            and "dim3" in src.text_of(n.child_by_field_name("type"))
            for n in walk(launcher)
        )
    )


def grid_sizes(
    src: CudaSource, ls: LaunchSite, bench: Sequence[Sequence[int | float | None]]
) -> list[int | None]:
    """The launch's grid (a count of blocks) at each bench size (the launcher's argument values in
    order), its never-reassigned launcher locals inlined; None where it cannot be evaluated."""
    launcher = src.function(ls.function or "")
    cfg = config_nodes(src, ls)
    if launcher is None or not cfg or grid_is_dim3(src, ls):
        return [None for _ in bench]
    lnode = src.node_for(launcher)
    text = strip_casts(src.text_of(cfg[0]))
    for _ in range(4):
        names = set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)", text))
        sub = {n: paren(strip_casts(init)) for n in names if (init := init_text(src, lnode, n)) is not None}
        if not sub:
            break
        text = subst_idents(text, sub)
    consts = file_constants(src)
    return [eval_int(text, bench_env(consts, launcher, values)) for values in bench]


def bench_env(
    consts: Mapping[str, int], launcher: Function, values: Sequence[int | float | None]
) -> dict[str, int]:
    """The names a launch's sizes are written in, at one bench shape: the file's constants and the
    launcher's integer arguments (`values` in its parameters' order, None for a tensor)."""
    return {
        **consts,
        **{p.name: int(v) for p, v in zip(launcher.params, values, strict=False) if isinstance(v, int)},
    }


def replace_grid(src: CudaSource, ls: LaunchSite, text: str) -> edit.Edit:
    """An edit setting the launch's grid expression."""
    cfg = config_nodes(src, ls)
    return edit.replace(cfg[0], text)


def ceil_div(count: str, block: str) -> str:
    c, b = paren(count), paren(block)
    if re.fullmatch(r"\d+", b.strip()):
        return f"({c} + {int(b) - 1}) / {b}"
    return f"({c} + {b} - 1) / {b}"


def counting_loop(
    src: CudaSource, loop: ts.Node, any_step: bool = False
) -> tuple[str, ts.Node, ts.Node, ts.Node, str] | None:
    """(var, init value node, condition node, update node, step) of `for (int j = A; j < B; UPDATE)`
    whose update adds one (`++j`, `j++`, `j += 1`, `j = j + 1`: step "1") or, with `any_step`,
    a loop-invariant name or number (`j += W`: each iteration owns the elements [j, j + W))."""
    if loop.type != "for_statement":
        return None
    init, cond, upd = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if init is None or cond is None or upd is None or init.type != "declaration":
        return None
    ds = init.children_by_field_name("declarator")
    if len(ds) != 1 or ds[0].type != "init_declarator" or ds[0].child_by_field_name("value") is None:
        return None
    var = decl_name(init) or ""
    if cond.type != "binary_expression" or cond.child_by_field_name("operator").type not in ("<", "<="):
        return None
    if squash(src.text_of(cond.child_by_field_name("left"))) != var:
        return None
    u = squash(src.text_of(upd))
    if u in (f"{var}+=1", f"{var}={var}+1", f"++{var}", f"{var}++"):
        return var, ds[0].child_by_field_name("value"), cond, upd, "1"
    m = re.fullmatch(rf"{re.escape(var)}\+=([A-Za-z_]\w*|[1-9]\d*)", u)
    body = loop.child_by_field_name("body")
    if any_step and m and (body is None or m.group(1) not in assigned_in(body)):
        return var, ds[0].child_by_field_name("value"), cond, upd, m.group(1)
    return None
