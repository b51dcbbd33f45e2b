"""Frozen records of what the source model finds: the boundary the operators and the emulator use.

Every record carries the byte range (`start`, `end`, into the UTF-8 text) and the 1-based line span
of its node, plus the tree-sitter node type, so it can be turned back into a node or an edit.
"""

from __future__ import annotations

from dataclasses import dataclass

from klineage.source.mask import Attribute

__all__ = [
    "Attribute",
    "Call",
    "Construct",
    "Function",
    "LaunchSite",
    "Loop",
    "Param",
    "Pragma",
    "SharedDecl",
    "Template",
    "TemplateParam",
]


@dataclass(frozen=True)
class Construct:
    """Common fields: what it is called, what kind of thing it is, and where it lies."""

    name: str
    kind: str
    node_type: str
    start: int
    end: int
    line: int
    end_line: int


@dataclass(frozen=True)
class Param:
    """One function parameter; `type` is the declaration without the name."""

    name: str
    type: str
    is_pointer: bool
    has_restrict: bool
    is_const: bool
    default: str | None = None


@dataclass(frozen=True)
class TemplateParam:
    """`int BLOCK` (kind value), `typename T` (kind type), `template <...> class C` (kind template)."""

    name: str
    kind: str
    type: str
    default: str | None = None


@dataclass(frozen=True)
class Function(Construct):
    """A function definition; kind is kernel, device, launcher (extern "C" host) or host.

    `attributes` are `__launch_bounds__`, `__cluster_dims__`, `__maxnreg__` with their byte ranges
    (to remove or change them); `launch_bounds` repeats the first one's arguments.
    """

    qualifiers: tuple[str, ...]
    return_type: str
    params: tuple[Param, ...]
    launch_bounds: tuple[str, ...]
    attributes: tuple[Attribute, ...]
    template_params: tuple[TemplateParam, ...]
    is_extern_c: bool
    body_start: int
    body_end: int


@dataclass(frozen=True)
class Template(Construct):
    """A template declaration; kind names what it declares (kernel, device, host, struct, class, ...)."""

    params: tuple[TemplateParam, ...]


@dataclass(frozen=True)
class LaunchSite(Construct):
    """`kernel<targs><<<grid, block, smem, stream>>>(args)`; name is the kernel's name."""

    template_args: tuple[str, ...]
    config: tuple[str, ...]
    args: tuple[str, ...]
    function: str | None

    @property
    def grid(self) -> str:
        return self.config[0]

    @property
    def block(self) -> str:
        return self.config[1]

    @property
    def smem(self) -> str | None:
        return self.config[2] if len(self.config) > 2 else None

    @property
    def stream(self) -> str | None:
        return self.config[3] if len(self.config) > 3 else None


@dataclass(frozen=True)
class SharedDecl(Construct):
    """A `__shared__` variable (range: its declaration); dims are bracket texts outermost first, "" for `[]`."""

    element_type: str
    dims: tuple[str, ...]
    is_extern: bool
    align: str | None
    function: str | None
    declarator_start: int
    declarator_end: int

    @property
    def is_dynamic(self) -> bool:
        return self.is_extern and self.dims[:1] == ("",)

    @property
    def dims_text(self) -> str:
        return "".join(f"[{d}]" for d in self.dims)


@dataclass(frozen=True)
class Loop(Construct):
    """A for/while/do loop; header is the text before the body, depth counts enclosing loops."""

    header: str
    function: str | None
    depth: int
    body_start: int
    body_end: int


@dataclass(frozen=True)
class Pragma(Construct):
    """`#pragma NAME [VALUE]` with the loop it applies to (the next statement), if any."""

    value: str | None
    text: str
    loop: Loop | None
    function: str | None


@dataclass(frozen=True)
class Call(Construct):
    """A call that is not a kernel launch; name includes any scope (`cg::this_thread_block`)."""

    template_args: tuple[str, ...]
    args: tuple[str, ...]
    function: str | None
