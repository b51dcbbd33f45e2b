"""Anchors: stable names for places in a CUDA file that survive unrelated edits.

A path such as `kernel:softmax_kernel/for[1]/if[0]/call:__shfl_xor_sync[0]` starts at the enclosing
function (or `file`) and descends through statement constructs (loops, ifs, else, switch, case,
lambdas, bare blocks), each with its index among same-labelled constructs of its container. Edits
outside the function never change the path; the text fingerprint catches shifts inside it, and a
construct that is gone (or was itself rewritten) resolves to None.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import tree_sitter as ts

from klineage.errors import SourceError
from klineage.source import nodes as N
from klineage.source.text import normalize

if TYPE_CHECKING:
    from klineage.source.model import CudaSource

_CONTAINERS = {
    "for_statement": "for",
    "for_range_loop": "for",
    "while_statement": "while",
    "do_statement": "do",
    "if_statement": "if",
    "else_clause": "else",
    "switch_statement": "switch",
    "case_statement": "case",
    "lambda_expression": "lambda",
    "compound_statement": "block",
}
_SEGMENT = re.compile(r"^(.+)\[(\d+)\]$")
_UNSAFE = re.compile(r"[^\w:.~>-]")
_FINGERPRINT_LEN = 60


@dataclass(frozen=True)
class Anchor:
    """File, enclosing function, construct path, node kind, line span and a text fingerprint.

    `fingerprint` is the readable head of the node's normalized text (a loop's header, a call);
    `digest` hashes all of it, so two loops with the same header are told apart. A function is
    fingerprinted by its name alone: edits inside it do not lose it.
    """

    file: str
    function: str | None
    path: str
    node_kind: str
    line: int
    end_line: int
    fingerprint: str
    digest: str

    def resolve(self, src: CudaSource) -> ts.Node | None:
        """The node this anchor names in `src`, or None when the construct is gone."""
        return resolve(src, self)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Anchor:
        """Inverse of `to_dict`; SourceError naming the missing or unknown keys."""
        fields = set(cls.__dataclass_fields__)
        missing, extra = fields - set(data), set(data) - fields
        if missing or extra:
            raise SourceError(f"bad anchor: missing {sorted(missing)}, unknown {sorted(extra)}")
        return cls(**data)

    def __str__(self) -> str:
        span = f"{self.line}" if self.line == self.end_line else f"{self.line}-{self.end_line}"
        return f"{self.file}:{span} {self.path} ({self.node_kind}) `{self.fingerprint}`"


# --- labels and containers --------------------------------------------------------------------


def _is_container(node: ts.Node) -> bool:
    if node.type == "compound_statement":
        return node.parent is not None and node.parent.type == "compound_statement"
    return node.type in _CONTAINERS


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name) or "_"


def _decl_name(node: ts.Node) -> str:
    d = node.child_by_field_name("declarator")
    while d is not None and d.type not in ("identifier", "field_identifier"):
        d = d.child_by_field_name("declarator")
    return d.text.decode() if d is not None and d.text else ""


def label(node: ts.Node) -> str:
    """The path label of a node: `for`, `if`, `call:NAME`, `launch:NAME`, `decl:NAME`, or its type."""
    t = node.type
    if t == "function_definition":
        return f"{N.func_kind(node)}:{_safe(N.func_name(node))}"
    if _is_container(node):
        return _CONTAINERS[t]
    if t == "call_expression":
        name, _ = N.callee(node.child_by_field_name("function"))
        kind = "launch" if N.kernel_call_syntax(node) is not None else "call"
        return f"{kind}:{_safe(name)}"
    if t == "declaration":
        return f"decl:{_safe(_decl_name(node))}"
    if t == "template_declaration":
        inner = next((c for c in node.named_children if c.type == "function_definition"), None)
        return f"template:{_safe(N.func_name(inner))}" if inner is not None else "template"
    if t == "expression_statement":
        return "stmt"
    return t


def _members(container: ts.Node, lab: str) -> list[ts.Node]:
    """Nodes labelled `lab` whose nearest container is `container`, in source order."""
    out = []
    stack = list(reversed(container.children))
    while stack:
        n = stack.pop()
        if label(n) == lab:
            out.append(n)
        if not _is_container(n) and n.type != "function_definition":
            stack.extend(reversed(n.children))
    return out


def _root_of(node: ts.Node) -> ts.Node | None:
    return node if node.type == "function_definition" else N.enclosing_function(node)


def _owned_by(node: ts.Node, top: ts.Node) -> bool:
    """True when `top` is the anchor root of `node` (its function, or the file for file scope)."""
    owner = _root_of(node)
    return owner == top if top.type == "function_definition" else owner is None


def _chain(node: ts.Node, root: ts.Node) -> list[ts.Node]:
    """Containers strictly between root and node, top-down, then node itself."""
    chain = []
    p = node.parent
    while p is not None and p != root:
        if _is_container(p):
            chain.append(p)
        p = p.parent
    return [*reversed(chain), node]


def fingerprint(src: CudaSource, node: ts.Node) -> tuple[str, str]:
    """(head, digest): a function's name and "", else the normalized text's head and its hash."""
    if node.type == "function_definition":
        return N.func_name(node), ""
    text = normalize(src.text_of(node))
    head = text[: text.index("{", 1)] if "{" in text[1:] else text
    return head[:_FINGERPRINT_LEN], hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def _functions_named(src: CudaSource, name: str) -> list[ts.Node]:
    return [f for f in src.nodes_of_type("function_definition") if N.func_name(f) == name]


# --- anchor and resolve -----------------------------------------------------------------------


def anchor_for(src: CudaSource, node: ts.Node) -> Anchor:
    """The anchor of `node` in `src`."""
    fn = _root_of(node)
    if fn is None:
        root_seg, top = "file", src.tree.root_node
    else:
        twins = _functions_named(src, N.func_name(fn))
        k = next(i for i, f in enumerate(twins) if f == fn)
        root_seg, top = label(fn) + (f"[{k}]" if k else ""), fn
    segs = [root_seg]
    head, digest = fingerprint(src, node)
    if node != top:
        container = top
        for c in _chain(node, top):
            lab = label(c)
            idx = next(i for i, m in enumerate(_members(container, lab)) if m == c)
            segs.append(f"{lab}[{idx}]")
            container = c
    return Anchor(
        file=src.path,
        function=N.func_name(fn) if fn is not None else None,
        path="/".join(segs),
        node_kind=node.type,
        line=node.start_point.row + 1,
        end_line=node.end_point.row + 1,
        fingerprint=head,
        digest=digest,
    )


def _split(path: str) -> tuple[str, list[tuple[str, int]]]:
    root, *rest = path.split("/")
    segs = []
    for s in rest:
        m = _SEGMENT.match(s)
        if m is None:
            raise SourceError(f"bad anchor path segment {s!r} in {path!r}")
        segs.append((m.group(1), int(m.group(2))))
    return root, segs


def _walk_path(top: ts.Node, segs: list[tuple[str, int]]) -> ts.Node | None:
    cur = top
    for lab, idx in segs:
        members = _members(cur, lab)
        if idx >= len(members):
            return None
        cur = members[idx]
    return cur


def _tops(src: CudaSource, anchor: Anchor, root: str) -> list[ts.Node]:
    """Candidate roots: the indexed twin first, then every function of that name."""
    if root == "file":
        return [src.tree.root_node]
    m = _SEGMENT.match(root)
    k = int(m.group(2)) if m else 0
    twins = _functions_named(src, anchor.function or "")
    return ([twins[k]] if k < len(twins) else []) + [t for i, t in enumerate(twins) if i != k]


def resolve(src: CudaSource, anchor: Anchor) -> ts.Node | None:
    """Follow the path; if what it reaches is not the anchored construct, search by fingerprint."""
    root, segs = _split(anchor.path)
    tops = _tops(src, anchor, root)
    want_fp = (anchor.fingerprint, anchor.digest)

    def fits(n: ts.Node | None) -> bool:
        return n is not None and n.type == anchor.node_kind and fingerprint(src, n) == want_fp

    for top in tops:
        hit = _walk_path(top, segs)
        if fits(hit):
            return hit
    want = [lab for lab, _ in segs]
    for top in tops:
        found = []
        for n in N.walk(top):
            if not fits(n) or (n == top) != (not segs) or not _owned_by(n, top):
                continue
            chain = _chain(n, top) if n != top else []
            if [label(c) for c in chain] == want:
                found.append(n)
        if found:
            return min(found, key=lambda n: abs(n.start_point.row + 1 - anchor.line))
    return None
