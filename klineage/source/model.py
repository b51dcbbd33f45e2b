"""`CudaSource`: one immutable, cleanly parsed CUDA file and the questions asked of it.

A CudaSource always parses without error (construction refuses otherwise), so every record and
anchor it hands out refers to a well-formed tree. Changes go through `klineage.source.edit`, which
returns a new CudaSource.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import tree_sitter as ts

from klineage.errors import SourceError
from klineage.source import extract
from klineage.source import nodes as N
from klineage.source.constructs import (
    Call,
    Construct,
    Function,
    LaunchSite,
    Loop,
    Pragma,
    SharedDecl,
    Template,
)
from klineage.source.mask import Attribute, Masked, mask
from klineage.source.parser import error_nodes, parse

if TYPE_CHECKING:
    from klineage.source.anchor import Anchor


class CudaSource:
    """A parsed CUDA file. Node byte offsets index `text_bytes`; read node text with `text_of`."""

    def __init__(self, text: str, path: str, data: bytes, masked: Masked, tree: ts.Tree) -> None:
        """Use `from_text` or `from_file`; this only stores what they computed."""
        self.path = path
        self.text = text
        self.text_bytes = data
        self.parse_bytes = masked.data
        self.pragma_spans = masked.pragmas
        self.attributes = masked.attributes
        self.tree = tree
        self._line_starts = [0] + [m.end() for m in re.finditer(b"\n", data)]

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_text(cls, text: str, path: str = "<memory>") -> CudaSource:
        """Parse `text`; SourceError naming `path:line:col` if it does not parse cleanly."""
        data = text.encode("utf-8")
        masked = mask(data)
        tree = parse(masked.data)
        src = cls(text, path, data, masked, tree)
        errors = error_nodes(tree)
        if errors:
            raise SourceError(src.describe_error(errors[0]))
        return src

    @classmethod
    def from_file(cls, path: str | Path) -> CudaSource:
        """Read and parse a file; SourceError for a missing file, non-UTF-8 bytes or a parse error."""
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise SourceError(f"{p}: no such file") from None
        except IsADirectoryError:
            raise SourceError(f"{p}: is a directory, not a CUDA file") from None
        except OSError as e:
            raise SourceError(f"{p}: cannot read ({e.strerror})") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise SourceError(
                f"{p}:{line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})"
            ) from None
        return cls.from_text(text, str(p))

    def describe_error(self, node: ts.Node) -> str:
        """`file:line:col: parse error ...` for an ERROR or MISSING node."""
        row, col = node.start_point.row + 1, node.start_point.column + 1
        if node.is_missing:
            what = f"missing '{node.type}'"
        else:
            snippet = self.text_of(node).strip().splitlines()
            what = f"unexpected '{snippet[0][:40]}'" if snippet else "unexpected input"
        return f"{self.path}:{row}:{col}: parse error: {what}"

    # --- text and positions -------------------------------------------------------------------

    def text_of(self, node: ts.Node | Construct | tuple[int, int]) -> str:
        """Original text of a node, a construct record or a (start, end) byte range."""
        if isinstance(node, tuple):
            start, end = node
        else:
            start, end = (
                (node.start_byte, node.end_byte) if isinstance(node, ts.Node) else (node.start, node.end)
            )
        return self.text_bytes[start:end].decode("utf-8")

    def attributes_in(self, start: int, end: int) -> tuple[Attribute, ...]:
        """`__launch_bounds__`, `__cluster_dims__`, `__maxnreg__`, `__align__` within [start, end)."""
        return tuple(a for a in self.attributes if start <= a.start and a.end <= end)

    def line_of(self, byte: int) -> int:
        """1-based line of a byte offset."""
        return bisect.bisect_right(self._line_starts, byte)

    def line_start(self, line: int) -> int:
        """Byte offset where 1-based `line` starts."""
        return self._line_starts[line - 1]

    @cached_property
    def _by_type(self) -> dict[str, list[ts.Node]]:
        index: dict[str, list[ts.Node]] = defaultdict(list)
        for n in N.walk(self.tree.root_node):
            index[n.type].append(n)
        return index

    def nodes_of_type(self, *types: str) -> list[ts.Node]:
        """All nodes of the given tree-sitter types, in source order."""
        found = [n for t in types for n in self._by_type.get(t, ())]
        return sorted(found, key=lambda n: (n.start_byte, -n.end_byte)) if len(types) > 1 else found

    def node_for(self, item: Construct) -> ts.Node:
        """The tree node a construct record was made from (pragmas: their loop, if any)."""
        if isinstance(item, Pragma):
            if item.loop is None:
                raise SourceError(f"{self.path}:{item.line}: pragma '{item.text}' has no loop node")
            item = item.loop
        for n in self._by_type.get(item.node_type, ()):
            if n.start_byte == item.start and n.end_byte == item.end:
                return n
        raise SourceError(
            f"{self.path}:{item.line}: no {item.node_type} node at bytes {item.start}-{item.end}"
        )

    # --- constructs ---------------------------------------------------------------------------

    @cached_property
    def functions(self) -> tuple[Function, ...]:
        """Every function definition (kernels, device, launchers, host), in source order."""
        return extract.functions(self)

    @property
    def kernels(self) -> tuple[Function, ...]:
        """`__global__` functions, template kernels included."""
        return tuple(f for f in self.functions if f.kind == "kernel")

    @property
    def device_functions(self) -> tuple[Function, ...]:
        """`__device__` functions (`__host__ __device__` included)."""
        return tuple(f for f in self.functions if f.kind == "device")

    @property
    def launchers(self) -> tuple[Function, ...]:
        """Host functions with C linkage (`extern "C" f()` or inside `extern "C" { }`)."""
        return tuple(f for f in self.functions if f.kind == "launcher")

    def function(self, name: str) -> Function | None:
        """The first function definition called `name`."""
        return next((f for f in self.functions if f.name == name), None)

    def kernel(self, name: str | None) -> Function | None:
        """The first `__global__` function called `name` (None for no such kernel)."""
        return next((k for k in self.kernels if k.name == name), None)

    @cached_property
    def templates(self) -> tuple[Template, ...]:
        """Template declarations (functions and structs) with their parameters."""
        return extract.templates(self)

    @cached_property
    def launch_sites(self) -> tuple[LaunchSite, ...]:
        """`<<<...>>>` kernel launches."""
        return extract.launch_sites(self)

    @cached_property
    def shared_decls(self) -> tuple[SharedDecl, ...]:
        """`__shared__` variables, static and `extern` (dynamic), one per declarator."""
        return extract.shared_decls(self)

    @cached_property
    def loops(self) -> tuple[Loop, ...]:
        """for / while / do loops, in source order."""
        return extract.loops(self)

    @cached_property
    def pragmas(self) -> tuple[Pragma, ...]:
        """`#pragma` lines (outside comments), each with the loop it applies to."""
        return extract.pragmas(self)

    def pragma_of(self, loop: Loop | ts.Node) -> Pragma | None:
        """The pragma (e.g. `unroll 4`) written right before a loop, if any."""
        start = loop.start if isinstance(loop, Loop) else loop.start_byte
        return next((p for p in self.pragmas if p.loop is not None and p.loop.start == start), None)

    def calls(self, name_pattern: str) -> tuple[Call, ...]:
        """Calls (not launches) whose callee name fully matches the regex `name_pattern`."""
        return extract.calls(self, name_pattern)

    # --- anchors ------------------------------------------------------------------------------

    def anchor(self, node: ts.Node | Construct) -> Anchor:
        """A stable name for a node (or a construct record's node)."""
        from klineage.source.anchor import anchor_for

        return anchor_for(self, node if isinstance(node, ts.Node) else self.node_for(node))

    def node_at(self, anchor: Anchor) -> ts.Node | None:
        """The node an anchor names in this file, or None if that construct is gone."""
        from klineage.source.anchor import resolve

        return resolve(self, anchor)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CudaSource) and (self.path, self.text) == (other.path, other.text)

    def __hash__(self) -> int:
        return hash((self.path, self.text))

    def __repr__(self) -> str:
        return f"CudaSource({self.path!r}, {len(self.text_bytes)} bytes, {len(self.functions)} functions)"
