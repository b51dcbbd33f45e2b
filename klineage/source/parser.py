"""tree-sitter with the tree-sitter-cuda grammar: one shared Language and Parser, query helpers."""

from __future__ import annotations

import threading
from functools import lru_cache

import tree_sitter as ts
import tree_sitter_cuda as tscuda

LANGUAGE = ts.Language(tscuda.language())


_local = threading.local()


def _parser() -> ts.Parser:
    """This thread's parser: a tree-sitter Parser holds parse state and must not be used by two
    threads at once (mining walks several workloads in threads, gates parse in others)."""
    parser: ts.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = ts.Parser(LANGUAGE)
    return parser


def parse(text: str | bytes) -> ts.Tree:
    """Parse CUDA source (str or UTF-8 bytes)."""
    data = text.encode() if isinstance(text, str) else text
    return _parser().parse(data)


@lru_cache(maxsize=256)
def query(pattern: str) -> ts.Query:
    """Compile a tree-sitter query once (0.26 API: Query + QueryCursor)."""
    return ts.Query(LANGUAGE, pattern)


def captures(node: ts.Node, pattern: str) -> dict[str, list[ts.Node]]:
    """Captures of `pattern` under `node`, each list in source order."""
    found = ts.QueryCursor(query(pattern)).captures(node)
    return {k: sorted(v, key=lambda n: n.start_byte) for k, v in found.items()}


def error_nodes(tree: ts.Tree) -> list[ts.Node]:
    """ERROR and MISSING nodes, in source order."""
    out: list[ts.Node] = []
    stack = [tree.root_node]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            out.append(n)
        elif n.has_error:
            stack.extend(reversed(n.children))
    return sorted(out, key=lambda n: n.start_byte)
