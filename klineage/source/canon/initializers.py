"""One spelling of initialization: `T x{v};` is `T x = v;` for a scalar (brace initialization only
adds a narrowing check the compiler already passed), and an empty functor `cg::plus<float>{}` is
`cg::plus<float>()`. Operators then read every initializer as an expression."""

from __future__ import annotations

import re

from klineage.source import edit
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

#: scalar types whose brace and copy initialization of one value mean the same
_SCALAR = re.compile(
    r"^(?:(?:unsigned|signed|long|short)\s+)*(?:int|char|long|short|unsigned|size_t|float|double|bool|"
    r"u?int(?:8|16|32|64)_t|uint|auto)$"
)


class BraceInitializer(Rule):
    name = "brace_initializer"
    summary = "a scalar initialized with braces `T x{v};` is written `T x = v;`"

    def edits(self, src: CudaSource) -> list[Edit]:
        out = []
        for d in src.nodes_of_type("declaration"):
            ty = d.child_by_field_name("type")
            if ty is None or not _SCALAR.match(re.sub(r"\s+", " ", src.text_of(ty)).strip()):
                continue
            for dd in d.children_by_field_name("declarator"):
                if dd.type != "init_declarator":
                    continue
                value = dd.child_by_field_name("value")
                name = dd.child_by_field_name("declarator")
                if (
                    value is None
                    or name is None
                    or value.type != "initializer_list"
                    or name.type != "identifier"
                ):
                    continue
                items = [c for c in value.named_children if c.type != "comment"]
                if len(items) != 1 or items[0].type == "initializer_list":
                    continue
                out.append(Edit(name.end_byte, value.end_byte, f" = {src.text_of(items[0])}"))
        return out


class FunctorCall(Rule):
    name = "functor_call"
    summary = "an empty functor `cg::plus<float>{}` is written `cg::plus<float>()`"

    def edits(self, src: CudaSource) -> list[Edit]:
        out = []
        for n in src.nodes_of_type("compound_literal_expression"):
            ty, value = n.child_by_field_name("type"), n.child_by_field_name("value")
            if ty is None or value is None or value.named_children:
                continue
            out.append(edit.replace(n, f"{src.text_of(ty)}()"))
        return out
