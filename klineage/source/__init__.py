"""CUDA source model on tree-sitter-cuda: parse, query, anchor, edit; CUDA embedded in Python via libcst.

`CudaSource` is an immutable parsed file with frozen records (`Function`, `LaunchSite`, `SharedDecl`,
`Loop`, `Pragma`, `Call`, `Template`); `Anchor` names a place stably; `apply_edits` returns a new,
re-parsed source; `read_embedded_cuda` / `write_embedded_cuda` handle KernelBench `load_inline` files.
"""

from klineage.source.anchor import Anchor
from klineage.source.constructs import (
    Attribute,
    Call,
    Construct,
    Function,
    LaunchSite,
    Loop,
    Param,
    Pragma,
    SharedDecl,
    Template,
    TemplateParam,
)
from klineage.source.edit import (
    Edit,
    apply_edits,
    delete,
    indent_of,
    insert_after,
    insert_before,
    lines_of,
    normalize,
    replace,
)
from klineage.source.embedded import EmbeddedCuda, read_embedded_cuda, write_embedded_cuda
from klineage.source.model import CudaSource

__all__ = [
    "Anchor",
    "Attribute",
    "Call",
    "Construct",
    "CudaSource",
    "Edit",
    "EmbeddedCuda",
    "Function",
    "LaunchSite",
    "Loop",
    "Param",
    "Pragma",
    "SharedDecl",
    "Template",
    "TemplateParam",
    "apply_edits",
    "delete",
    "indent_of",
    "insert_after",
    "insert_before",
    "lines_of",
    "normalize",
    "read_embedded_cuda",
    "replace",
    "write_embedded_cuda",
]
