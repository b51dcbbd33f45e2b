"""Compile-time sizes as named `constexpr`s: `#define TILE 32`, `const uint TM = 8;` and
`enum { BM = 64 };` all become `constexpr int TILE = 32;` (the integer type kept, `uint` spelled
out), so operators read one form whatever the author wrote.

Only values the file fixes (integer arithmetic over literals and earlier constants) qualify; a
macro that the preprocessor itself tests (`#if`, `#ifdef`, `#undef`, a second `#define`) or that
is defined inside a function stays a macro.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_INT_TYPES = {
    "int": "int",
    "unsigned": "unsigned int",
    "unsignedint": "unsigned int",
    "uint": "unsigned int",
    "size_t": "size_t",
    "long": "long",
    "int32_t": "int32_t",
    "uint32_t": "uint32_t",
    "unsignedlong": "unsigned long",
    "longlong": "long long",
    "int64_t": "int64_t",
}
INT_MAX = 2**31 - 1


def _constant_env(src: CudaSource) -> dict[str, int]:
    return S.file_constants(src)


class DefineToConstexpr(Rule):
    name = "define_to_constexpr"
    summary = "an object-like #define of an integer becomes a constexpr int"

    def edits(self, src: CudaSource) -> list[Edit]:
        env = _constant_env(src)
        out = []
        defs = src.nodes_of_type("preproc_def")
        counts: dict[str, int] = {}
        for d in defs:
            n = d.child_by_field_name("name")
            if n is not None:
                counts[src.text_of(n)] = counts.get(src.text_of(n), 0) + 1
        tested = set(re.findall(r"^[ \t]*#[ \t]*(?:ifdef|ifndef|undef)[ \t]+(\w+)", src.text, re.M))
        for line in re.findall(r"^[ \t]*#[ \t]*(?:el)?if\b([^\n]*)", src.text, re.M):
            tested |= set(re.findall(r"\w+", line))
        for d in defs:
            n, v = d.child_by_field_name("name"), d.child_by_field_name("value")
            if n is None or v is None or d.parent is None or d.parent.type != "translation_unit":
                continue
            name, value = src.text_of(n), src.text_of(v).strip()
            if counts[name] != 1 or name in tested:
                continue
            val = S.eval_int(value, env)
            if val is None or not -INT_MAX <= val <= INT_MAX or re.search(r"\d[uUlL]", value):
                continue
            out.append(Edit(d.start_byte, d.end_byte, f"constexpr int {name} = {value};\n"))
        return out


class ConstToConstexpr(Rule):
    name = "const_to_constexpr"
    summary = "a const integer whose value the file fixes becomes constexpr"

    def edits(self, src: CudaSource) -> list[Edit]:
        env = _constant_env(src)
        out = []
        for d in src.nodes_of_type("declaration"):
            quals = [c for c in d.children if c.type in ("type_qualifier", "storage_class_specifier")]
            words = [src.text_of(c) for c in quals]
            ty = d.child_by_field_name("type")
            ds = d.children_by_field_name("declarator")
            if (
                "const" not in words
                or "constexpr" in words
                or "extern" in words
                or ty is None
                or len(ds) != 1
            ):
                continue
            if (
                ds[0].type != "init_declarator"
                or ds[0].child_by_field_name("declarator").type != "identifier"
            ):
                continue
            canon = _INT_TYPES.get(S.squash(src.text_of(ty)))
            value = ds[0].child_by_field_name("value")
            if canon is None or value is None or value.type == "initializer_list":
                continue
            if S.eval_int(src.text_of(value), env) is None:
                continue
            name = S.decl_name(d)
            static = "static " if "static" in words else ""
            out.append(
                Edit(d.start_byte, d.end_byte, f"{static}constexpr {canon} {name} = {src.text_of(value)};")
            )
        return out


class EnumToConstexpr(Rule):
    name = "enum_to_constexpr"
    summary = "an anonymous enum of sizes becomes constexpr ints"

    def edits(self, src: CudaSource) -> list[Edit]:
        env = dict(_constant_env(src))
        out = []
        for e in src.nodes_of_type("enum_specifier"):
            decl = e.parent
            if (
                e.child_by_field_name("name") is not None
                or decl is None
                or decl.type not in ("declaration", "expression_statement", "translation_unit")
            ):
                continue
            stmt = decl if decl.type != "translation_unit" else e
            if stmt.type == "declaration" and stmt.children_by_field_name("declarator"):
                continue
            body = e.child_by_field_name("body")
            items = self._items(src, body, env) if body is not None else None
            if not items:
                continue
            indent = edit.indent_of(src, stmt)
            text = f"\n{indent}".join(f"constexpr int {n} = {v};" for n, v in items)
            end = stmt.end_byte
            if src.text_bytes[end : end + 1] == b";":
                end += 1
            out.append(Edit(stmt.start_byte, end, text))
        return out

    @staticmethod
    def _items(src: CudaSource, body: ts.Node, env: dict[str, int]) -> list[tuple[str, str]] | None:
        items, nxt = [], 0
        for en in body.named_children:
            if en.type == "comment":
                continue
            if en.type != "enumerator":
                return None
            name = src.text_of(en.child_by_field_name("name"))
            v = en.child_by_field_name("value")
            val = S.eval_int(src.text_of(v), env) if v is not None else nxt
            if val is None:
                return None
            env[name] = val
            items.append((name, src.text_of(v) if v is not None else str(val)))
            nxt = val + 1
        return items
