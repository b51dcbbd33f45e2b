"""The launcher's signature against the workload (the gate's parse stage).

Every variant exports `extern "C" void launch(<args in WORKLOAD order>, cudaStream_t)`. The gate
calls it through ctypes with exactly that list, so a launcher that declares other types, another
count or another order reads garbage (a `double*` over float32 data, a pointer as an int) and a
launcher without the stream parameter launches on the default stream. Both are refused here,
before compiling, with the first parameter that differs. Types the parser cannot resolve (a
typedef, a vector type such as `float4*`) are not guessed at: only known C spellings are compared.
"""

from __future__ import annotations

import re

from klineage.source.constructs import Function, Param
from klineage.workload import Scalar, Tensor, Workload

#: C spellings of each dtype (after qualifiers, `*` and spaces are normalized away)
SPELLINGS: dict[str, tuple[str, ...]] = {
    "float32": ("float",),
    "float64": ("double",),
    "float16": ("__half", "half"),
    "bfloat16": ("__nv_bfloat16", "nv_bfloat16"),
    "int8": ("int8_t", "signed char", "char"),
    "uint8": ("uint8_t", "unsigned char"),
    "int32": ("int", "int32_t", "signed", "signed int"),
    "int64": ("long long", "long long int", "signed long long", "int64_t", "long", "long int"),
    "bool": ("bool",),
}
_KNOWN = {spelling: dtype for dtype, spellings in SPELLINGS.items() for spelling in spellings}
#: other builtin types: never the spelling of any workload dtype
_OTHER_BUILTINS = (
    "unsigned int",
    "unsigned",
    "uint32_t",
    "unsigned long long",
    "uint64_t",
    "short",
    "int16_t",
    "unsigned short",
    "uint16_t",
    "void",
)
STREAM_TYPES = ("cudaStream_t", "CUstream")
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict)\b")


def base_type(p: Param) -> str:
    """The parameter's type without qualifiers, pointer stars and extra spaces."""
    text = _QUALIFIERS.sub(" ", p.type).replace("*", " ").replace("&", " ")
    return " ".join(text.split())


def _dtype_of(p: Param) -> str | None:
    """The workload dtype this spelling names, "other" for a builtin no dtype uses, None when unknown."""
    t = base_type(p)
    if t in _KNOWN:
        return _KNOWN[t]
    return "other" if t in _OTHER_BUILTINS else None


def _expected(a: Tensor | Scalar) -> str:
    if isinstance(a, Tensor):
        return f"{'const ' if a.role == 'in' else ''}{a.c_type}* {a.name}"
    return f"{a.c_type} {a.name}"


def signature_problem(launcher: Function, workload: Workload) -> str | None:
    """Why `launcher` does not match `workload.args` + `cudaStream_t`, in words; None when it does."""
    params = list(launcher.params)
    args = list(workload.args)
    names = {a.name: i for i, a in enumerate(args)}
    want = f"(expected {workload.c_signature()})"
    for i, a in enumerate(args):
        if i >= len(params):
            return (
                f"launch has {len(params)} parameters, the workload needs {len(args)} and a cudaStream_t: "
                f"argument {i + 1} '{a.name}' ({_expected(a)}) is missing {want}"
            )
        p = params[i]
        where = f"launch parameter {i + 1} '{p.name or '?'}' is `{p.type}`"
        if base_type(p) in STREAM_TYPES:
            return f"{where} where the workload has argument '{a.name}' ({_expected(a)}) {want}"
        if isinstance(a, Tensor) != p.is_pointer:
            kind = "a pointer" if p.is_pointer else "not a pointer"
            return (
                f"{where} ({kind}) where the workload has {'tensor' if isinstance(a, Tensor) else 'scalar'} "
                f"'{a.name}' ({_expected(a)}) {want}"
            )
        got = _dtype_of(p)
        if got is not None and got != a.dtype:
            return f"{where} where the workload's '{a.name}' is {a.dtype} ({_expected(a)}) {want}"
        if p.name and p.name != a.name and names.get(p.name, i) != i:
            return (
                f"{where}: the workload's argument {i + 1} is '{a.name}' and '{p.name}' is argument "
                f"{names[p.name] + 1} (order swapped?) {want}"
            )
    rest = params[len(args) :]
    if not rest:
        return (
            f"launch has no cudaStream_t parameter after the workload's {len(args)} arguments: it would launch "
            f"on the default stream {want}"
        )
    if base_type(rest[0]) not in STREAM_TYPES or rest[0].is_pointer:
        return (
            f"launch parameter {len(args) + 1} '{rest[0].name or '?'}' is `{rest[0].type}`, expected the "
            f"cudaStream_t stream {want}"
        )
    if len(rest) > 1:
        return (
            f"launch has {len(params)} parameters, {len(rest) - 1} more than the workload's {len(args)} and the "
            f"stream (first extra: '{rest[1].name or '?'}' `{rest[1].type}`) {want}"
        )
    return None
