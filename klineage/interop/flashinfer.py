"""FlashInfer-Bench / FlashInfer-Trace interop: a Definition JSON (axes, inputs, outputs, a
`reference` whose `run` is the oracle) with its workloads JSONL loads as a KLineage workload, and
a kernel exports as a Solution JSON.

Launcher convention for a definition: inputs in definition order, then outputs, then one int64
per `var` axis (const axes are compile-time facts of the definition), then the stream.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from klineage.errors import WorkloadError
from klineage.workload import DTYPES, Scalar, Tensor, Tolerance, Workload

#: Axis values tried for `emu` (CPU emulator) and odd `test` shapes, capped by observed values.
EMU_VALUES = (3, 17)
TEST_VALUES = (1, 37, 130)


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


def read_workloads(path: Path | None, definition: str) -> list[dict[str, Any]]:
    """The `workload` objects of a FlashInfer-Trace JSONL for this definition."""
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
        if rec.get("definition", definition) != definition:
            continue
        wl = rec.get("workload", rec)
        for name, spec in (wl.get("inputs") or {}).items():
            kind = (spec or {}).get("type", "random")
            if kind not in ("random", "scalar"):
                raise WorkloadError(
                    f"{path}:{i}: input '{name}' has type '{kind}'; only 'random' and 'scalar' inputs are supported "
                    "(safetensors inputs need the tensors beside the file)"
                )
        out.append(wl)
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


def workload_from_definition(definition_path: Path, workloads_path: Path | None = None) -> Workload:
    """Build the Workload of a FlashInfer-Bench definition (and its workloads as shape sets)."""
    where = str(definition_path)
    d = _load_json(definition_path)
    missing = [k for k in ("name", "axes", "inputs", "outputs", "reference") if k not in d]
    if missing:
        raise WorkloadError(f"{where}: definition lacks {', '.join(missing)}")
    axes: Mapping[str, Any] = d["axes"]
    const = {a: int(s["value"]) for a, s in axes.items() if s.get("type") == "const"}
    var = [a for a, s in axes.items() if s.get("type") != "const"]
    used: set[str] = set()
    args: list[Tensor | Scalar] = []
    for role, group in (("in", d["inputs"]), ("out", d["outputs"])):
        for name, spec in group.items():
            dtype = spec.get("dtype", "float32")
            if dtype not in DTYPES:
                raise WorkloadError(f"{where}: {name}: unsupported dtype '{dtype}' (known: {', '.join(DTYPES)})")
            shape = tuple(spec.get("shape") or ())
            for dim in shape:
                if isinstance(dim, str) and dim not in axes:
                    raise WorkloadError(f"{where}: {name}: shape names axis '{dim}' that the definition does not declare")
            used |= {dim for dim in shape if isinstance(dim, str)}
            args.append(Tensor(name, tuple(const.get(x, x) if isinstance(x, str) else x for x in shape), dtype, role=role))
    unused = [a for a in axes if a not in used]
    if unused:
        raise WorkloadError(f"{where}: axis {', '.join(unused)} is used by no input or output")
    args += [Scalar(a, "int64") for a in var]
    run = _reference(d["reference"], where)
    in_names = list(d["inputs"])
    out_names = list(d["outputs"])

    def reference(**kw: Any) -> dict[str, torch.Tensor]:
        result = run(*[kw[n] for n in in_names])
        result = result if isinstance(result, tuple | list) else (result,)
        return dict(zip(out_names, result, strict=False))

    observed = read_workloads(workloads_path, d["name"])
    shapes = _shape_sets(var, observed)
    return Workload(
        name=d["name"],
        description=d.get("description", ""),
        args=args,
        reference=reference,
        shapes=shapes,
        tolerances={"bfloat16": Tolerance(1e-2, 1.6e-2), "float16": Tolerance(1e-3, 1e-3)},
    )


def _shape_sets(var: list[str], observed: list[dict[str, Any]]) -> dict[str, list[dict[str, int]]]:
    seen = [{a: int(w.get("axes", {}).get(a, 1)) for a in var} for w in observed if all(a in w.get("axes", {}) for a in var)]
    if not var:
        return {"test": [{}], "emu": [{}], "bench": [{}]}
    bench = sorted(seen, key=lambda b: -sum(b.values()))[:2] or [{a: 4096 for a in var}]
    test = [{a: v for a in var} for v in TEST_VALUES]
    test += sorted(seen, key=lambda b: sum(b.values()))[:2]
    emu = [{a: v for a in var} for v in EMU_VALUES]
    uniq = lambda xs: [dict(t) for t in dict.fromkeys(tuple(sorted(x.items())) for x in xs)]  # noqa: E731
    return {"test": uniq(test), "emu": uniq(emu), "bench": uniq(bench)}


WORKLOAD_PY = '''"""FlashInfer-Bench definition {name}, imported by `klineage import flashinfer`."""

from pathlib import Path

from klineage.interop.flashinfer import workload_from_definition

_HERE = Path(__file__).resolve().parent
WORKLOAD = workload_from_definition(_HERE / "definition.json", _HERE / "workloads.jsonl")
'''


def import_definition(definition_path: Path, out_dir: Path, workloads_path: Path | None = None) -> Workload:
    """Write a workload folder (definition.json, workloads.jsonl, workload.py); validate it first."""
    wl = workload_from_definition(definition_path, workloads_path)
    problems = wl.problems()
    if problems:
        raise WorkloadError(f"{definition_path}: " + "; ".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(definition_path, out_dir / "definition.json")
    if workloads_path is not None and workloads_path.exists():
        shutil.copyfile(workloads_path, out_dir / "workloads.jsonl")
    (out_dir / "workload.py").write_text(WORKLOAD_PY.format(name=wl.name))
    return wl


def export_solution(kernel_text: str, workload: Workload, name: str, author: str = "klineage",
                    target: str = "H200") -> dict[str, Any]:
    """A Solution JSON: our launcher file as the source, `launch` as the entry point."""
    if not re.search(r'extern\s+"C"', kernel_text):
        raise WorkloadError(f"{name}: the kernel has no extern \"C\" launcher to export")
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
        raise WorkloadError(f"{path}: entry point '{entry}' names no file among its sources ({', '.join(sources) or 'none'})")
    if not entry.endswith("::launch"):
        raise WorkloadError(
            f"{path}: entry point '{entry}' is a torch binding, not the C launcher `launch`; it cannot be wrapped mechanically"
        )
    return sources[file]
