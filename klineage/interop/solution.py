"""KernelBench solutions (`class ModelNew` + `load_inline`) as kernel variants, and back.

Import: the CUDA strings are read with libcst; the binding that `ModelNew.forward` calls is kept
unchanged and run behind our C launcher through a small torch-extension shim (torch_shim.h),
which hands the binding the gate's buffers. Only the common form is wrapped mechanically —
`forward` returns one call of a `functions=[...]` binding whose arguments are forward parameters,
`self.<parameter>` of the model, or number literals — and anything else is refused with the
exact reason. Export: a ModelNew file that subclasses the problem's Model and calls our launcher.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import libcst as cst

from klineage.errors import KLineageError, SourceError
from klineage.source.edit import Edit, apply_edits
from klineage.source.embedded import read_embedded_cuda
from klineage.source.model import CudaSource
from klineage.workload import Scalar, Tensor, Workload

SHIM_TYPES = {
    "float32": "Float",
    "float64": "Double",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int32": "Int",
    "int64": "Long",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
}
_TORCH_INCLUDES = re.compile(r"^\s*#\s*include\s*[<\"](torch/|ATen/|c10/)[^>\"]*[>\"]\s*$", re.M)


class WrapError(KLineageError):
    """A solution that cannot be wrapped mechanically; the message says exactly why."""


def shim_header() -> str:
    return resources.files("klineage.interop").joinpath("torch_shim.h").read_text()


def torch_adapter_header() -> str:
    """The shim's calls on real torch tensors, for code that compiles with torch's headers."""
    return resources.files("klineage.interop").joinpath("torch_adapter.h").read_text()


#: tensor methods that are the identity on the gate's buffers (contiguous, on the device)
_IDENTITY_METHODS = ("cuda", "contiguous", "detach")


@dataclass
class _Forward:
    """What `ModelNew.forward` amounts to: one call of a load_inline binding, with each argument
    as C text; found by evaluating forward's statements (and an autograd.Function's forward)."""

    binding: str
    args: list[str]


class _Evaluator:
    """Follows `forward` through assignments, identity methods (`x.cuda()`, `x.contiguous()`),
    `Function.apply(...)` and the solution's own scalar attributes (`self.dim = dim` in
    __init__); anything else is refused with the construct named."""

    def __init__(
        self, module: cst.Module, functions: set[str], wl: Workload, init_values: list[Any], where: str
    ) -> None:
        self.module, self.functions, self.wl, self.where = module, functions, wl, where
        self.classes = {c.name.value: c for c in module.body if isinstance(c, cst.ClassDef)}
        self.init_values = init_values

    def code(self, node: cst.CSTNode) -> str:
        return cst.Module([]).code_for_node(node)

    def refuse(self, what: str) -> WrapError:
        return WrapError(f"{self.where}: {what}; wrap it by hand")

    def method(self, cls: str, name: str) -> cst.FunctionDef | None:
        c = self.classes.get(cls)
        if c is None:
            return None
        return next((s for s in c.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)

    def run(self, fn: cst.FunctionDef, env: dict[str, Any], cls: str, depth: int = 0) -> Any:
        if depth > 3:
            raise self.refuse("forward calls through more than three levels")
        for stmt in fn.body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                head = (
                    self.code(stmt.with_changes(leading_lines=())).strip().splitlines()[0]
                )  # not its comments
                raise self.refuse(f"{cls}.{fn.name.value} has a `{head}` block")
            for small in stmt.body:
                if isinstance(small, cst.Expr) and isinstance(
                    small.value, cst.SimpleString | cst.ConcatenatedString
                ):
                    continue  # a docstring
                if isinstance(small, cst.Return):
                    if small.value is None:
                        raise self.refuse(f"{cls}.{fn.name.value} returns nothing")
                    return self.value(small.value, env, depth)
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                ):
                    env[small.targets[0].target.value] = self.value(small.value, env, depth)
                    continue
                if isinstance(small, cst.Expr) and _call_attr(small.value) == "save_for_backward":
                    continue  # autograd bookkeeping
                if isinstance(small, cst.Assert | cst.Pass):
                    continue
                raise self.refuse(f"{cls}.{fn.name.value} has the statement `{self.code(small).strip()}`")
        raise self.refuse(f"{cls}.{fn.name.value} does not return")

    def value(self, v: cst.BaseExpression, env: dict[str, Any], depth: int) -> Any:
        """C text of a tensor or number, or a _Forward for a binding call."""
        if isinstance(v, cst.Name):
            if v.value in env:
                return env[v.value]
            raise self.refuse(f"`{v.value}` is not a forward argument or a local")
        if isinstance(v, cst.Integer | cst.Float):
            return v.value
        if (
            isinstance(v, cst.UnaryOperation)
            and isinstance(v.operator, cst.Minus)
            and isinstance(v.expression, cst.Integer | cst.Float)
        ):
            return "-" + v.expression.value
        if isinstance(v, cst.Call):
            func = v.func
            if isinstance(func, cst.Attribute) and func.attr.value in _IDENTITY_METHODS and not v.args:
                return self.value(func.value, env, depth)
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "apply"
                and isinstance(func.value, cst.Name)
            ):
                target = self.method(func.value.value, "forward")
                if target is None:
                    raise self.refuse(
                        f"`{func.value.value}.apply` is not an autograd.Function of the solution"
                    )
                params = [p.name.value for p in target.params.params][1:]  # after ctx
                args = [self.value(a.value, env, depth) for a in v.args]
                return self.run(target, dict(zip(params, args, strict=False)), func.value.value, depth + 1)
            name = (
                func.attr.value
                if isinstance(func, cst.Attribute)
                else (func.value if isinstance(func, cst.Name) else "")
            )
            if name in self.functions:
                for a in v.args:
                    if a.keyword is not None:
                        raise self.refuse(f"keyword argument '{a.keyword.value}' in the binding call")
                args = [self.value(a.value, env, depth) for a in v.args]
                if any(isinstance(a, _Forward) for a in args):
                    raise self.refuse("a binding's result feeds another binding")
                return _Forward(name, [str(a) for a in args])
            raise self.refuse(
                f"forward calls `{self.code(v)}`, not one of the load_inline functions {sorted(self.functions)}"
            )
        chain = _self_chain(v)
        if chain:
            return self.attribute(chain)
        raise self.refuse(f"binding argument `{self.code(v)}` is an expression")

    def attribute(self, chain: list[str]) -> str:
        """`self.<parameter of the problem's Model>` as a buffer, or a scalar attribute that
        ModelNew.__init__ sets from a literal or from one of its (init-input) parameters."""
        pname = "p_" + "_".join(chain)
        t = next((a for a in self.wl.args if isinstance(a, Tensor) and a.name == pname), None)
        if t is not None:
            return _wrap(t)
        init = self.method("ModelNew", "__init__")
        if len(chain) == 1 and init is not None:
            params = [p.name.value for p in init.params.params][1:]
            for stmt in init.body.body:
                if not isinstance(stmt, cst.SimpleStatementLine):
                    continue
                for small in stmt.body:
                    if not (
                        isinstance(small, cst.Assign)
                        and len(small.targets) == 1
                        and _self_chain(small.targets[0].target) == chain
                    ):
                        continue
                    val = small.value
                    if isinstance(val, cst.Integer | cst.Float):
                        return val.value
                    if isinstance(val, cst.Name) and val.value in params:
                        i = params.index(val.value)
                        known = self.init_values[i] if i < len(self.init_values) else None
                        if isinstance(known, int | float) and not isinstance(known, bool):
                            return repr(known)
                        default = init.params.params[i + 1].default
                        if i >= len(self.init_values) and isinstance(default, cst.Integer | cst.Float):
                            return default.value  # not passed by get_init_inputs(): the default
        raise self.refuse(
            f"self.{'.'.join(chain)} is neither a parameter or buffer of the problem's Model nor a "
            "number ModelNew.__init__ sets from a literal or an init input equal at every size"
        )


def _call_attr(v: cst.BaseExpression) -> str:
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute):
        return v.func.attr.value
    return ""


def _forward(py_text: str, functions: set[str], wl: Workload, where: str) -> _Forward:
    try:
        module = cst.parse_module(py_text)
    except cst.ParserSyntaxError as e:
        raise WrapError(f"{where}:{e.raw_line}: not valid Python") from None
    cls = next((s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == "ModelNew"), None)
    if cls is None:
        raise WrapError(f"{where}: defines no class ModelNew")
    fwd = next(
        (s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"), None
    )
    if fwd is None:
        raise WrapError(f"{where}: ModelNew has no forward()")
    from klineage.interop.kernelbench import KernelBenchWorkload

    kb = wl if isinstance(wl, KernelBenchWorkload) else None
    ev = _Evaluator(module, functions, wl, kb.constant_init_inputs() if kb else [], where)
    env: dict[str, Any] = {}
    for i, p in enumerate([p.name.value for p in fwd.params.params][1:]):
        t = next((a for a in wl.args if isinstance(a, Tensor) and a.name == f"x{i}"), None)
        scalar = kb.input_scalar(i) if kb else None
        if t is not None:
            env[p] = _wrap(t)
        elif scalar is not None:
            env[p] = repr(scalar)
    result = ev.run(fwd, env, "ModelNew")
    if not isinstance(result, _Forward):
        raise WrapError(
            f"{where}: ModelNew.forward does not return the result of a load_inline binding; wrap it by hand"
        )
    return result


def _self_chain(v: cst.BaseExpression) -> list[str]:
    """`self.linear.weight` -> ["linear", "weight"]; anything else -> []."""
    parts: list[str] = []
    while isinstance(v, cst.Attribute):
        parts.append(v.attr.value)
        v = v.value
    return list(reversed(parts)) if isinstance(v, cst.Name) and v.value == "self" and parts else []


def _dims(t: Tensor) -> str:
    return "{" + ", ".join(f"(int64_t)({d})" for d in t.shape) + "}"


def _wrap(t: Tensor) -> str:
    return f"klshim::wrap((void*){t.name}, {_dims(t)}, klshim::ScalarType::{SHIM_TYPES[t.dtype]})"


def wrap_solution(solution: Path, wl: Workload) -> str:
    """The kernel file (shim + the solution's CUDA + our launcher) for a KernelBench solution."""
    where = str(solution)
    if not solution.is_file():
        raise WrapError(f"{where}: no such file")
    py_text = solution.read_text()
    try:
        embedded = read_embedded_cuda(py_text, path=where)
    except SourceError as e:
        raise WrapError(str(e)) from None
    cuda = [e for e in embedded if e.is_cuda]
    if not cuda:
        raise WrapError(f"{where}: no CUDA string (load_inline(cuda_sources=...))")
    ours = unwrap_exported(cuda[0].value)
    if ours is not None:
        return ours
    functions = {f for e in embedded for f in e.functions}
    source = "\n".join(e.value for e in cuda)
    fwd = _forward(py_text, functions, wl, where)
    outs = [t for t in wl.tensors if t.role == "out"]
    if len(outs) != 1:
        raise WrapError(
            f"{where}: the workload has {len(outs)} outputs; only single-output bindings are wrapped"
        )
    args = ", ".join(fwd.args)
    binding = fwd.binding
    sig = wl.c_signature()
    launcher = "\n".join(
        [
            f"{sig} {{",
            f"    klshim::Tensor klineage_outputs[] = {{{_wrap(outs[0])}}};",
            "    klshim::begin(klineage_outputs, 1, stream);",
            f"    torch::Tensor klineage_result = {binding}({args});",
            "    klshim::check_result(klineage_result);",
            "}",
        ]
    )
    body, routed = route_launches_to_current_stream(_TORCH_INCLUDES.sub("", source), where)
    note = (
        (
            f"// {routed} launch(es) without a stream now name at::cuda::getCurrentCUDAStream(), the\n"
            "// launcher's stream here and torch's current stream in an exported ModelNew.\n"
        )
        if routed
        else ""
    )
    return (
        f"// Wrapped by `klineage import kernelbench --solution {solution.name}`: the solution's CUDA,\n"
        f"// unchanged below the shim except for stream routing, called through the C launcher.\n{note}{shim_header()}\n"
        f"// ---- {solution.name} ----\n{body}\n// ---- launcher ----\n{launcher}\n"
    )


def route_launches_to_current_stream(cuda: str, where: str) -> tuple[str, int]:
    """KernelBench solutions often launch `<<<grid, block>>>` on the legacy default stream. Our
    launcher convention (and the cuda gate's side-stream check) wants the launch stream, which the
    shim exposes as torch's current stream; a launch that already names a stream is left alone."""
    try:
        src = CudaSource.from_text(cuda, where)
    except SourceError:  # the gate's parse stage reports it with file:line
        return cuda, 0
    edits = []
    for site in src.launch_sites:
        if site.stream is not None:
            continue
        open_ = src.text_bytes.find(b"<<<", site.start, site.end)
        close = src.text_bytes.find(b">>>", open_, site.end) if open_ >= 0 else -1
        if close < 0:
            continue
        extra = ("" if site.smem is not None else ", 0") + ", at::cuda::getCurrentCUDAStream()"
        edits.append(Edit(close, close, extra))
    if not edits:
        return cuda, 0
    return apply_edits(src, edits).text, len(edits)


_EXPORT_HEAD = "#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n"
_EXPORT_TAIL = "\nvoid klineage_run(std::vector<torch::Tensor> ts, std::vector<int64_t> dims) {\n"


def unwrap_exported(cuda: str) -> str | None:
    """The kernel inside a solution that KLineage exported (its binding stripped), else None."""
    if not cuda.startswith(_EXPORT_HEAD) or _EXPORT_TAIL not in cuda:
        return None
    return cuda[len(_EXPORT_HEAD) : cuda.rindex(_EXPORT_TAIL)].replace(torch_adapter_header(), shim_header())


def export_model_new(kernel_text: str, wl: Workload, problem: Path) -> str:
    """A KernelBench solution: the problem's Model source, then ModelNew(Model) whose forward
    launches our kernel on the current stream (output shape inferred on the meta device)."""
    if not problem.is_file():
        raise KLineageError(
            f"{problem}: the workload folder has no problem.py (only imported KernelBench problems export back)"
        )
    tensors = [a for a in wl.args if isinstance(a, Tensor)]
    scalars = [a for a in wl.args if isinstance(a, Scalar)]
    ctype = {
        "float32": "float",
        "float64": "double",
        "float16": "__half",
        "bfloat16": "__nv_bfloat16",
        "int32": "int",
        "int64": "long long",
        "int8": "int8_t",
        "uint8": "uint8_t",
        "bool": "bool",
    }
    cast = ", ".join(
        [
            f"({'const ' if t.role == 'in' else ''}{ctype[t.dtype]}*)ts[{i}].data_ptr()"
            for i, t in enumerate(tensors)
        ]
        + [f"({s.c_type})dims[{j}]" for j, s in enumerate(scalars)]
        + ["at::cuda::getCurrentCUDAStream()"]
    )
    # A wrapped KernelBench solution carries the stand-in torch shim; under load_inline the real
    # torch headers are present, so the shim gives way to the adapter (undone by unwrap_exported).
    kernel_text = kernel_text.replace(shim_header(), torch_adapter_header())
    binding = _EXPORT_HEAD + kernel_text + _EXPORT_TAIL + f"    launch({cast});\n}}\n"
    decl = "void klineage_run(std::vector<torch::Tensor> ts, std::vector<int64_t> dims);"
    from klineage.interop.kernelbench import KernelBenchWorkload, _Problem

    if not isinstance(wl, KernelBenchWorkload):
        raise KLineageError(f"{problem}: the workload was not imported from a KernelBench problem")
    state_names = list(wl.params.values())  # original (dotted) names, in launcher order
    if list(_Problem(problem).build({}, meta=True).state) != state_names:
        raise KLineageError(f"{problem}: the model's parameters changed since the workload was imported")
    index = {t.name: i for i, t in enumerate(tensors)}
    dims = [(index[s.name.rsplit("_d", 1)[0]], int(s.name.rsplit("_d", 1)[1])) for s in scalars]
    return f'''"""KernelBench solution exported by KLineage for {wl.name}: ModelNew calls the gated kernel."""

import torch
from torch.utils.cpp_extension import load_inline

{problem.read_text()}

_CUDA_SRC = {binding!r}
_CPP_SRC = {decl!r}
_ext = load_inline(name="klineage_{re.sub(r"[^0-9A-Za-z_]", "_", wl.name)}", cpp_sources=_CPP_SRC,
                   cuda_sources=_CUDA_SRC, functions=["klineage_run"], verbose=False)
_STATE = {state_names!r}
_DIMS = {dims!r}  # (tensor, axis) of each launcher size argument


class ModelNew(Model):
    """The problem's Model with forward replaced by the kernel; output shapes come from a pass of
    the original forward on the meta device, so nothing is computed twice."""

    _shape_pass = False

    def forward(self, *inputs):
        if self._shape_pass:
            return super().forward(*inputs)
        state = dict(self.named_parameters()) | dict(self.named_buffers())
        meta_state = {{k: v.to("meta") for k, v in state.items()}}
        meta_in = tuple(x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs)
        self._shape_pass = True
        try:
            outs = torch.func.functional_call(self, meta_state, meta_in)
        finally:
            self._shape_pass = False
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        tensors = [x.contiguous() for x in inputs if isinstance(x, torch.Tensor)]
        params = [state[k].contiguous() for k in _STATE]
        results = [torch.empty(o.shape, dtype=o.dtype, device=tensors[0].device) for o in outs]
        every = tensors + params + results
        _ext.klineage_run(every, [int(every[i].shape[j]) for i, j in _DIMS])
        return results[0] if len(results) == 1 else tuple(results)
'''
