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
from importlib import resources
from pathlib import Path

import libcst as cst

from klineage.errors import KLineageError, SourceError
from klineage.source.edit import Edit, apply_edits
from klineage.source.embedded import read_embedded_cuda
from klineage.source.model import CudaSource
from klineage.workload import Scalar, Tensor, Workload

SHIM_TYPES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int32": "Int", "int64": "Long", "int8": "Char", "uint8": "Byte", "bool": "Bool",
}
_TORCH_INCLUDES = re.compile(r"^\s*#\s*include\s*[<\"](torch/|ATen/|c10/)[^>\"]*[>\"]\s*$", re.M)


class WrapError(KLineageError):
    """A solution that cannot be wrapped mechanically; the message says exactly why."""


def shim_header() -> str:
    return resources.files("klineage.interop").joinpath("torch_shim.h").read_text()


def torch_adapter_header() -> str:
    """The shim's calls on real torch tensors, for code that compiles with torch's headers."""
    return resources.files("klineage.interop").joinpath("torch_adapter.h").read_text()


def _forward_call(py_text: str, functions: set[str], where: str) -> tuple[list[str], str, list[cst.Arg]]:
    try:
        module = cst.parse_module(py_text)
    except cst.ParserSyntaxError as e:
        raise WrapError(f"{where}:{e.raw_line}: not valid Python") from None
    cls = next((s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == "ModelNew"), None)
    if cls is None:
        raise WrapError(f"{where}: defines no class ModelNew")
    fwd = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"), None)
    if fwd is None:
        raise WrapError(f"{where}: ModelNew has no forward()")
    params = [p.name.value for p in fwd.params.params][1:]
    body = [s for s in fwd.body.body if not (isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Expr)
                                            and isinstance(s.body[0].value, cst.SimpleString))]
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or not isinstance(body[0].body[0], cst.Return):
        raise WrapError(f"{where}: ModelNew.forward does more than `return <binding>(...)`; wrap it by hand")
    ret = body[0].body[0].value
    if not isinstance(ret, cst.Call):
        raise WrapError(f"{where}: ModelNew.forward does not return a call of a load_inline binding")
    func = ret.func
    name = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
    if name not in functions:
        raise WrapError(f"{where}: forward calls '{name or '?'}', not one of the load_inline functions {sorted(functions)}")
    return params, name, list(ret.args)


def _c_arg(arg: cst.Arg, params: list[str], wl: Workload, where: str) -> str:
    v = arg.value
    if arg.keyword is not None:
        raise WrapError(f"{where}: keyword argument '{arg.keyword.value}' in the binding call; wrap it by hand")
    if isinstance(v, cst.Name) and v.value in params:
        i = params.index(v.value)
        t = next((a for a in wl.args if isinstance(a, Tensor) and a.name == f"x{i}"), None)
        if t is None:
            raise WrapError(f"{where}: forward parameter '{v.value}' is not a tensor input of the workload")
        return _wrap(t)
    chain = _self_chain(v)
    if chain:
        pname = "p_" + "_".join(chain)
        t = next((a for a in wl.args if isinstance(a, Tensor) and a.name == pname), None)
        if t is None:
            raise WrapError(f"{where}: self.{'.'.join(chain)} is not a parameter or buffer of the problem's Model")
        return _wrap(t)
    if isinstance(v, cst.Integer | cst.Float):
        return v.value
    if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus) and isinstance(v.expression, cst.Integer | cst.Float):
        return "-" + v.expression.value
    raise WrapError(f"{where}: binding argument `{cst.Module([]).code_for_node(v)}` is an expression; wrap it by hand")


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
    if "AT_DISPATCH" in source:
        raise WrapError(f"{where}: the binding dispatches on dtype with AT_DISPATCH_*; wrap it by hand")
    params, binding, call_args = _forward_call(py_text, functions, where)
    outs = [t for t in wl.tensors if t.role == "out"]
    if len(outs) != 1:
        raise WrapError(f"{where}: the workload has {len(outs)} outputs; only single-output bindings are wrapped")
    args = ", ".join(_c_arg(a, params, wl, where) for a in call_args)
    sig = wl.c_signature()
    launcher = "\n".join([
        f"{sig} {{",
        f"    klshim::Tensor klineage_outputs[] = {{{_wrap(outs[0])}}};",
        "    klshim::begin(klineage_outputs, 1, stream);",
        f"    torch::Tensor klineage_result = {binding}({args});",
        "    klshim::check_result(klineage_result);",
        "}",
    ])
    body, routed = route_launches_to_current_stream(_TORCH_INCLUDES.sub("", source), where)
    note = (f"// {routed} launch(es) without a stream now name at::cuda::getCurrentCUDAStream(), the\n"
            "// launcher's stream here and torch's current stream in an exported ModelNew.\n") if routed else ""
    return (f"// Wrapped by `klineage import kernelbench --solution {solution.name}`: the solution's CUDA,\n"
            f"// unchanged below the shim except for stream routing, called through the C launcher.\n{note}{shim_header()}\n"
            f"// ---- {solution.name} ----\n{body}\n// ---- launcher ----\n{launcher}\n")


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
        raise KLineageError(f"{problem}: the workload folder has no problem.py (only imported KernelBench problems export back)")
    tensors = [a for a in wl.args if isinstance(a, Tensor)]
    scalars = [a for a in wl.args if isinstance(a, Scalar)]
    params = [t for t in tensors if t.name.startswith("p_")]
    ctype = {"float32": "float", "float64": "double", "float16": "__half", "bfloat16": "__nv_bfloat16",
             "int32": "int", "int64": "long long", "int8": "int8_t", "uint8": "uint8_t", "bool": "bool"}
    cast = ", ".join(
        [f"({'const ' if t.role == 'in' else ''}{ctype[t.dtype]}*)ts[{i}].data_ptr()" for i, t in enumerate(tensors)]
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
