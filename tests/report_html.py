"""A strict reading of the report with the stdlib HTML parser: a tree of elements, every tag
closed in order, ids unique, and the internal links (`href="#x"`) to check against the ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def iter(self):  # noqa: ANN201 - a generator of Nodes
        yield self
        for c in self.children:
            yield from c.iter()

    def all_text(self) -> str:
        return "".join(t for n in self.iter() for t in n.text)

    def find_id(self, ident: str) -> Node | None:
        return next((n for n in self.iter() if n.attrs.get("id") == ident), None)

    def hrefs(self) -> list[str]:
        return [n.attrs["href"] for n in self.iter() if "href" in n.attrs]


class StrictTree(HTMLParser):
    """Builds the element tree; records every nesting error instead of guessing like a browser."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.cur = self.root
        self.errors: list[str] = []
        self.ids: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if "id" in node.attrs:
            self.ids[node.attrs["id"]] = self.ids.get(node.attrs["id"], 0) + 1
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:  # <path/> in SVG: self-closed
            self.cur = self.cur.parent or self.root

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self.cur.tag != tag:
            self.errors.append(f"</{tag}> closes <{self.cur.tag}> at line {self.getpos()[0]}")
            return
        self.cur = self.cur.parent or self.root

    def handle_data(self, data: str) -> None:
        self.cur.text.append(data)


def parse(html: str) -> StrictTree:
    tree = StrictTree()
    tree.feed(html)
    tree.close()
    if tree.cur is not tree.root:
        tree.errors.append(f"unclosed <{tree.cur.tag}> at the end of the document")
    return tree
