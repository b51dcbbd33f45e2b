"""The workload spec: what a kernel must compute, on which shapes, to which tolerance.

A workload folder holds `workload.py` defining `WORKLOAD = Workload(...)`. Every kernel variant of
that workload exports `extern "C" void launch(<args in WORKLOAD.args order>, cudaStream_t)`.
The reference (a torch function) is the correctness oracle; the gate binds symbolic shapes per
shape set, makes random signed inputs, and compares with per-dtype tolerances.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import math
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from klineage.domains import Domain
from klineage.errors import WorkloadError

#: dtype names accepted in specs -> (torch dtype, C type used by launchers)
DTYPES: dict[str, tuple[torch.dtype, str]] = {
    "float32": (torch.float32, "float"),
    "float64": (torch.float64, "double"),
    "float16": (torch.float16, "__half"),
    "bfloat16": (torch.bfloat16, "__nv_bfloat16"),
    "int8": (torch.int8, "int8_t"),
    "uint8": (torch.uint8, "uint8_t"),
    "int32": (torch.int32, "int"),
    "int64": (torch.int64, "long long"),
    "bool": (torch.bool, "bool"),
}
SCALAR_DTYPES = ("int32", "int64", "float32", "float64")
ROLES = ("in", "out", "inout", "scratch")
SHAPE_SETS = ("test", "emu", "bench")
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
Dim = int | str


@dataclass(frozen=True)
class Tolerance:
    """Pass when |got - want| <= atol + rtol * |want| elementwise (`elementwise`), or when
    ||got - want||_F <= rtol * ||want||_F (`frobenius`, for long dot products such as GEMM).

    `accumulation` (give `length`, the reduced length: a symbol or arithmetic on symbols) adds
    the rounding a sum of `length` terms may gather in any order, elementwise:
    |got - want| <= atol + rtol * |want| + 4 * sqrt(length) * u * S, where u is the unit roundoff
    of the output's dtype (fp32: 2**-24) and S is the reference evaluated on the absolute values
    of the inputs (for a sum, the sum of magnitudes; for a dot product, sum |x_i * w_i|): the
    probabilistic bound of Higham and Mary (2019). Use it for outputs that sum many terms in an
    order the kernel is free to choose (row sums, norms).
    """

    atol: float
    rtol: float
    metric: str = "elementwise"
    length: Dim | None = None

    @classmethod
    def accumulation(cls, length: Dim, atol: float = 1e-5, rtol: float = 1.3e-6) -> Tolerance:
        """The accumulation-aware bound for outputs that each sum `length` terms."""
        return cls(atol, rtol, "accumulation", length)


METRICS = ("elementwise", "frobenius", "accumulation")


#: Defaults follow torch.testing.assert_close for each dtype; integers and bool are exact.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(1e-5, 1.3e-6),
    "float64": Tolerance(1e-7, 1e-7),
    "float16": Tolerance(1e-5, 1e-3),
    "bfloat16": Tolerance(1e-5, 1.6e-2),
    "int8": Tolerance(0, 0),
    "uint8": Tolerance(0, 0),
    "int32": Tolerance(0, 0),
    "int64": Tolerance(0, 0),
    "bool": Tolerance(0, 0),
}

InitFn = Callable[[tuple[int, ...], torch.dtype, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class Tensor:
    """A tensor argument. `shape` holds ints, symbols ("N") or arithmetic on symbols ("N//4").

    role: `in` (read only: mutation is a rejection), `out` (poisoned before launch, every element
    must be written), `inout` (given inputs, compared after), `scratch` (allocated and poisoned by
    the gate, never compared). `domain` says which values the operator is defined on (class
    indices, probabilities, indptr offsets: klineage/domains.py); `init`, a function, replaces
    both; without either, inputs are random and signed.
    """

    name: str
    shape: tuple[Dim, ...]
    dtype: str = "float32"
    role: str = "in"
    init: InitFn | None = None
    tolerance: Tolerance | None = None
    domain: Domain | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype][0]

    @property
    def c_type(self) -> str:
        return DTYPES[self.dtype][1]

    @property
    def is_read(self) -> bool:
        return self.role in ("in", "inout")

    @property
    def is_checked(self) -> bool:
        return self.role in ("out", "inout")


@dataclass(frozen=True)
class Scalar:
    """A scalar argument: a constant `value`, or (value None) the shape symbol of the same name,
    or `expr`, arithmetic on shape symbols."""

    name: str
    dtype: str = "int32"
    value: int | float | None = None
    expr: str | None = None

    @property
    def c_type(self) -> str:
        return {"int32": "int", "int64": "long long", "float32": "float", "float64": "double"}[self.dtype]


Arg = Tensor | Scalar


def default_init(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random signed values: N(0, 1) for floats, uniform in [-64, 64) for signed integers."""
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=gen, dtype=torch.int64).to(dtype)
    return torch.randint(-64, 64, shape, generator=gen, dtype=torch.int64).to(dtype)


_ALLOWED_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
    ast.USub,
    ast.Div,
    ast.Pow,
)


def eval_dim(dim: Dim, bindings: Mapping[str, int | float]) -> int | float:
    """Evaluate an int, a symbol or small arithmetic on symbols; nothing else is evaluated."""
    if isinstance(dim, bool):
        raise ValueError(f"bad dimension {dim!r}")
    if isinstance(dim, int | float):
        return dim
    tree = ast.parse(str(dim), mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"unsupported syntax in {dim!r}")
        if isinstance(node, ast.Name) and node.id not in bindings:
            raise KeyError(node.id)
    return eval(compile(tree, "<dim>", "eval"), {"__builtins__": {}}, dict(bindings))  # noqa: S307


def symbols_of(dim: Dim) -> set[str]:
    if isinstance(dim, int | float):
        return set()
    return {n.id for n in ast.walk(ast.parse(str(dim), mode="eval")) if isinstance(n, ast.Name)}


@dataclass
class Workload:
    """What a kernel computes. See module docstring; DESIGN.md 'Workloads'."""

    name: str
    args: Sequence[Arg]
    reference: Callable[..., Any]
    shapes: Mapping[str, Sequence[Mapping[str, int]]]
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    divisible_by: Mapping[str, int] = field(default_factory=dict)
    description: str = ""
    vendor: Callable[..., Any] | None = None
    flops: Callable[[Mapping[str, int]], float] | None = None
    #: the fewest bytes any correct kernel must move, where "every input read once" overcounts
    #: (a gather reads only the rows it is asked for): the speed-of-light floor must stay a floor
    min_bytes: Callable[[Mapping[str, int]], float] | None = None
    nondeterminism_tolerated: bool = False
    source_dir: Path | None = None
    #: said in every verdict on this workload (e.g. "judged at the problem's own sizes only")
    verdict_note: str = ""

    # ---- argument views -------------------------------------------------------------------
    @property
    def tensors(self) -> list[Tensor]:
        return [a for a in self.args if isinstance(a, Tensor)]

    @property
    def scalars(self) -> list[Scalar]:
        return [a for a in self.args if isinstance(a, Scalar)]

    @property
    def outputs(self) -> list[Tensor]:
        return [t for t in self.tensors if t.is_checked]

    @property
    def dtypes(self) -> list[str]:
        return sorted({t.dtype for t in self.tensors})

    def tolerance_for(self, t: Tensor) -> Tolerance:
        if t.tolerance is not None:
            return t.tolerance
        return self.tolerances.get(t.dtype, DEFAULT_TOLERANCES[t.dtype])

    # ---- shapes ---------------------------------------------------------------------------
    def shape_set(self, name: str) -> list[dict[str, int]]:
        """The bindings of a shape set; `emu` falls back to `test` when not declared."""
        if name == "emu" and not self.shapes.get("emu"):
            name = "test"
        return [dict(s) for s in self.shapes.get(name, [])]

    def tensor_shape(self, t: Tensor, bindings: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(int(eval_dim(d, bindings)) for d in t.shape)

    def scalar_value(self, s: Scalar, bindings: Mapping[str, int]) -> int | float:
        if s.value is not None:
            return s.value
        if s.expr is not None:
            return eval_dim(s.expr, bindings)
        return bindings[s.name]

    def bytes_moved(self, bindings: Mapping[str, int]) -> int:
        """Fewest bytes a kernel must move: read every input once, write every output once, unless
        the workload says fewer (`min_bytes`)."""
        if self.min_bytes is not None:
            return int(self.min_bytes(bindings))
        total = 0
        for t in self.tensors:
            n = (
                math.prod(self.tensor_shape(t, bindings))
                * torch.empty((), dtype=t.torch_dtype).element_size()
            )
            total += n * (int(t.is_read) + int(t.is_checked))
        return total

    # ---- inputs and reference -------------------------------------------------------------
    def make_inputs(self, bindings: Mapping[str, int], seed: int) -> dict[str, Any]:
        """Fresh random inputs (CPU) for every `in`/`inout` tensor and the scalar values."""
        gen = torch.Generator().manual_seed(seed)
        values: dict[str, Any] = {}
        for a in self.args:
            if isinstance(a, Scalar):
                values[a.name] = self.scalar_value(a, bindings)
            elif a.is_read:
                shape = self.tensor_shape(a, bindings)
                x = self.draw_input(a, shape, gen, bindings)
                if tuple(x.shape) != shape or x.dtype != a.torch_dtype:
                    raise WorkloadError(
                        f"{self.name}: init of '{a.name}' gave {tuple(x.shape)} {x.dtype}, "
                        f"expected {shape} {a.torch_dtype}"
                    )
                values[a.name] = x.contiguous()
        return values

    def draw_input(
        self, a: Tensor, shape: tuple[int, ...], gen: torch.Generator, bindings: Mapping[str, int]
    ) -> torch.Tensor:
        """One input's values: its `init`, else its value domain, else random signed values."""
        if a.init is not None:
            return a.init(shape, a.torch_dtype, gen)
        if a.domain is not None:
            try:
                return a.domain.draw(shape, a.torch_dtype, gen, bindings)
            except (ValueError, KeyError, ZeroDivisionError, RuntimeError) as e:
                raise WorkloadError(f"{self.name}: domain of '{a.name}' at {dict(bindings)}: {e}") from None
        return default_init(shape, a.torch_dtype, gen)

    def read_kwargs(self, values: Mapping[str, Any], clone: bool = False) -> dict[str, Any]:
        """The keyword arguments of the reference and the vendor function: every scalar and every
        tensor the kernel reads, taken from `values` (copies of the tensors with `clone`)."""
        return {
            a.name: (values[a.name].clone() if clone and isinstance(a, Tensor) else values[a.name])
            for a in self.args
            if isinstance(a, Scalar) or a.is_read
        }

    def run_reference(self, inputs: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """Call the reference on copies of the inputs; name its results by the checked tensors."""
        result = self.reference(**self.read_kwargs(inputs, clone=True))
        outs = self.outputs
        if isinstance(result, Mapping):
            got = dict(result)
        elif isinstance(result, torch.Tensor):
            got = {outs[0].name: result} if len(outs) == 1 else {}
        else:
            got = dict(zip([t.name for t in outs], result, strict=False))
        missing = [t.name for t in outs if t.name not in got]
        if missing:
            raise WorkloadError(f"{self.name}: reference returned no value for {', '.join(missing)}")
        return {t.name: got[t.name] for t in outs}

    # ---- identity -------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """Hash of the workload file (or spec) — part of every gate cache key. Other Python files
        beside workload.py count too: it may import them (an imported KernelBench problem.py holds
        the reference), and a changed reference must not reuse cached verdicts."""
        h = hashlib.sha256()
        if self.source_dir is not None and (self.source_dir / "workload.py").exists():
            h.update((self.source_dir / "workload.py").read_bytes())
            for extra in sorted(self.source_dir.glob("*.py")):
                if extra.name != "workload.py":
                    h.update(extra.name.encode() + b"\0" + extra.read_bytes())
        else:
            h.update(repr((self.name, [repr(a) for a in self.args], dict(self.shapes))).encode())
        return h.hexdigest()[:16]

    def c_signature(self) -> str:
        """The launcher signature every variant must export."""
        parts = []
        for a in self.args:
            if isinstance(a, Tensor):
                const = "const " if a.role == "in" else ""
                parts.append(f"{const}{a.c_type}* {a.name}")
            else:
                parts.append(f"{a.c_type} {a.name}")
        parts.append("cudaStream_t stream")
        return f'extern "C" void launch({", ".join(parts)})'

    # ---- validation -----------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Every problem with the spec, one line each (empty when valid)."""
        out: list[str] = []
        if not isinstance(self.name, str) or not self.name:
            out.append("name must be a non-empty string")
        if not callable(self.reference):
            out.append("reference is missing or not callable")
        names = [getattr(a, "name", None) for a in self.args]
        for n in sorted({n for n in names if names.count(n) > 1}, key=str):
            out.append(f"argument '{n}' declared twice")
        symbols: set[str] = set()
        for a in self.args:
            if isinstance(a, Tensor):
                if a.dtype not in DTYPES:
                    out.append(f"tensor '{a.name}': unknown dtype '{a.dtype}' (known: {', '.join(DTYPES)})")
                if a.role not in ROLES:
                    out.append(f"tensor '{a.name}': unknown role '{a.role}' (known: {', '.join(ROLES)})")
                if a.domain is not None:
                    out += a.domain.problems(a.name, a.dtype)
                    try:
                        symbols |= a.domain.symbols()
                    except SyntaxError:
                        out.append(f"tensor '{a.name}': bad bound in its domain {a.domain}")
                for d in a.shape:
                    try:
                        symbols |= symbols_of(d)
                    except SyntaxError:
                        out.append(f"tensor '{a.name}': bad dimension {d!r}")
            elif isinstance(a, Scalar):
                if a.dtype not in SCALAR_DTYPES:
                    out.append(
                        f"scalar '{a.name}': unknown dtype '{a.dtype}' (known: {', '.join(SCALAR_DTYPES)})"
                    )
                if a.value is None:
                    symbols |= symbols_of(a.expr) if a.expr else {a.name}
            else:
                out.append(f"argument {a!r} is neither Tensor nor Scalar")
        if not any(isinstance(a, Tensor) and a.is_checked for a in self.args):
            out.append("no output: at least one tensor must have role 'out' or 'inout'")
        for sset in self.shapes:
            if sset not in SHAPE_SETS:
                out.append(f"unknown shape set '{sset}' (known: {', '.join(SHAPE_SETS)})")
        if not self.shapes.get("test"):
            out.append("no test shapes: shapes['test'] must list at least one binding")
        for sset, bindings_list in self.shapes.items():
            for i, b in enumerate(bindings_list):
                unbound = sorted(symbols - set(b))
                if unbound:
                    out.append(f"shape symbol {', '.join(unbound)} unbound in shapes['{sset}'][{i}]")
                    continue
                for sym, k in self.divisible_by.items():
                    if sym in b and b[sym] % k:
                        out.append(
                            f"shapes['{sset}'][{i}]: {sym}={b[sym]} breaks the precondition {sym} % {k} == 0"
                        )
                for t in self.tensors:
                    try:
                        if any(d <= 0 for d in self.tensor_shape(t, b)):
                            out.append(f"shapes['{sset}'][{i}]: tensor '{t.name}' has an empty dimension")
                    except (KeyError, ValueError, SyntaxError, ZeroDivisionError) as e:
                        out.append(f"shapes['{sset}'][{i}]: tensor '{t.name}' shape: {e}")
        for dt, tol in self.tolerances.items():
            if dt not in DTYPES:
                out.append(f"tolerance for unknown dtype '{dt}'")
            elif not isinstance(tol, Tolerance):
                out.append(f"tolerance for '{dt}' must be a Tolerance")
        tols = [(f"tolerance for '{dt}'", t) for dt, t in self.tolerances.items() if isinstance(t, Tolerance)]
        tols += [
            (f"tensor '{t.name}' tolerance", t.tolerance) for t in self.tensors if t.tolerance is not None
        ]
        for what, tol in tols:
            out += _tolerance_problems(what, tol, symbols)
        return out


def _tolerance_problems(what: str, tol: Tolerance, symbols: set[str]) -> list[str]:
    if tol.metric not in METRICS:
        return [f"{what}: unknown metric '{tol.metric}' (known: {', '.join(METRICS)})"]
    if tol.metric != "accumulation":
        return []
    if tol.length is None:
        return [f"{what}: metric 'accumulation' needs length= (the reduced length, e.g. \"N\")"]
    try:
        unbound = sorted(symbols_of(tol.length) - symbols)
    except SyntaxError:
        return [f"{what}: bad length {tol.length!r}"]
    return (
        [f"{what}: length {tol.length!r} names {', '.join(unbound)}, not a shape symbol"] if unbound else []
    )


#: one user file imported at a time (mining loads workloads from several threads); re-entrant, so
#: a user file may itself import another through this function
_IMPORT_LOCK = threading.RLock()


def import_user_file(path: Path, label: str) -> Any:
    """Import a user's Python file under a private module name; anything it raises becomes one
    WorkloadError line naming `file:line` inside that file where possible."""
    mod_name = f"_klineage_user_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _IMPORT_LOCK:  # the module sits in sys.modules under a shared name while it runs
        try:
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
        except Exception as e:  # the user's file: report where it failed, in one line
            tb = traceback.extract_tb(e.__traceback__)
            where = next(
                (f"{f.filename}:{f.lineno}" for f in reversed(tb) if f.filename == str(path)), str(path)
            )
            raise WorkloadError(f"{where}: {label} raised {type(e).__name__}: {e}") from None
        finally:
            sys.modules.pop(mod_name, None)
    return module


def load_workload(folder: str | Path) -> Workload:
    """Import `folder/workload.py` and validate its WORKLOAD; raise WorkloadError naming every problem."""
    folder = Path(folder)
    path = folder / "workload.py"
    if not folder.is_dir():
        raise WorkloadError(f"{folder}: not a directory")
    if not path.is_file():
        raise WorkloadError(f"{folder}: no workload.py in this folder")
    module = import_user_file(path, "workload.py")
    wl = getattr(module, "WORKLOAD", None)
    if wl is None:
        raise WorkloadError(f"{path}: defines no WORKLOAD")
    if not isinstance(wl, Workload):
        raise WorkloadError(f"{path}: WORKLOAD is a {type(wl).__name__}, not klineage.Workload")
    wl.source_dir = folder.resolve()
    problems = wl.problems()
    if problems:
        raise WorkloadError(f"{path}: " + "; ".join(problems))
    return wl
