"""The `static_assert`s a kernel compiles under, evaluated at the constants its launches pass.

Tile-size edits (register blocking's removal) change constants that the author's own checks
constrain, e.g. a loader's `static_assert(BK * BM % NUM_THREADS == 0)`. Evaluating those checks
before the gate lets an operator refuse with the reason (or pick sizes that satisfy them) instead
of spending a compile on a kernel that cannot build.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import eval_condition, eval_int, file_constants


def _constexprs(src: CudaSource, scope: ts.Node, env: dict[str, int]) -> dict[str, int]:
    """`env` plus the integer constexpr/const locals of `scope`, in source order; a name given two
    different values in two blocks is dropped (which one a check sees is not known here)."""
    out = dict(env)
    dropped: set[str] = set()
    for d in T.walk(scope):
        if d.type != "declaration" or not re.search(r"\b(constexpr|const)\b", src.text_of(d).split("=")[0]):
            continue
        for dd in d.children_by_field_name("declarator"):
            name, value = T.declarator_ident(dd), dd.child_by_field_name("value")
            if dd.type != "init_declarator" or not name or value is None or name in dropped:
                continue
            v = eval_int(" ".join(src.text_of(value).strip("{}").split()), out)
            if v is None:
                continue
            if name in out and name not in env and out[name] != v:
                dropped.add(name)
                out.pop(name)
            else:
                out[name] = v
    return out


def _asserts(src: CudaSource, scope: ts.Node) -> list[ts.Node]:
    return [n for n in T.walk(scope) if n.type == "static_assert_declaration"]


def _condition(node: ts.Node) -> ts.Node | None:
    return node.child_by_field_name("condition") or (node.named_children[0] if node.named_children else None)


def failing_asserts(src: CudaSource, kernel: Function) -> list[str]:
    """The static_asserts of the file's top level, of `kernel` and of its launchers that evaluate
    false (at some launch, for the last two; texts, squashed); checks whose names are not all
    known constants are left out."""
    base = file_constants(src)
    kfn = src.node_for(kernel)
    failed: list[str] = []
    for a in (n for n in src.tree.root_node.children if n.type == "static_assert_declaration"):
        cond = _condition(a)
        if cond is not None and eval_condition(src.text_of(cond), base) is False:
            failed.append(T.squash(src.text_of(a)))
    for ls in T.launches_of(src, kernel.name):
        launcher = T.enclosing_launcher(src, ls)
        if launcher is None:
            continue
        lenv = _constexprs(src, launcher, base)
        kenv = dict(base)
        for param, arg in T.template_map(src, kernel, ls).items():
            if (v := eval_int(arg, lenv)) is not None:
                kenv[param] = v
        kenv = _constexprs(src, kfn, kenv)
        for scope, env in ((kfn, kenv), (launcher, lenv)):
            for a in _asserts(src, scope):
                cond = _condition(a)
                if cond is not None and eval_condition(src.text_of(cond), env) is False:
                    text = T.squash(src.text_of(a))
                    if text not in failed:
                        failed.append(text)
    return failed
