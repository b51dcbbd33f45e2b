"""FlashInfer-Bench / FlashInfer-Trace interop: a Definition JSON (axes, inputs, outputs, a
`reference` whose `run` is the oracle) with its workloads JSONL loads as a KLineage workload, and
a kernel exports as a Solution JSON.

Launcher convention for a definition: inputs in definition order, then outputs, then one int64
per `var` axis (const axes are compile-time facts of the definition), then the stream.

Workload inputs are `random`, `scalar` or `safetensors` (`path`, relative to the dataset root, the
folder above `workloads/`, or absolute; `tensor_key`). A record with safetensors inputs becomes a
shape-set entry of its own: its binding carries `FIXED` (an index into `fixed_inputs`) and those
inputs are the recorded tensors, checked against the definition's shapes and dtypes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from klineage.errors import WorkloadError
from klineage.interop.checks import reference_problems
from klineage.interop.fi_constraints import Rules, read_rules
from klineage.workload import DTYPES, Scalar, Tensor, Tolerance, Workload

#: Axis values tried for `emu` (CPU emulator) and odd `test` shapes, capped by observed values.
EMU_VALUES = (3, 17)
TEST_VALUES = (1, 37, 130)
#: Key of a shape binding that names its recorded (safetensors) inputs: an index into `fixed_inputs`.
FIXED = "@fixed"
#: Records with safetensors inputs taken per shape set (smallest first); `emu` takes only records
#: whose tensors hold at most EMU_MAX_ELEMENTS elements in all (the CPU emulator is slow).
FIXED_TEST = 3
FIXED_EMU = 2
EMU_MAX_ELEMENTS = 1 << 16


def _load_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(doc, dict):
        raise WorkloadError(f"{path}: a definition must be a JSON object")
    return doc


def _records(path: Path | None, definition: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, `workload` object) of every record of a FlashInfer-Trace JSONL for this definition."""
    if path is None or not path.exists():
        return []
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise WorkloadError(f"{path}:{i}: not valid JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise WorkloadError(f"{path}:{i}: a workload record must be a JSON object")
        if rec.get("definition", definition) != definition:
            continue
        wl = rec.get("workload", rec)
        for name, spec in (wl.get("inputs") or {}).items():
            kind = (spec or {}).get("type", "random")
            if kind not in ("random", "scalar", "safetensors"):
                raise WorkloadError(
                    f"{path}:{i}: input '{name}' has type '{kind}' (known: random, scalar, safetensors)"
                )
            if kind == "safetensors":
                for key in ("path", "tensor_key"):
                    if not isinstance(spec.get(key), str) or not spec[key]:
                        raise WorkloadError(f"{path}:{i}: safetensors input '{name}' has no '{key}'")
        out.append((i, wl))
    return out


def read_workloads(path: Path | None, definition: str) -> list[dict[str, Any]]:
    """The `workload` objects of a FlashInfer-Trace JSONL for this definition."""
    return [wl for _, wl in _records(path, definition)]


def dataset_root(workloads_path: Path | None) -> Path | None:
    """The folder safetensors paths are relative to: the one holding `workloads/` (a FlashInfer-Trace
    dataset), else the JSONL's own folder."""
    if workloads_path is None:
        return None
    folder = workloads_path.resolve().parent
    for p in (folder, *folder.parents):
        if p.name == "workloads":
            return p.parent
    return folder


@dataclass(frozen=True)
class FixedInput:
    """One recorded input: where the record names it and the file it was read from."""

    line: int
    input: str
    path: str  # as written in the record
    file: Path  # resolved
    tensor_key: str


def _has_safetensors(wl: Mapping[str, Any]) -> bool:
    return any((spec or {}).get("type") == "safetensors" for spec in (wl.get("inputs") or {}).values())


def _load_fixed(
    wl: Mapping[str, Any],
    line: int,
    where: str,
    root: Path | None,
    inputs: Mapping[str, Tensor],
    bindings: Mapping[str, int],
) -> tuple[dict[str, torch.Tensor], list[FixedInput]]:
    """The record's safetensors inputs, checked against the definition's shapes and dtypes."""
    from safetensors import SafetensorError, safe_open

    tensors: dict[str, torch.Tensor] = {}
    used: list[FixedInput] = []
    for name, spec in (wl.get("inputs") or {}).items():
        if (spec or {}).get("type") != "safetensors":
            continue
        at = f"{where}:{line}: input '{name}'"
        if name not in inputs:
            raise WorkloadError(f"{at}: the definition has no input of that name")
        arg = inputs[name]
        file = Path(spec["path"])
        if not file.is_absolute():
            file = (root or Path.cwd()) / file
        if not file.is_file():
            raise WorkloadError(f"{at}: safetensors file {file} not found")
        key = spec["tensor_key"]
        try:
            with safe_open(str(file), framework="pt") as f:
                if key not in f.keys():  # noqa: SIM118 - safe_open has keys(), not __contains__
                    raise WorkloadError(
                        f"{at}: {file} holds no tensor '{key}' (it holds {', '.join(sorted(f.keys())) or 'none'})"
                    )
                t = f.get_tensor(key)
        except (SafetensorError, OSError, ValueError) as e:
            raise WorkloadError(f"{at}: {file} is not a readable safetensors file ({e})") from None
        want = _shape(arg, bindings)
        if t.dtype != arg.torch_dtype:
            got = next((k for k, (dt, _) in DTYPES.items() if dt == t.dtype), str(t.dtype))
            raise WorkloadError(f"{at}: tensor '{key}' in {file} is {got}; the definition says {arg.dtype}")
        if tuple(t.shape) != want:
            raise WorkloadError(
                f"{at}: tensor '{key}' in {file} has shape {list(t.shape)}; the definition at axes "
                f"{dict(bindings)} says {list(want)}"
            )
        tensors[name] = t.contiguous()
        used.append(FixedInput(line, name, spec["path"], file, key))
    return tensors, used


def _shape(t: Tensor, bindings: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(int(d) if isinstance(d, int) else int(bindings[d]) for d in t.shape)


@dataclass
class TraceWorkload(Workload):
    """A Workload whose shape bindings may name recorded inputs (`FIXED` -> `fixed_inputs[i]`);
    `data_files` (definition, JSONL, tensor files) enter the fingerprint, hence the gate cache key."""

    fixed_inputs: Sequence[Mapping[str, torch.Tensor]] = field(default_factory=list)
    data_files: Sequence[Path] = field(default_factory=list)
    fixed_sources: Sequence[FixedInput] = field(default_factory=list)

    def make_inputs(self, bindings: Mapping[str, int], seed: int) -> dict[str, Any]:
        values = super().make_inputs(bindings, seed)
        if FIXED in bindings:
            for name, t in self.fixed_inputs[int(bindings[FIXED])].items():
                values[name] = t.clone()
        return values

    def fingerprint(self) -> str:
        h = hashlib.sha256(super().fingerprint().encode())
        for path in self.data_files:
            h.update(path.name.encode() + b"\0")
            h.update(path.read_bytes() if path.is_file() else b"<missing>")
        return h.hexdigest()[:16]

    def problems(self) -> list[str]:
        out = super().problems()
        by_name = {t.name: t for t in self.tensors}
        for sset, bindings_list in self.shapes.items():
            for i, b in enumerate(bindings_list):
                if FIXED not in b:
                    continue
                k = b[FIXED]
                if not isinstance(k, int) or not 0 <= k < len(self.fixed_inputs):
                    out.append(f"shapes['{sset}'][{i}]: {FIXED}={k!r} names no recorded inputs")
                    continue
                for name, t in self.fixed_inputs[k].items():
                    arg = by_name.get(name)
                    if arg is None or not arg.is_read:
                        out.append(f"shapes['{sset}'][{i}]: recorded '{name}' is not an input")
                    elif tuple(t.shape) != self.tensor_shape(arg, b) or t.dtype != arg.torch_dtype:
                        out.append(
                            f"shapes['{sset}'][{i}]: recorded '{name}' does not fit its shape or dtype"
                        )
        return out


def _reference(code: str, where: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    try:
        exec(compile(code, f"{where}:reference", "exec"), namespace)  # noqa: S102 - the definition's own oracle
    except Exception as e:
        raise WorkloadError(f"{where}: reference does not run: {type(e).__name__}: {e}") from None
    run = namespace.get("run")
    if not callable(run):
        raise WorkloadError(f"{where}: reference defines no run() function")
    return run


def _run_params(run: Callable[..., Any]) -> list[str] | None:
    """run()'s positional parameter names, or None when it takes *args."""
    import inspect

    try:
        ps = inspect.signature(run).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in ps):
        return None
    return [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def workload_from_definition(
    definition_path: Path, workloads_path: Path | None = None, root: Path | None = None
) -> TraceWorkload:
    """Build the Workload of a FlashInfer-Bench definition (and its workloads as shape sets).
    `root`: the folder relative safetensors paths start from (default: `dataset_root`)."""
    where = str(definition_path)
    d = _load_json(definition_path)
    missing = [k for k in ("name", "axes", "inputs", "outputs", "reference") if k not in d]
    if missing:
        raise WorkloadError(f"{where}: definition lacks {', '.join(missing)}")
    axes: Mapping[str, Any] = d["axes"]
    const = {a: int(s["value"]) for a, s in axes.items() if s.get("type") == "const"}
    var = [a for a, s in axes.items() if s.get("type") != "const"]
    rules = read_rules(d.get("constraints") or [], axes, d["inputs"], where)
    used: set[str] = set()
    args: list[Tensor | Scalar] = []
    for role, group in (("in", d["inputs"]), ("out", d["outputs"])):
        for name, spec in group.items():
            dtype = spec.get("dtype", "float32")
            if dtype not in DTYPES:
                raise WorkloadError(
                    f"{where}: {name}: unsupported dtype '{dtype}' (known: {', '.join(DTYPES)})"
                )
            shape = tuple(spec.get("shape") or ())
            for dim in shape:
                if isinstance(dim, str) and dim not in axes:
                    raise WorkloadError(
                        f"{where}: {name}: shape names axis '{dim}' that the definition does not declare"
                    )
            used |= {dim for dim in shape if isinstance(dim, str)}
            args.append(
                Tensor(
                    name,
                    tuple(const.get(x, x) if isinstance(x, str) else x for x in shape),
                    dtype,
                    role=role,
                    domain=rules.domains.get(name) if role == "in" else None,
                )
            )
    unused = [a for a in axes if a not in used]
    if unused:
        raise WorkloadError(f"{where}: axis {', '.join(unused)} is used by no input or output")
    args += [Scalar(a, "int64") for a in var]
    run = _reference(d["reference"], where)
    in_names = list(d["inputs"])
    out_names = list(d["outputs"])

    params = _run_params(run)
    if params is not None and len(params) != len(in_names) and not set(params) <= set(in_names):
        raise WorkloadError(
            f"{where}: reference run() takes {len(params)} arguments ({', '.join(params)}); the definition "
            f"lists {len(in_names)} inputs ({', '.join(in_names)})"
        )
    by_name = params is not None and len(params) != len(in_names)  # run() reads some inputs, by name

    def reference(**kw: Any) -> dict[str, torch.Tensor]:
        result = run(**{n: kw[n] for n in params}) if by_name and params else run(*[kw[n] for n in in_names])
        if isinstance(result, Mapping):
            return dict(result)
        result = result if isinstance(result, tuple | list) else (result,)
        return dict(zip(out_names, result, strict=False))

    records = _records(workloads_path, d["name"])
    jsonl = str(workloads_path)
    for line, wl in records:
        lacking = [a for a in var if a not in (wl.get("axes") or {})]
        if lacking and _has_safetensors(wl):
            raise WorkloadError(f"{jsonl}:{line}: workload gives no value for axis {', '.join(lacking)}")
    tensors = [a for a in args if isinstance(a, Tensor)]

    def elements(b: Mapping[str, int]) -> int:
        return sum(math.prod(_shape(t, b)) for t in tensors)

    shapes, chosen = _shape_sets(var, records, elements, rules)
    root = root if root is not None else dataset_root(workloads_path)
    inputs = {t.name: t for t in tensors if t.role == "in"}
    fixed: list[dict[str, torch.Tensor]] = []
    sources: list[FixedInput] = []
    for line, wl in chosen:
        b = {a: int(wl["axes"][a]) for a in var}
        got, used_files = _load_fixed(wl, line, jsonl, root, inputs, b)
        fixed.append(got)
        sources += used_files
    data = [definition_path] + (
        [workloads_path] if workloads_path is not None and workloads_path.exists() else []
    )
    return TraceWorkload(
        name=d["name"],
        description=d.get("description", ""),
        args=args,
        reference=reference,
        shapes=shapes,
        tolerances={"bfloat16": Tolerance(1e-2, 1.6e-2), "float16": Tolerance(1e-3, 1e-3)},
        fixed_inputs=fixed,
        data_files=data + list(dict.fromkeys(s.file for s in sources)),
        fixed_sources=sources,
    )


def _shape_sets(
    var: list[str],
    records: list[tuple[int, dict[str, Any]]],
    elements: Callable[[Mapping[str, int]], int],
    rules: Rules,
) -> tuple[dict[str, list[dict[str, int]]], list[tuple[int, dict[str, Any]]]]:
    """Shape sets, and the records with safetensors inputs they use (`FIXED` indexes this list).
    Random records give axis values only; each recorded one is an entry of its own. Synthetic
    entries give every free axis one value and compute the derived ones (`rules`)."""
    complete = [(line, wl) for line, wl in records if all(a in (wl.get("axes") or {}) for a in var)]
    axes_of = lambda wl: {a: int(wl["axes"][a]) for a in var}  # noqa: E731
    size = lambda b: sum(b.values())  # noqa: E731
    seen = [axes_of(wl) for _, wl in complete if not _has_safetensors(wl)]
    recorded = sorted(
        (r for r in complete if _has_safetensors(r[1])), key=lambda r: (size(axes_of(r[1])), r[0])
    )
    chosen: dict[int, int] = {}  # line -> index into the fixed inputs

    def entry(line: int, wl: dict[str, Any]) -> dict[str, int]:
        return {**axes_of(wl), FIXED: chosen.setdefault(line, len(chosen))}

    fixed_test = [entry(*r) for r in recorded[:FIXED_TEST]]
    fixed_emu = [
        entry(*r) for r in [r for r in recorded if elements(axes_of(r[1])) <= EMU_MAX_ELEMENTS][:FIXED_EMU]
    ]
    everything = [(size(b), b) for b in seen] + [(size(axes_of(wl)), (line, wl)) for line, wl in recorded]
    bench = [b if isinstance(b, dict) else entry(*b) for _, b in sorted(everything, key=lambda x: -x[0])[:2]]
    bench = bench or [rules.bind({a: 4096 for a in var})]
    test = [rules.bind(_spread(var, v)) for v in TEST_VALUES] + sorted(seen, key=size)[:2] + fixed_test
    emu = [rules.bind(_spread(var, v)) for v in EMU_VALUES] + fixed_emu
    uniq = lambda xs: [dict(t) for t in dict.fromkeys(tuple(sorted(x.items())) for x in xs)]  # noqa: E731
    return {"test": uniq(test), "emu": uniq(emu), "bench": uniq(bench)}, _in_order(chosen, records)


def _spread(var: list[str], v: int) -> dict[str, int]:
    """One synthetic binding: the free axes at v, v + v//2 + 1, ... (distinct, so that a kernel
    that confuses two axes, e.g. pages with indices, is not right by coincidence)."""
    return {a: v + i * (v // 2 + 1) for i, a in enumerate(var)}


def _in_order(
    chosen: Mapping[int, int], records: list[tuple[int, dict[str, Any]]]
) -> list[tuple[int, dict[str, Any]]]:
    by_line = dict(records)
    return [(line, by_line[line]) for line, _ in sorted(chosen.items(), key=lambda x: x[1])]


WORKLOAD_PY = '''"""FlashInfer-Bench definition {name}, imported by `klineage import flashinfer`."""

from pathlib import Path

from klineage.interop.flashinfer import workload_from_definition

_HERE = Path(__file__).resolve().parent
WORKLOAD = workload_from_definition(_HERE / "definition.json", _HERE / "workloads.jsonl", root=_HERE)
'''


def import_definition(definition_path: Path, out_dir: Path, workloads_path: Path | None = None) -> Workload:
    """Write a workload folder (definition.json, workloads.jsonl, workload.py, the safetensors files
    its shape sets read, at their dataset-relative paths); validate it first."""
    wl = workload_from_definition(definition_path, workloads_path)
    problems = wl.problems() or reference_problems(wl, ("emu",))
    if problems:
        raise WorkloadError(f"{definition_path}: " + "; ".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(definition_path, out_dir / "definition.json")
    if workloads_path is not None and workloads_path.exists():
        lines = workloads_path.read_text().splitlines()
        moved: dict[int, dict[str, str]] = {}  # line -> input -> its path inside the folder
        for src in wl.fixed_sources:
            rel = Path(src.path)
            if rel.is_absolute() or ".." in rel.parts:  # outside the dataset: a copy under blob/external
                digest = hashlib.sha256(str(src.file).encode()).hexdigest()[:12]
                rel = Path("blob", "external", f"{digest}-{src.file.name}")
                moved.setdefault(src.line, {})[src.input] = rel.as_posix()
            dst = out_dir / rel
            if not (dst.exists() and dst.resolve() == src.file.resolve()):
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src.file, dst)
        for line, paths in moved.items():
            rec = json.loads(lines[line - 1])
            for name, path in paths.items():
                rec.get("workload", rec)["inputs"][name]["path"] = path
            lines[line - 1] = json.dumps(rec)
        (out_dir / "workloads.jsonl").write_text("\n".join(lines) + "\n")
    (out_dir / "workload.py").write_text(WORKLOAD_PY.format(name=wl.name))
    return wl


def export_solution(
    kernel_text: str, workload: Workload, name: str, author: str = "klineage", target: str = "H200"
) -> dict[str, Any]:
    """A Solution JSON: our launcher file as the source, `launch` as the entry point."""
    if not re.search(r'extern\s+"C"', kernel_text):
        raise WorkloadError(f'{name}: the kernel has no extern "C" launcher to export')
    return {
        "name": name,
        "definition": workload.name,
        "author": author,
        "spec": {
            "language": "cuda",
            "target_hardware": [target],
            "entry_point": "kernel.cu::launch",
            "binding": "c_abi",
            "signature": workload.c_signature(),
        },
        "sources": [{"path": "kernel.cu", "content": kernel_text}],
        "description": f"Exported by KLineage for definition {workload.name}; launcher: {workload.c_signature()}",
    }


def kernel_from_solution(path: Path) -> str:
    """The kernel.cu of a Solution JSON (ours, or any whose entry point is a C `launch`)."""
    doc = _load_json(path)
    sources = {s.get("path"): s.get("content", "") for s in doc.get("sources", []) if isinstance(s, dict)}
    entry = str(doc.get("spec", {}).get("entry_point", ""))
    file = entry.split("::")[0] if "::" in entry else "kernel.cu"
    if file not in sources:
        raise WorkloadError(
            f"{path}: entry point '{entry}' names no file among its sources ({', '.join(sources) or 'none'})"
        )
    text = sources[file]
    binding = str(doc.get("spec", {}).get("binding", ""))
    if "tvm" in binding.lower() or "TVM_FFI_DLL_EXPORT" in text or "tvm::ffi::" in text:
        raise WorkloadError(
            f"{path}: entry point '{entry}' is a TVM-FFI function (tvm::ffi::TensorView arguments, exported with "
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC), not the C launcher `launch`; it cannot be wrapped mechanically"
        )
    if not entry.endswith("::launch"):
        raise WorkloadError(
            f"{path}: entry point '{entry}' is a torch binding, not the C launcher `launch`; it cannot be wrapped mechanically"
        )
    return sources[file]
