"""KernelBench interop: a problem file (`class Model(nn.Module)`, `get_inputs()`,
`get_init_inputs()`) loads as a KLineage workload; a kernel exports back as a KernelBench solution
(`class ModelNew` calling the CUDA through `load_inline`).

Launcher convention for an imported problem: the tensors of `get_inputs()` (x0, x1, ...), then
the model's parameters and buffers (p_<name>, fixed values from the seeded initialisation, so
reference and candidate share weights), then the outputs (out0, ...), then one int per symbolic
dimension, then the stream. Scalars that `get_inputs()` returns are constants of the workload.
"""

from __future__ import annotations

import ast
import contextlib
import re
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from klineage.domains import Domain
from klineage.errors import WorkloadError
from klineage.interop.checks import reference_problems
from klineage.interop.kb_source import SMALL, Knob, flat, read_source, scaled, unflat
from klineage.workload import Scalar, Tensor, Tolerance, Workload, import_user_file

#: KernelBench's own evaluator accepts atol = rtol = 1e-2; imported problems use it unless --strict.
KERNELBENCH_TOLERANCE = Tolerance(1e-2, 1e-2)
SEED = 0
_DTYPE_NAMES = {
    v: k
    for k, v in {
        "float32": torch.float32,
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
        "float64": torch.float64,
        "int32": torch.int32,
        "int64": torch.int64,
        "int8": torch.int8,
        "uint8": torch.uint8,
        "bool": torch.bool,
    }.items()
}


def load_problem(path: Path) -> Any:
    """Import a problem file; one clear line when it is not a KernelBench problem."""
    if not path.is_file():
        raise WorkloadError(f"{path}: no such file")
    module = import_user_file(path, "the problem file")
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise WorkloadError(f"{path}: defines no {attr} (not a KernelBench problem)")
    return module


def _call(fn: Callable[[], Any], what: str, path: Path, seed: int = SEED) -> Any:
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return fn()
    except Exception as e:
        raise WorkloadError(f"{path}: {what} raised {_why(e)}") from None


def _why(e: BaseException) -> str:
    msg = str(e).splitlines()[0] if str(e) else ""
    hint = " (it needs a GPU; problems must build inputs on the CPU)" if "cuda" in msg.lower() else ""
    return f"{type(e).__name__}: {msg[:200]}{hint}" if msg else type(e).__name__


@dataclass(frozen=True)
class Scale:
    """How `import kernelbench` derives its CPU shapes: every size knob capped at `emu` (CPU
    emulator) and `test` (GPU test) elements per dimension; the problem's own sizes are `bench`."""

    emu: int = 16
    test: int = 64


#: inputs + outputs, in elements, a derived shape should stay under (smaller caps are tried first
#: when a cap goes over; the CPU emulator runs every thread of every block one after another)
EMU_BUDGET = 1 << 16
TEST_BUDGET = 1 << 21
#: a problem without size knobs keeps its literal sizes up to this many input elements
LITERAL_LIMIT = 1 << 22


@dataclass
class _Instance:
    """The problem at one set of sizes: seeded model and state, a sample of inputs, output shapes."""

    knobs: dict[str, Knob]
    model: torch.nn.Module
    state: dict[str, torch.Tensor]
    inputs: list[Any]
    outputs: list[torch.Tensor]

    def elements(self) -> int:
        return sum(x.numel() for x in [*self.inputs, *self.outputs] if isinstance(x, torch.Tensor))


class _Problem:
    """A problem file, built at whatever sizes its knobs are set to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.module = load_problem(path)
        try:
            self.source = read_source(path.read_text(), str(path))
        except SyntaxError as e:
            raise WorkloadError(f"{path}:{e.lineno}: not valid Python") from None
        self.lock = threading.RLock()
        self.cache: dict[tuple, _Instance] = {}

    def configure(self, knobs: Mapping[str, Knob]) -> None:
        """Set the knobs and re-run the derived top-level assignments, in file order."""
        g = self.module.__dict__
        for stmt in self.source.assignments:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            names = [t.id for t in target.elts] if isinstance(target, ast.Tuple) else [target.id]  # type: ignore[attr-defined]
            if all(n in knobs for n in names):
                g.update({n: knobs[n] for n in names})
            else:
                exec(compile(ast.Module([stmt], []), str(self.path), "exec"), g)  # noqa: S102 - the problem's own line

    def build(self, knobs: Mapping[str, Knob], meta: bool = False) -> _Instance:
        """Seeded Model and get_inputs() at these sizes, and one forward; on the meta device
        (shapes only, nothing allocated) when `meta`."""
        key = (tuple(sorted(flat(knobs).items())), meta)
        with self.lock:
            if key in self.cache:
                return self.cache[key]
            path = self.path
            ctx = torch.device("meta") if meta else contextlib.nullcontext()
            with ctx:
                try:
                    self.configure(knobs)
                except Exception as e:
                    raise WorkloadError(
                        f"{path}: the size constants at {dict(knobs)} raised {_why(e)}"
                    ) from None
                init = _call(self.module.get_init_inputs, "get_init_inputs()", path)
                model = _call(lambda: self.module.Model(*init), "Model(*get_init_inputs())", path)
                if not isinstance(model, torch.nn.Module):
                    raise WorkloadError(f"{path}: Model is not a torch.nn.Module")
                model.eval()
                state = {
                    k: v.detach()
                    for k, v in {**dict(model.named_parameters()), **dict(model.named_buffers())}.items()
                }
                for k, v in state.items():
                    if v.device.type not in ("cpu", "meta"):
                        raise WorkloadError(
                            f"{path}: parameter {k} lives on {v.device}; problems must initialise on the CPU"
                        )
                inputs = list(_call(self.module.get_inputs, "get_inputs()", path))
                for i, x in enumerate(inputs):
                    if isinstance(x, torch.Tensor) and x.device.type not in ("cpu", "meta"):
                        raise WorkloadError(
                            f"{path}: get_inputs()[{i}] is on {x.device}; problems must build inputs on the CPU"
                        )
                try:
                    outs = self.forward(model, state, inputs, knobs, double=False)
                except Exception as e:
                    where = (
                        "at the problem's own sizes (shapes only)"
                        if meta
                        else f"at {dict(knobs) or 'its sizes'}"
                    )
                    raise WorkloadError(
                        f"{path}: the reference fails on its own inputs {where}: {_why(e)}"
                    ) from None
            inst = _Instance(dict(knobs), model, state, inputs, outs)
            self.cache[key] = inst
            return inst

    def forward(
        self,
        model: torch.nn.Module,
        state: Mapping[str, torch.Tensor],
        tensors: Sequence[Any],
        knobs: Mapping[str, Knob],
        double: bool,
    ) -> list[torch.Tensor]:
        with self.lock:
            self.configure(knobs)  # a forward may read the module's constants
            if double:
                tensors = [
                    t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                    for t in tensors
                ]
                state = {k: (v.double() if v.is_floating_point() else v) for k, v in state.items()}
            with torch.no_grad():
                out = torch.func.functional_call(model, dict(state), tuple(tensors))
        outs = list(out) if isinstance(out, tuple | list) else [out]
        bad = [i for i, o in enumerate(outs) if not isinstance(o, torch.Tensor)]
        if bad:
            raise TypeError(f"forward returned a {type(outs[bad[0]]).__name__}, not a tensor")
        return outs


def _derive(
    p: _Problem, caps: Sequence[int], budget: int, modes: Sequence[bool] = (True, False)
) -> tuple[list[_Instance], list[str]]:
    """An instance at the first cap (in order) whose inputs and outputs fit the element budget
    (sized on the meta device first, so nothing large is allocated) and whose reference runs with
    finite results; else the smallest that runs; and why the others did not."""
    why: list[str] = []
    fits: list[tuple[int, dict[str, Knob]]] = []
    tried: set[tuple] = set()
    for cap in (c for c in caps if c >= 1):
        for divide in modes:
            knobs = scaled(p.source.knobs, cap, divide)
            key = tuple(sorted(flat(knobs).items()))
            if key in tried:
                continue
            tried.add(key)
            try:
                fits.append((p.build(knobs, meta=True).elements(), knobs))
            except WorkloadError as e:
                why.append(f"cap {cap}: {str(e).split(': ', 1)[-1]}")
    order = [k for n, k in fits if n <= budget] + [
        k for n, k in sorted(fits, key=lambda f: f[0]) if n > budget
    ][:1]
    for knobs in order:
        try:
            inst = p.build(knobs)
        except WorkloadError as e:
            why.append(f"at {knobs}: {str(e).split(': ', 1)[-1]}")
            continue
        bad = next(
            (
                i
                for i, o in enumerate(inst.outputs)
                if o.is_floating_point() and not bool(torch.isfinite(o).all())
            ),
            None,
        )
        if bad is not None:
            why.append(f"at {knobs}: output {bad} of the reference is not finite on its own inputs")
            continue
        return [inst], why
    return [], why


def workload_from_problem(
    path: Path,
    strict: bool = False,
    name: str | None = None,
    scale: Scale = Scale(),
    sizes: Mapping[str, Sequence[Mapping[str, Knob]]] | None = None,
    domains: Mapping[str, Domain | None] | None = None,
    verdict_note: str = "",
) -> Workload:
    """The problem as a workload: emu/test shapes at capped knobs (the reference run there),
    bench at the problem's own sizes (shapes from the meta device, nothing allocated).
    `sizes` (knob values per shape set) and `domains` (per input) are what the import found and
    wrote into workload.py; given, they are used as they are (no search)."""
    p = _Problem(path)
    knobs = p.source.knobs
    if sizes is not None:
        sets = {sset: [p.build(k, meta=sset == "bench") for k in lst] for sset, lst in sizes.items()}
        if not all(sets.get(s) for s in ("emu", "test", "bench")):
            raise WorkloadError(f"{path}: sizes must list emu, test and bench knob values")
    elif knobs:
        emu, why_emu = _derive(
            p, (scale.emu, scale.emu // 2, scale.emu // 4, scale.emu * 2, scale.emu * 4), EMU_BUDGET
        )
        test, why_test = _derive(
            p, (scale.test, scale.test // 2, scale.test // 4, scale.test // 8), TEST_BUDGET
        )
        # odd sizes (not a multiple of any block or tile size): capped, not divided, first
        odd, _ = _derive(p, (scale.test // 2 - 1, scale.emu - 3), TEST_BUDGET, modes=(False, True))
        if not emu or not test:
            reasons = "; ".join(dict.fromkeys(why_emu + why_test))
            raise WorkloadError(f"{path}: workload problem, not a kernel one: {reasons}")
        try:
            bench = p.build(knobs, meta=True)
        except WorkloadError as e:
            if "meta" not in str(e).lower():
                raise  # the reference fails at the problem's own sizes
            bench = None  # an operator without a meta kernel: bench at the largest derived size
        sets = {"emu": emu, "test": _uniq(test + odd + emu), "bench": [bench or test[0]]}
    else:
        own = p.build({}, meta=True)
        if sum(x.numel() for x in own.inputs if isinstance(x, torch.Tensor)) > LITERAL_LIMIT:
            raise WorkloadError(
                f"{path}: the sizes are literals inside get_inputs() (no module-level size "
                "constants to scale) and too large to run on the CPU"
            )
        inst = p.build({})
        sets = {"emu": [inst], "test": [inst], "bench": [inst]}
    wl = _workload(p, sets, strict, name or path.stem, domains)
    wl.verdict_note = verdict_note
    return wl


def _uniq(xs: list[_Instance]) -> list[_Instance]:
    seen: dict[tuple, _Instance] = {}
    for x in xs:
        seen.setdefault(tuple(sorted(flat(x.knobs).items())), x)
    return list(seen.values())


def _workload(
    p: _Problem,
    sets: Mapping[str, list[_Instance]],
    strict: bool,
    name: str,
    declared: Mapping[str, Domain | None] | None,
) -> Workload:
    first = sets["test"][0]
    every = [i for lst in sets.values() for i in lst]
    path = p.path
    for inst in every:
        kinds = [
            (isinstance(x, torch.Tensor), x.dtype if isinstance(x, torch.Tensor) else None)
            for x in inst.inputs
        ]
        if kinds != [
            (isinstance(x, torch.Tensor), x.dtype if isinstance(x, torch.Tensor) else None)
            for x in first.inputs
        ]:
            raise WorkloadError(f"{path}: get_inputs() returns other kinds of values at other sizes")
    tensor_inputs = [i for i, x in enumerate(first.inputs) if isinstance(x, torch.Tensor)]
    domains = p.source.domains or [None] * len(first.inputs)
    if len(domains) != len(first.inputs):
        domains = [None] * len(first.inputs)
    if declared is not None:
        domains = [declared.get(f"x{i}") for i in range(len(first.inputs))]
    args: list[Tensor | Scalar] = []
    dims: list[str] = []
    for i in tensor_inputs:
        x = first.inputs[i]
        names = tuple(f"x{i}_d{j}" for j in range(x.dim()))
        dims += names
        args.append(Tensor(f"x{i}", names, _DTYPE_NAMES[x.dtype], domain=domains[i]))
    params: dict[str, str] = {}  # argument name -> state name
    for k, v in first.state.items():
        arg = f"p_{k.replace('.', '_')}"
        params[arg] = k
        varies = [j for j in range(v.dim()) if len({inst.state[k].shape[j] for inst in every}) > 1]
        shape = tuple(f"{arg}_d{j}" if j in varies else int(n) for j, n in enumerate(v.shape))
        dims += [f"{arg}_d{j}" for j in varies]
        args.append(Tensor(arg, shape, _DTYPE_NAMES[v.dtype]))
    for k, o in enumerate(first.outputs):
        names = tuple(f"out{k}_d{j}" for j in range(o.dim()))
        dims += names
        args.append(Tensor(f"out{k}", names, _DTYPE_NAMES[o.dtype], role="out"))
    args += [Scalar(d, "int32") for d in dims]

    def bind(inst: _Instance) -> dict[str, int]:
        b = dict(flat(inst.knobs))
        b |= {f"x{i}_d{j}": int(n) for i in tensor_inputs for j, n in enumerate(inst.inputs[i].shape)}
        b |= {f"{a}_d{j}": int(n) for a, k in params.items() for j, n in enumerate(inst.state[k].shape)}
        b |= {f"out{k}_d{j}": int(n) for k, o in enumerate(inst.outputs) for j, n in enumerate(o.shape)}
        return b

    shapes = {sset: [bind(i) for i in lst] for sset, lst in sets.items()}
    tol = {} if strict else {dt: KERNELBENCH_TOLERANCE for dt in ("float32", "float16", "bfloat16")}
    wl = KernelBenchWorkload(
        name=name,
        description=f"KernelBench problem {path.name}",
        args=args,
        reference=lambda **kw: None,
        shapes=shapes,
        tolerances=tol,
    )
    wl.attach(p, params, [t.dtype for t in first.outputs])
    return wl


@dataclass
class KernelBenchWorkload(Workload):
    """A workload whose model, parameters and generated inputs depend on the size knobs its
    shape bindings carry: parameters are the seeded model's at those sizes, and a tensor without
    a value domain comes from `get_inputs()` itself at those sizes and the gate's seed."""

    problem: Any = None
    params: dict[str, str] = field(default_factory=dict)
    out_dtypes: list[torch.dtype] = field(default_factory=list)

    def attach(self, p: _Problem, params: dict[str, str], out_dtypes: list[torch.dtype]) -> None:
        self.problem, self.params, self.out_dtypes = p, params, out_dtypes
        self.reference = self._reference
        self.vendor = self._vendor

    def _instances(self) -> list[_Instance]:
        return [
            self.problem.build(self._knobs(b), meta=sset == "bench")
            for sset, lst in self.shapes.items()
            for b in lst
        ]

    def constant_init_inputs(self) -> list[Any]:
        """get_init_inputs() where an entry is the same number at every size, else None there
        (a solution's `self.dim = dim` is a constant of the kernel only then)."""
        p = self.problem
        rows = []
        with p.lock:
            for inst in self._instances():
                p.configure(inst.knobs)
                rows.append(list(_call(p.module.get_init_inputs, "get_init_inputs()", p.path)))
        return [col[0] if all(c == col[0] for c in col) else None for col in zip(*rows, strict=False)]

    def input_scalar(self, i: int) -> Any:
        """get_inputs()[i] when it is the same number at every size (a constant of the workload)."""
        vals = [inst.inputs[i] for inst in self._instances()]
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) and v == vals[0] for v in vals)
        return vals[0] if ok else None

    def _knobs(self, bindings: Mapping[str, int]) -> dict[str, Knob]:
        return unflat(bindings, self.problem.source.knobs)

    def _instance_for(self, kw: Mapping[str, Any]) -> _Instance:
        """The sizes a call's tensors were drawn at (matched on every input's shape)."""
        want = {a.name: tuple(kw[a.name].shape) for a in self.tensors if a.role == "in" and a.name in kw}
        for b in (b for lst in self.shapes.values() for b in lst):
            if all(self.tensor_shape(a, b) == want[a.name] for a in self.tensors if a.name in want):
                return self.problem.build(self._knobs(b))
        raise WorkloadError(f"{self.name}: no shape binding has these input shapes: {want}")

    def draw_input(
        self, a: Tensor, shape: tuple[int, ...], gen: torch.Generator, bindings: Mapping[str, int]
    ) -> torch.Tensor:
        if a.name in self.params:
            return self.problem.build(self._knobs(bindings)).state[self.params[a.name]].clone()
        if a.domain is None and a.init is None and a.name.startswith("x"):
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
            p = self.problem
            with p.lock:
                p.configure(self._knobs(bindings))
                xs = _call(p.module.get_inputs, "get_inputs()", p.path, seed=seed)
            return xs[int(a.name[1:])]
        return super().draw_input(a, shape, gen, bindings)

    def _args(self, kw: Mapping[str, Any]) -> tuple[_Instance, list[Any], dict[str, torch.Tensor]]:
        inst = self._instance_for(kw)
        tensors = [kw[f"x{i}"] if isinstance(x, torch.Tensor) else x for i, x in enumerate(inst.inputs)]
        return inst, tensors, {k: kw[a] for a, k in self.params.items()}

    def _reference(self, **kw: Any) -> list[torch.Tensor]:
        inst, tensors, state = self._args(kw)
        outs = self.problem.forward(inst.model, state, tensors, inst.knobs, double=True)
        return [o.to(dt) for o, dt in zip(outs, self.out_dtypes, strict=True)]

    def _vendor(self, **kw: Any) -> list[torch.Tensor]:
        inst, tensors, state = self._args(kw)
        return self.problem.forward(inst.model, state, tensors, inst.knobs, double=False)


WORKLOAD_PY = '''"""KernelBench problem {name}, imported by `klineage import kernelbench`.

SIZES: the problem's size constants per shape set (emu and test scaled down so the reference runs
on the CPU; bench the problem's own, for the GPU). DOMAINS: how each input's values are drawn, as
get_inputs() draws them (None: taken from get_inputs() itself at those sizes). Edit either to
change what the gate checks."""

from pathlib import Path

from klineage.domains import Domain
from klineage.interop.kernelbench import workload_from_problem

SIZES = {sizes}
DOMAINS = {domains}
WORKLOAD = workload_from_problem(Path(__file__).resolve().parent / "problem.py", strict={strict}, name={name!r},
                                 sizes=SIZES, domains=DOMAINS, verdict_note={note!r})
'''


def default_name(problem: Path) -> str:
    """The problem's file stem; for a `problem.py` inside a workload folder, the folder's name."""
    return problem.parent.name if problem.stem == "problem" else problem.stem


#: a size written into a solution's CUDA as a constant: `#define N 4096`, `const int dim = 16384;`
_FIXED_SIZE = re.compile(
    r"#\s*define\s+(\w+)\s+\(?(\d+)\)?|\b(?:const|constexpr)\s+(?:int|long|int64_t|size_t|unsigned)\s+"
    r"(\w+)\s*=\s*(\d+)\s*;"
)

#: a size written into a loop's bound: `for (int i = 0; i < 4096; i++)` over a row of 4096
_FIXED_BOUND = re.compile(r"\bfor\s*\([^;]*;\s*(\w+)\s*(<=?|!=)\s*(\d+)\s*;")


def fixed_sizes(cuda: str, wl: KernelBenchWorkload) -> list[str]:
    """`NAME = value` for every constant (and `loop bound i < value` for every literal loop bound)
    of the solution's CUDA that equals one of the problem's size knobs where the derived shapes
    change it: the solution is specialised to the problem's
    own sizes and can only be judged there (as KernelBench judges every solution)."""
    own = flat(wl.problem.source.knobs)
    derived = [b for sset in ("emu", "test") for b in wl.shapes[sset]]
    moving = {v for k, v in own.items() if v > SMALL and any(b.get(k) != v for b in derived)}
    found = []
    for m in _FIXED_SIZE.finditer(cuda):
        name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        if int(value) in moving:
            found.append(f"{name} = {value}")
    for m in _FIXED_BOUND.finditer(cuda):
        if int(m.group(3)) in moving:
            found.append(f"loop bound {m.group(1)} {m.group(2)} {m.group(3)}")
    return list(dict.fromkeys(found))


def import_problem(
    problem: Path,
    out_dir: Path,
    strict: bool = False,
    name: str | None = None,
    scale: Scale = Scale(),
    solution: Path | None = None,
) -> Workload:
    """Write the workload folder (problem.py, workload.py with its sizes and domains, and the
    wrapped solution.cu when a solution is given) once the workload is valid, its reference runs
    on every derived shape and the solution wraps; nothing is written otherwise. A solution
    specialised to the problem's own sizes gets a workload judged at those sizes only."""
    from klineage.interop.solution import wrap_solution

    name = name or default_name(problem)
    wl = workload_from_problem(problem, strict, name=name, scale=scale)
    problems = wl.problems() or reference_problems(wl)
    if problems:
        raise WorkloadError(f"{problem}: " + "; ".join(problems))
    assert isinstance(wl, KernelBenchWorkload)
    knobs = wl.problem.source.knobs
    sizes = {sset: [unflat(b, knobs) for b in wl.shapes[sset]] for sset in ("emu", "test", "bench")}
    domains = {t.name: t.domain for t in wl.tensors if t.name.startswith("x")}
    kernel = wrap_solution(solution, wl) if solution is not None else None
    note = ""
    fixed = fixed_sizes(kernel, wl) if kernel is not None else []
    if fixed:
        note = (
            f"shape-specialised solution ({', '.join(fixed)} in its CUDA): judged at the problem's own sizes "
            "only, as KernelBench judges it"
        )
        sizes = {sset: sizes["bench"] for sset in sizes}
        wl = workload_from_problem(
            problem, strict, name=name, sizes=sizes, domains=domains, verdict_note=note
        )
    text = WORKLOAD_PY.format(
        name=wl.name, strict=strict, sizes=repr(sizes), domains=repr(domains), note=note
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem, out_dir / "problem.py")
    (out_dir / "workload.py").write_text(text)
    if kernel is not None:
        (out_dir / "solution.cu").write_text(kernel)
    return wl
