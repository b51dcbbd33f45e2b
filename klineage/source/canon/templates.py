"""Template arguments fixed at launch: an integer template parameter of a kernel that every launch
in the file gives the same value becomes a `constexpr` at the top of the kernel's body, the
parameter and the launches' argument go (`template <int BM, int TM> __global__ void k()` launched
as `k<64, 4>` reads `constexpr int BM = 64; constexpr int TM = 4;`). Operators then read sizes
as named constants of the kernel, whatever the author templated.

The value is the launch's argument when it is a literal or arithmetic over file constants (the
constant's name is kept, so an edit of it still reaches the kernel). Left alone: a launcher's
local constant (its grid and block read it too: a copy in the kernel could drift), type
parameters, a parameter the kernel's signature or attributes read (the constant lives in the
body), and a kernel the file names anywhere but its launches (a `cudaFuncSetAttribute(k<...>)`
or a function pointer keeps the instantiation's name).
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import nodes as N
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.constructs import Function
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_INT_TYPES = re.compile(
    r"^(?:const\s+)?(?:unsigned\s+int|unsigned|int|size_t|long|uint32_t|int32_t|int64_t)$"
)


def _value(src: CudaSource, text: str) -> int | None:
    """The integer a launch's template argument fixes when it is a literal or arithmetic over file
    constants; None for anything else. A launcher's local constant is refused: the launcher's
    grid and block read it too, and a copy in the kernel would let an edit of one drift."""
    top = {S.decl_name(n) for n in src.tree.root_node.named_children if n.type == "declaration"}
    top |= {
        src.text_of(n.child_by_field_name("name"))
        for n in src.tree.root_node.named_children
        if n.type == "preproc_def"
    }
    if set(re.findall(r"(?<!\w)[A-Za-z_]\w*", text)) - top:
        return None
    return S.eval_int(re.sub(r"(?<=\d)[uUlL]+\b", "", text), S.file_constants(src))


class TemplateArgsToConstexpr(Rule):
    name = "template_args_to_constexpr"
    summary = (
        "an integer kernel template parameter with one value at every launch becomes a constexpr in the body"
    )

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for k in src.kernels:
            out += self._kernel(src, k)
        return out

    def _kernel(self, src: CudaSource, k: Function) -> list[Edit]:
        fn = src.node_for(k)
        tmpl = fn.parent
        if not k.template_params or tmpl is None or tmpl.type != "template_declaration":
            return []
        launches = [ls for ls in src.launch_sites if ls.name == k.name]
        mentions = sum(
            1 for n in S.walk(src.tree.root_node) if n.type == "identifier" and src.text_of(n) == k.name
        )
        if not launches or mentions != len(launches) + 1:
            return []
        body = fn.child_by_field_name("body")
        head = src.text_of((tmpl.start_byte, body.start_byte))
        plist = [c for c in tmpl.child_by_field_name("parameters").named_children if c.type != "comment"]
        fixed: list[tuple[int, str, str, str]] = []  # (position, name, type, value)
        for i, tp in enumerate(k.template_params):
            if tp.kind != "value" or not _INT_TYPES.match(tp.type.strip()):
                continue
            if len(re.findall(rf"(?<![\w.]){re.escape(tp.name)}(?!\w)", head)) != 1:
                continue  # the signature or an attribute reads it
            args = [ls.template_args[i] if i < len(ls.template_args) else tp.default for ls in launches]
            values = {_value(src, a) if a is not None else None for a in args}
            if len(values) != 1 or None in values:
                continue
            # one spelling at every launch is kept (an edit of a file constant still reaches the
            # kernel); launches that spell the value differently get the number
            spellings = {S.squash(a) for a in args if a is not None}
            value = args[0].strip() if len(spellings) == 1 else str(values.pop())
            fixed.append((i, tp.name, tp.type.replace("const", "").strip(), value))
        if not fixed:
            return []
        positions = {i for i, *_ in fixed}
        edits: list[Edit] = []
        if len(positions) == len(plist):
            edits.append(Edit(tmpl.start_byte, fn.start_byte, ""))
        else:
            edits += deletions(plist, positions)
        for ls in launches:
            args = list(N.callee(src.node_for(ls).child_by_field_name("function"))[1])
            present = {i for i in positions if i < len(args)}
            if len(present) == len(args) and args:
                call = src.node_for(ls).child_by_field_name("function")
                targs = next((c for c in S.walk(call) if c.type == "template_argument_list"), None)
                if targs is not None:
                    edits.append(Edit(targs.start_byte, targs.end_byte, ""))
            else:
                edits += deletions(args, present)
        decls = "".join(f"\n    constexpr {t} {n} = {v};" for _, n, t, v in fixed)
        edits.append(Edit(body.start_byte + 1, body.start_byte + 1, decls))
        return edits


def deletions(items: list[ts.Node], positions: set[int]) -> list[Edit]:
    """Edits deleting the items at `positions` of a comma-separated list, with their commas."""
    positions = {i for i in positions if i < len(items)}
    keep = [i for i in range(len(items)) if i not in positions]
    if not keep:
        return [Edit(items[0].start_byte, items[-1].end_byte, "")] if items else []
    last = keep[-1]
    edits = [Edit(items[i].start_byte, items[i + 1].start_byte, "") for i in sorted(positions) if i < last]
    if last < len(items) - 1:
        edits.append(Edit(items[last].end_byte, items[-1].end_byte, ""))
    return edits
