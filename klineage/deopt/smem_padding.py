"""Shared-memory layouts against bank conflicts: a padded row (`tile[T][T + 1]`) or an XOR swizzle
of the column index (`tile[r][c ^ (r % 32)]`) spreads a column walk over the 32 banks.

Backward: the padding goes (`[T][T + 1]` -> `[T][T]`), or every XOR of the array's indices is
dropped (`c ^ f(r)` -> `c`). Dropping a swizzle keeps the function only when every access of the
array is swizzled the same way (a consistent bijection within each row), so an unswizzled access
refuses. Forward: a 2-D 4-byte tile whose rows are a multiple of 32 words and that is walked down
a column by consecutive threads gets one word of padding; a row stride written as one constant
(`#define LDS 32`, the last dimension of a shared array or a wmma leading dimension, never
compared) is padded at its definition: by 16 bytes where a matrix load/store reads it (wmma's ldm
is in 16-byte units), else by one word.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.constructs import SharedDecl
from klineage.source.model import CudaSource
from klineage.source.syntax import paren, squash, subst_idents, unparen_text

_PADDED = re.compile(r"^(?P<base>.+?)\s*\+\s*(?P<pad>\d+|\w*[pP][aA][dD]\w*|\w*SKEW\w*|\w*[sS]kew\w*)$")
_FOUR_BYTE = {"float", "int", "unsigned", "unsigned int", "uint32_t", "int32_t"}
_TWO_BYTE = {
    "__half",
    "half",
    "__nv_bfloat16",
    "nv_bfloat16",
    "short",
    "unsigned short",
    "uint16_t",
    "int16_t",
}


def _pad_elements(elem: str) -> int | None:
    """Elements in one 4-byte bank word (the padding that shifts each row by one bank)."""
    return 1 if elem in _FOUR_BYTE else 2 if elem in _TWO_BYTE else None


_THREAD_X = re.compile(r"threadIdx\.x|\b(?:tx|lane|tid|lane_id|laneid|t)\b")


def resolve_int(src: CudaSource, text: str) -> int | None:
    """Value of a literal, or of a constexpr / #define / enum constant written with literal arithmetic."""
    t = text.strip()
    for _ in range(4):
        names = set(re.findall(r"[A-Za-z_]\w*", t))
        for n in names:
            m = re.search(
                rf"(?:constexpr|const)\s+(?:static\s+)?(?:int|unsigned|auto|size_t|long)\s+{n}\s*=\s*([^;]+);",
                src.text,
            ) or re.search(rf"#define\s+{n}\s+([^\n]+)", src.text)
            if m:
                t = re.sub(rf"\b{n}\b", f"({m.group(1).strip()})", t)
        if not re.search(r"[A-Za-z_]", t.replace("u", "").replace("U", "")):
            break
    t = re.sub(r"(\d+)[uUlL]+", r"\1", t)
    if not re.fullmatch(r"[\d\s+\-*/()%<>]+", t):
        return None
    try:
        return int(eval(t.replace("/", "//"), {"__builtins__": {}}, {}))  # noqa: S307 - digits and operators only
    except Exception:  # noqa: BLE001 - not a constant expression
        return None


def launch_fixed_int(src: CudaSource, function: str | None, text: str) -> int | None:
    """`text`'s value, reading the function's template parameters from its launches when every
    launch fixes them to the same value (`tile[TILE][TILE]` with `kernel<32, 8><<<...>>>`)."""
    v = resolve_int(src, text)
    kernel = src.function(function) if function else None
    if v is not None or kernel is None or not kernel.template_params:
        return v
    values = {
        resolve_int(
            src, subst_idents(text, {k: f"({a})" for k, a in T.template_map(src, kernel, ls).items()})
        )
        for ls in T.launches_of(src, kernel.name)
    }
    return values.pop() if len(values) == 1 else None


def _uses(src: CudaSource, decl: SharedDecl) -> list[ts.Node]:
    """Identifier nodes naming the array inside its function (the declaration excluded)."""
    fn = src.function(decl.function) if decl.function else None
    scope = src.node_for(fn) if fn is not None else src.tree.root_node
    return [
        n
        for n in X.walk(scope)
        if n.type == "identifier"
        and n.text == decl.name.encode()
        and not (decl.start <= n.start_byte < decl.end)
    ]


def _subscript_chain(ident: ts.Node) -> list[ts.Node]:
    """The subscript expressions applied to `ident`, innermost (first index) first."""
    chain = []
    n = ident
    while (
        n.parent is not None
        and n.parent.type == "subscript_expression"
        and n.parent.child_by_field_name("argument") == n
    ):
        n = n.parent
        chain.append(n)
    return chain


def _index(sub: ts.Node) -> ts.Node | None:
    idx = sub.child_by_field_name("indices")
    if idx is None:
        idx = next((c for c in sub.children if c.type == "subscript_argument_list"), None)
    named = [c for c in idx.named_children] if idx is not None else []
    return named[0] if named else None


def _flat_uses(src: CudaSource, decl: SharedDecl) -> list[str]:
    """Uses that do not index every dimension (the array seen as a pointer or flat buffer)."""
    bad = []
    for u in _uses(src, decl):
        chain = _subscript_chain(u)
        top = chain[-1] if chain else u
        addr = (
            top.parent is not None
            and top.parent.type == "pointer_expression"
            and top.parent.children[0].type == "&"
        )
        if len(chain) != len(decl.dims) or addr:
            bad.append(f"line {u.start_point.row + 1}: `{src.text_of(X.statement_of(u)).strip()[:60]}`")
    return bad


def _plain_operand(src: CudaSource, xor: ts.Node) -> ts.Node:
    """The operand of `a ^ b` that is the unswizzled index: the one not made only of the other
    dimensions' index variables (the key is a function of the row), left when unsure."""
    left, right = xor.child_by_field_name("left"), xor.child_by_field_name("right")
    assert left is not None and right is not None
    sub = X.enclosing(xor, "subscript_expression")
    others: set[str] = set()
    if sub is not None:
        ident = sub
        while ident.type == "subscript_expression":
            ident = ident.child_by_field_name("argument")  # type: ignore[assignment]
        for s in _subscript_chain(ident):
            idx = _index(s)
            if idx is not None and not (idx.start_byte <= xor.start_byte < idx.end_byte):
                others |= X.identifiers(idx) | {
                    src.text_of(f) for f in X.walk(idx) if f.type == "field_expression"
                }

    def names(n: ts.Node) -> set[str]:
        return X.identifiers(n) | {src.text_of(f) for f in X.walk(n) if f.type == "field_expression"}

    if others and names(left) <= others and not names(right) <= others:
        return right
    return left


def _xors(src: CudaSource, decl: SharedDecl) -> tuple[list[ts.Node], list[ts.Node]]:
    """(XOR nodes inside the array's indices, full accesses without any XOR)."""
    xors, plain = [], []
    for u in _uses(src, decl):
        chain = _subscript_chain(u)
        found = []
        for sub in chain:
            idx = _index(sub)
            if idx is not None:
                found += [
                    n
                    for n in X.walk(idx)
                    if n.type == "binary_expression" and src.text_of(n.children[1]) == "^"
                ]
        if found:
            xors += X.outermost(found)
        elif chain:
            plain.append(chain[-1])
    return xors, plain


def stride_definition(src: CudaSource, name: str) -> tuple[int, int, str] | None:
    """(start, end, text) of the value of the one definition of `name` (`#define`, `constexpr` or
    `const`), when no preprocessor test reads it."""
    rx = [
        re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}[ \t]+([^\n]*?)[ \t]*(?://[^\n]*)?$", re.M),
        re.compile(
            rf"\b(?:constexpr|const)\s+(?:static\s+)?[\w:]+(?:\s+\w+)?\s+{re.escape(name)}\s*=\s*([^;{{}}]+);"
        ),
    ]
    defs = [m for r in rx for m in r.finditer(src.text)]
    if len(defs) != 1 or re.search(rf"#\s*(?:if|ifdef|ifndef|elif)\b[^\n]*\b{re.escape(name)}\b", src.text):
        return None
    m = defs[0]
    start = len(src.text[: m.start(1)].encode())
    return start, start + len(m.group(1).encode()), m.group(1)


def padded_constant(src: CudaSource, name: str) -> tuple[int, int, str, str] | None:
    """(start, end, base, pad) of the one definition of a row-stride constant written padded:
    `#define STRIDE (TILE + 1)`, `constexpr int kLd = kK + kPad;`, or a literal that is a power of
    two of at least 16 elements plus a small pad (`#define AB_SMEM_STRIDE 40`: 32 + 8)."""
    if (found := stride_definition(src, name)) is None:
        return None
    start, end, text = found
    if (pm := _PADDED.match(unparen_text(text))) is not None:
        return start, end, pm.group("base"), pm.group("pad")
    v = resolve_int(src, text)
    if v is None or v < 17:
        return None
    base = 1 << (v.bit_length() - 1)
    pad = v - base
    return (start, end, str(base), str(pad)) if base >= 16 and 0 < pad <= base // 4 else None


def _compared(src: CudaSource, name: str) -> bool:
    """Whether `name` is ever compared (a loop bound or a guard): then it is a logical size, not
    only the stride of a padded layout."""
    return any(
        n.type == "binary_expression"
        and src.text_of(n.children[1]) in ("<", "<=", ">", ">=")
        and name in X.identifiers(n)
        for n in src.nodes_of_type("binary_expression")
    )


def _padded_factors(src: CudaSource, node: ts.Node) -> list[ts.Node]:
    """Parenthesized `(B + P)` strides inside an index or a size (the padded row written inline)."""
    return [
        n
        for n in X.walk(node)
        if n.type == "parenthesized_expression"
        and n.parent is not None
        and n.parent.type == "binary_expression"
        and src.text_of(n.parent.children[1]) == "*"
        and _PADDED.match(unparen_text(src.text_of(n)))
    ]


def _flat_padding(src: CudaSource, decl: SharedDecl) -> tuple[str, list[ts.Node], list[str]]:
    """For a 1-D shared array sized `T * (T + 1)`: (the padded stride text, every `(T + 1)` node in
    its size and indices, accesses that do not use that stride)."""
    node = src.node_for(decl)
    size = next(
        (n.child_by_field_name("size") for n in X.walk(node) if n.type == "array_declarator"),
        None,
    )
    found = _padded_factors(src, size) if size is not None else []
    if len(decl.dims) != 1 or len(found) != 1:
        return "", [], []
    key = squash(unparen_text(src.text_of(found[0])))
    nodes, missing = list(found), []
    for u in _uses(src, decl):
        chain = _subscript_chain(u)
        idx = _index(chain[0]) if chain else None
        same = (
            [n for n in _padded_factors(src, idx) if squash(unparen_text(src.text_of(n))) == key]
            if idx
            else []
        )
        if not same:
            missing.append(f"line {u.start_point.row + 1}")
        nodes += same
    return key, nodes, missing


def _ldm_names(src: CudaSource, d: SharedDecl) -> list[str]:
    """The constants a matrix load/store in `d`'s function passes as its leading dimension
    (`wmma::store_matrix_sync(p, frag, C_STRIDE, ...)`)."""
    fn = src.function(d.function) if d.function else None
    out: list[str] = []
    if fn is None:
        return out
    for call in X.calls_in(src.node_for(fn), lambda n: n.endswith(("load_matrix_sync", "store_matrix_sync"))):
        args = call.child_by_field_name("arguments")
        ld = args.named_children[2] if args is not None and len(args.named_children) >= 3 else None
        if ld is not None and ld.type == "identifier" and src.text_of(ld) not in out:
            out.append(src.text_of(ld))
    return out


class SmemPadding(Operator):
    name = "smem_padding"
    category = "smem_layout"
    intent = (
        "Pad a shared-memory tile's rows by one word (tile[T][T + 1]) or XOR-swizzle its column index so "
        "that a warp walking a column hits 32 different banks."
    )
    mechanical_apply = True

    def _decls(self, src: CudaSource) -> list[SharedDecl]:
        return [d for d in src.shared_decls if d.function is not None]

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for d in self._decls(src):
            if len(d.dims) >= 2 and (m := _PADDED.match(d.dims[-1].strip())):
                sites.append(
                    self.site(
                        src,
                        d,
                        f"shared {d.name}{d.dims_text}: rows padded by {m.group('pad')}",
                        kind="padding",
                        array=d.name,
                        base=m.group("base"),
                        pad=m.group("pad"),
                    )
                )
            elif consts := self._stride_constants(src, d):
                for name, (_, _, base, pad) in consts:
                    sites.append(
                        self.site(
                            src,
                            d,
                            f"shared {d.name}{d.dims_text}: row stride {name} padded by {pad}",
                            kind="stride",
                            array=d.name,
                            constant=name,
                            base=base,
                            pad=pad,
                        )
                    )
            elif (flat := _flat_padding(src, d))[1]:
                sites.append(
                    self.site(
                        src,
                        d,
                        f"shared {d.name}{d.dims_text}: flat rows of stride {flat[0]}",
                        kind="flat",
                        array=d.name,
                        stride=flat[0],
                    )
                )
            xors, _ = _xors(src, d)
            if xors:
                sites.append(
                    self.site(
                        src,
                        d,
                        f"shared {d.name}: {len(xors)} XOR-swizzled index(es)",
                        kind="swizzle",
                        array=d.name,
                        count=str(len(xors)),
                    )
                )
        return sites

    def _stride_constants(
        self, src: CudaSource, d: SharedDecl
    ) -> list[tuple[str, tuple[int, int, str, str]]]:
        """The padded constants that set row strides in `d`: its last dimension of two, a factor of
        the one size of a flat array (`tile[ROWS * STRIDE]`), or the leading dimension a matrix
        load/store in its function passes (`wmma::store_matrix_sync(p, frag, C_STRIDE, ...)`)."""
        last = d.dims[-1].strip() if d.dims else ""
        if len(d.dims) >= 2:
            names = [last] if last not in {x.strip() for x in d.dims[:-1]} else []
        else:
            names = re.findall(r"[A-Za-z_]\w*", last) if "*" in last else []
        names += [n for n in _ldm_names(src, d) if n not in names]
        out = []
        for name in names:
            if (
                re.fullmatch(r"[A-Za-z_]\w*", name)
                and not _compared(src, name)
                and (c := padded_constant(src, name)) is not None
            ):
                out.append((name, c))
        return out

    def _plain_strides(self, src: CudaSource, d: SharedDecl) -> list[tuple[str, int, bool]]:
        """(name, value, read as a matrix load/store's leading dimension) of the unpadded stride
        constants of `d` (a power of two of at least 16 elements, defined once, never compared):
        where the forward step pads a stride written as one constant."""
        last = d.dims[-1].strip() if len(d.dims) >= 2 else ""
        rows = {x.strip() for x in d.dims[:-1]}
        names: dict[str, bool] = (
            {last: False} if re.fullmatch(r"[A-Za-z_]\w*", last) and last not in rows else {}
        )
        names.update(dict.fromkeys(_ldm_names(src, d), True))
        out = []
        for name, ldm in names.items():
            found = stride_definition(src, name)
            v = resolve_int(src, found[2]) if found is not None else None
            if v is not None and v >= 16 and v & (v - 1) == 0 and not _compared(src, name):
                out.append((name, v, ldm))
        return out

    def _decl(self, src: CudaSource, site: Site) -> SharedDecl:
        node = src.node_at(site.anchor)
        d = next(
            (
                d
                for d in self._decls(src)
                if node is not None and d.start == node.start_byte and d.name == site.details["array"]
            ),
            None,
        )
        if d is None:
            raise Refused(f"{self.name}: shared array {site.details.get('array')} is gone")
        return d

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        d = self._decl(src, site)
        if site.details["kind"] == "stride":
            name = site.details["constant"]
            ok = padded_constant(src, name) is not None
            return [
                Precondition(
                    "stride_defined_once",
                    ok,
                    f"{name} is defined once, padded, and no preprocessor test reads it"
                    if ok
                    else f"{name} is not one padded definition",
                    "Layout",
                )
            ]
        if site.details["kind"] == "flat":
            _, nodes, missing = _flat_padding(src, d)
            return [
                Precondition(
                    "every_access_uses_the_stride",
                    bool(nodes) and not missing,
                    f"every access of {d.name} walks rows of {site.details['stride']}"
                    if nodes and not missing
                    else f"accesses of {d.name} without the padded stride ({', '.join(missing[:3])})",
                    "Layout",
                )
            ]
        flat = _flat_uses(src, d)
        facts = [
            Precondition(
                "indexed_only_as_array",
                not flat,
                f"{d.name} is only read and written through full [..][..] indexing"
                if not flat
                else f"{d.name} is used as a flat buffer or pointer ({'; '.join(flat[:2])}): its row stride matters",
                "Layout",
            )
        ]
        if site.details["kind"] == "swizzle":
            _, plain = _xors(src, d)
            facts.append(
                Precondition(
                    "every_access_swizzled",
                    not plain,
                    f"every access of {d.name} applies the swizzle"
                    if not plain
                    else f"access at line {plain[0].start_point.row + 1} is not swizzled: dropping the XOR "
                    "elsewhere would change which element it reads",
                    "Layout",
                )
            )
        return facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        d = self._decl(src, site)
        if site.details["kind"] == "stride":
            c = padded_constant(src, site.details["constant"])
            if c is None:
                raise Refused(f"{self.name}: {site.details['constant']} is no longer one padded definition")
            return edit.apply_edits(src, [edit.Edit(c[0], c[1], c[2])])
        if site.details["kind"] == "flat":
            base = _PADDED.match(site.details["stride"])
            _, nodes, _ = _flat_padding(src, d)
            assert base is not None
            return edit.apply_edits(src, [edit.replace(n, paren(base.group("base"))) for n in nodes])
        if site.details["kind"] == "padding":
            node = src.node_for(d)
            last = next(
                n
                for n in X.walk(node)
                if n.type == "array_declarator"
                and n.child_by_field_name("size") is not None
                and src.text_of(n.child_by_field_name("size")).strip() == d.dims[-1].strip()
            )
            size = last.child_by_field_name("size")
            assert size is not None
            return edit.apply_edits(src, [edit.replace(size, site.details["base"])])
        xors, _ = _xors(src, d)

        def keep_left(n: ts.Node) -> str:
            left = _plain_operand(src, n)
            if (
                left.type == "parenthesized_expression"
                and n.parent is not None
                and n.parent.type == "subscript_argument_list"
            ):
                return src.text_of(left)[1:-1].strip()
            return src.text_of(left)

        return edit.apply_edits(src, [edit.replace(n, keep_left(n)) for n in xors])

    # ---- forward ----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for d in self._decls(src):
            strides = self._plain_strides(src, d)
            for name, v, ldm in strides:
                sites.append(
                    self.site(
                        src,
                        d,
                        f"shared {d.name}{d.dims_text}: row stride {name} = {v} could be padded",
                        kind="stride",
                        array=d.name,
                        constant=name,
                        base=str(v),
                        ldm="1" if ldm else "0",
                    )
                )
            if (
                len(d.dims) == 2
                and not _PADDED.match(d.dims[-1].strip())
                and not _xors(src, d)[0]
                and d.dims[-1].strip() not in {n for n, _, _ in strides}  # padded at its definition
            ):
                sites.append(
                    self.site(
                        src,
                        d,
                        f"shared {d.name}{d.dims_text} could be padded",
                        kind="padding",
                        array=d.name,
                        base=d.dims[-1].strip(),
                    )
                )
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        d = self._decl(src, site)
        if site.details.get("kind") == "swizzle":
            return [
                Precondition(
                    "consistent_swizzle",
                    not _xors(src, d)[1],
                    f"every access of {d.name} XORs its column with a function of its row",
                    "Layout",
                )
            ]
        if site.details.get("kind") == "stride":
            return self._stride_facts(src, d, site)
        cols = launch_fixed_int(src, d.function, site.details["base"])
        elem = " ".join(w for w in d.element_type.split() if w not in ("const", "volatile"))
        column_walk = [
            u
            for u in _uses(src, d)
            if (ch := _subscript_chain(u))
            and (i := _index(ch[0])) is not None
            and _THREAD_X.search(src.text_of(i))
        ]
        flat = _flat_uses(src, d)
        pad = _pad_elements(elem)
        same_bank = cols is not None and pad is not None and cols % 32 == 0
        return [
            Precondition(
                "row_multiple_of_32_words",
                same_bank,
                f"rows of {d.name} are {cols} elements ({cols // (pad or 1)} words): a column walk "
                f"stays on {pad} bank(s)"
                if same_bank
                else f"row length {site.details['base']} is not a known multiple of 32 elements",
                "Layout",
            ),
            Precondition(
                "bank_word_elements",
                pad is not None,
                f"{elem} elements: {pad} per 4-byte bank word, the padding is {pad} element(s)"
                if pad is not None
                else f"{elem} elements are neither 4 nor 2 bytes",
                "Data types",
            ),
            Precondition(
                "column_access_by_consecutive_threads",
                bool(column_walk),
                f"{d.name}[threadIdx.x-like][..] walks a column across a warp"
                if column_walk
                else f"no access of {d.name} walks a column with threadIdx.x",
                "Layout",
            ),
            Precondition(
                "indexed_only_as_array",
                not flat,
                f"{d.name} is never reinterpreted as a flat buffer"
                if not flat
                else f"{d.name} is used as a flat buffer ({flat[0]})",
                "Layout",
            ),
        ]

    def _stride_pad(self, d: SharedDecl, site: Site) -> int | None:
        """Elements of padding: 16 bytes where a matrix load/store reads the stride (wmma wants a
        leading dimension of whole 16-byte units), else one 4-byte bank word."""
        elem = " ".join(w for w in d.element_type.split() if w not in ("const", "volatile"))
        word = _pad_elements(elem)
        if word is None:
            return None
        return 4 * word if site.details.get("ldm") == "1" else word

    def _stride_facts(self, src: CudaSource, d: SharedDecl, site: Site) -> list[Precondition]:
        name = site.details["constant"]
        plain = any(n == name for n, _, _ in self._plain_strides(src, d))
        pad = self._stride_pad(d, site)
        return [
            Precondition(
                "stride_defined_once",
                plain,
                f"{name} is defined once as a power of two of at least 16 and never compared (a stride, not a size)"
                if plain
                else f"{name} is not one unpadded stride definition",
                "Layout",
            ),
            Precondition(
                "bank_word_elements",
                pad is not None,
                f"{d.element_type} elements: the stride grows by {pad}"
                if pad is not None
                else f"{d.element_type} elements are neither 4 nor 2 bytes",
                "Data types",
            ),
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        d = self._decl(src, site)
        if site.details.get("kind") == "stride":
            found = stride_definition(src, site.details["constant"])
            pad = self._stride_pad(d, site)
            if found is None or pad is None:
                raise Refused(f"{self.name}: {site.details['constant']} is not one stride definition")
            return edit.apply_edits(
                src, [edit.Edit(found[0], found[1], str(int(site.details["base"]) + pad))]
            )
        node = src.node_for(d)
        outer = next(
            n
            for n in X.walk(node)
            if n.type == "array_declarator"
            and (s := n.child_by_field_name("size")) is not None
            and src.text_of(s).strip() == d.dims[-1].strip()
        )
        size = outer.child_by_field_name("size")
        assert size is not None
        elem = " ".join(w for w in d.element_type.split() if w not in ("const", "volatile"))
        pad = _pad_elements(elem) or 1
        return edit.apply_edits(src, [edit.replace(size, f"{src.text_of(size).strip()} + {pad}")])
