"""KernelBench interop: a problem file (`class Model(nn.Module)`, `get_inputs()`,
`get_init_inputs()`) loads as a KLineage workload; a kernel exports back as a KernelBench solution
(`class ModelNew` calling the CUDA through `load_inline`).

Launcher convention for an imported problem: the tensors of `get_inputs()` (x0, x1, ...), then
the model's parameters and buffers (p_<name>, fixed values from the seeded initialisation, so
reference and candidate share weights), then the outputs (out0, ...), then one int per symbolic
dimension, then the stream. Scalars that `get_inputs()` returns are constants of the workload.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from klineage.errors import WorkloadError
from klineage.workload import Scalar, Tensor, Tolerance, Workload, import_user_file

#: KernelBench's own evaluator accepts atol = rtol = 1e-2; imported problems use it unless --strict.
KERNELBENCH_TOLERANCE = Tolerance(1e-2, 1e-2)
SEED = 0
_DTYPE_NAMES = {v: k for k, v in {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
    "int32": torch.int32, "int64": torch.int64, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}.items()}


def load_problem(path: Path) -> Any:
    """Import a problem file; one clear line when it is not a KernelBench problem."""
    if not path.is_file():
        raise WorkloadError(f"{path}: no such file")
    module = import_user_file(path, "the problem file")
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise WorkloadError(f"{path}: defines no {attr} (not a KernelBench problem)")
    return module


def _call(fn: Callable[[], Any], what: str, path: Path) -> Any:
    try:
        with torch.random.fork_rng():
            torch.manual_seed(SEED)
            return fn()
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        hint = " (it needs a GPU; problems must build inputs on the CPU)" if "cuda" in msg.lower() else ""
        raise WorkloadError(f"{path}: {what} raised {type(e).__name__}: {msg}{hint}") from None


class _Problem:
    """The seeded model, its parameters, and how inputs map to names."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.module = load_problem(path)
        init = _call(self.module.get_init_inputs, "get_init_inputs()", path)
        self.model = _call(lambda: self.module.Model(*init), "Model(*get_init_inputs())", path)
        if not isinstance(self.model, torch.nn.Module):
            raise WorkloadError(f"{path}: Model is not a torch.nn.Module")
        self.model.eval()
        self.state = {k: v.detach().clone() for k, v in {**dict(self.model.named_parameters()),
                                                         **dict(self.model.named_buffers())}.items()}
        for k, v in self.state.items():
            if v.device.type != "cpu":
                raise WorkloadError(f"{path}: parameter {k} lives on {v.device}; problems must initialise on the CPU")
        self.inputs = list(_call(self.module.get_inputs, "get_inputs()", path))
        for i, x in enumerate(self.inputs):
            if isinstance(x, torch.Tensor) and x.device.type != "cpu":
                raise WorkloadError(f"{path}: get_inputs()[{i}] is on {x.device}; problems must build inputs on the CPU")

    def forward(self, tensors: list[Any], double: bool) -> list[torch.Tensor]:
        model = self.model
        state = self.state
        if double:
            tensors = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in tensors]
            state = {k: (v.double() if v.is_floating_point() else v) for k, v in state.items()}
        with torch.no_grad():
            out = torch.func.functional_call(model, state, tuple(tensors))
        return list(out) if isinstance(out, tuple | list) else [out]


def _try_shapes(p: _Problem, shapes: list[tuple[int, ...]]) -> list[tuple[int, ...]] | None:
    """Output shapes when the model runs on random inputs of these shapes, else None."""
    try:
        xs = [torch.randn(s, dtype=x.dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
              else (torch.randint(0, 2, s, dtype=x.dtype) if isinstance(x, torch.Tensor) else x)
              for s, x in zip(shapes, p.inputs, strict=True)]
        return [tuple(o.shape) for o in p.forward(xs, double=False)]
    except Exception:
        return None


def _shrunk(shape: tuple[int, ...], cap: int, only_first: bool) -> tuple[int, ...]:
    if only_first:
        return (min(shape[0], cap), *shape[1:]) if shape else shape
    return tuple(min(d, cap) for d in shape)


def workload_from_problem(path: Path, strict: bool = False, name: str | None = None) -> Workload:
    p = _Problem(path)
    tensor_inputs = [(i, x) for i, x in enumerate(p.inputs) if isinstance(x, torch.Tensor)]
    orig = [tuple(x.shape) if isinstance(x, torch.Tensor) else () for x in p.inputs]
    out_shapes = _try_shapes(p, orig)
    if out_shapes is None:
        raise WorkloadError(f"{path}: Model.forward(*get_inputs()) fails on the CPU")
    # Derived shape sets: shrink every dimension (or only the batch dimension) while the model still runs.
    candidates: dict[str, list[list[tuple[int, ...]]]] = {"emu": [], "test": []}
    for sset, caps in (("emu", (13, 5)), ("test", (1, 37, 67))):
        for cap in caps:
            for only_first in (False, True):
                shapes = [_shrunk(s, cap, only_first) if isinstance(x, torch.Tensor) else s for s, x in zip(orig, p.inputs, strict=True)]
                if shapes not in candidates[sset] and _try_shapes(p, shapes) is not None:
                    candidates[sset].append(shapes)
                    break
    largest = max((math.prod(orig[i]) for i, _ in tensor_inputs), default=0)
    if largest <= 1 << 20 and orig not in candidates["test"]:
        candidates["test"].append(orig)  # the problem's own shape, when small enough to check often
    candidates["bench"] = [orig]
    # Symbols: every dimension of every tensor input and output gets a name bound per shape set.
    args: list[Tensor | Scalar] = []
    dims: list[str] = []
    for i, x in tensor_inputs:
        names = tuple(f"x{i}_d{j}" for j in range(x.dim()))
        dims += names
        args.append(Tensor(f"x{i}", names, _DTYPE_NAMES[x.dtype]))
    for k, v in p.state.items():
        value = v.clone()
        args.append(Tensor(f"p_{k.replace('.', '_')}", tuple(v.shape), _DTYPE_NAMES[v.dtype],
                           init=lambda shape, dtype, gen, value=value: value.clone().to(dtype)))
    sample_out = p.forward(p.inputs, double=False)
    for k, o in enumerate(sample_out):
        names = tuple(f"out{k}_d{j}" for j in range(o.dim()))
        dims += names
        args.append(Tensor(f"out{k}", names, _DTYPE_NAMES[o.dtype], role="out"))
    args += [Scalar(d, "int32") for d in dims]

    def bind(shapes: list[tuple[int, ...]]) -> dict[str, int]:
        outs = _try_shapes(p, shapes) or []
        b = {f"x{i}_d{j}": int(n) for i, _ in tensor_inputs for j, n in enumerate(shapes[i])}
        b |= {f"out{k}_d{j}": int(n) for k, s in enumerate(outs) for j, n in enumerate(s)}
        return b

    shape_sets = {sset: [bind(s) for s in lst] for sset, lst in candidates.items()}
    scalars = {i: x for i, x in enumerate(p.inputs) if not isinstance(x, torch.Tensor)}
    state_names = [(f"p_{k.replace('.', '_')}", k) for k in p.state]

    def reference(**kw: Any) -> list[torch.Tensor]:
        tensors = [kw[f"x{i}"] if i not in scalars else scalars[i] for i in range(len(p.inputs))]
        saved = p.state
        p.state = {orig_name: kw[arg] for arg, orig_name in state_names}
        try:
            outs = p.forward(tensors, double=True)
        finally:
            p.state = saved
        return [o.to(s.dtype) for o, s in zip(outs, sample_out, strict=True)]

    def vendor(**kw: Any) -> list[torch.Tensor]:
        tensors = [kw[f"x{i}"] if i not in scalars else scalars[i] for i in range(len(p.inputs))]
        return p.forward(tensors, double=False)

    tol = {} if strict else {dt: KERNELBENCH_TOLERANCE for dt in ("float32", "float16", "bfloat16")}
    return Workload(name=name or path.stem, description=f"KernelBench problem {path.name}", args=args,
                    reference=reference, vendor=vendor, shapes=shape_sets, tolerances=tol)


WORKLOAD_PY = '''"""KernelBench problem {name}, imported by `klineage import kernelbench`."""

from pathlib import Path

from klineage.interop.kernelbench import workload_from_problem

WORKLOAD = workload_from_problem(Path(__file__).resolve().parent / "problem.py", strict={strict}, name={name!r})
'''


def default_name(problem: Path) -> str:
    """The problem's file stem; for a `problem.py` inside a workload folder, the folder's name."""
    return problem.parent.name if problem.stem == "problem" else problem.stem


def import_problem(problem: Path, out_dir: Path, strict: bool = False, name: str | None = None) -> Workload:
    wl = workload_from_problem(problem, strict, name=name or default_name(problem))
    problems = wl.problems()
    if problems:
        raise WorkloadError(f"{problem}: " + "; ".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem, out_dir / "problem.py")
    (out_dir / "workload.py").write_text(WORKLOAD_PY.format(name=wl.name, strict=strict))
    return wl
