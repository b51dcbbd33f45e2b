"""`gate(source, workload, options) -> GateResult`: parse → compile → run → correctness → profile.

The same plain, auditable sequence for every backend (DESIGN.md, 'The gate'). Nothing of the
candidate runs in this process: the backend builds it here (a compiler in a child process with a
time limit), and gates/worker.py runs it in a child process of its own.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from klineage.errors import KLineageError, SourceError
from klineage.gates import cache
from klineage.gates.backend import BuildOutcome, GateOptions
from klineage.gates.backends import get_backend
from klineage.gates.child import run_worker
from klineage.gates.compile import CompileResult, compile_cubin, nvcc_version
from klineage.gates.cuda.device_lock import device_slot
from klineage.gates.result import GateResult, ShapeCheck, Timing
from klineage.gates.twins import Twins

T = TypeVar("T")

if TYPE_CHECKING:  # torch: imported only when a candidate is really gated, not for a cached answer
    from klineage.source.model import CudaSource
    from klineage.workload import Workload


def read_source(path: str | Path) -> str:
    """A kernel file as text; a missing or non-UTF-8 file is one clear error."""
    p = Path(path)
    if not p.is_file():
        raise SourceError(f"{p}: no such file")
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SourceError(f"{p}:{line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})") from None


def check_parse(source: str, name: str, workload: Workload | None = None) -> GateResult | None:
    """Parse stage: a parse error, a missing `extern "C" launch`, or (given the workload) a
    launcher whose parameters are not the workload's arguments and a stream rejects before
    compiling."""
    parsed = parse_stage(source, name, workload)
    return parsed if isinstance(parsed, GateResult) else None


def parse_stage(source: str, name: str, workload: Workload | None = None) -> CudaSource | GateResult:
    """`check_parse` that hands on the parsed source when nothing is rejected (the twin check
    reads it again after the compile stage: one parse a candidate)."""
    from klineage.source.model import CudaSource

    try:
        src = CudaSource.from_text(source, name)
    except SourceError as e:
        return GateResult.reject("parse", "parse_error", str(e))
    names = [f.name for f in src.launchers]
    if "launch" not in names:
        return GateResult.reject(
            "parse",
            "parse_error",
            f'{name}: no extern "C" launch(...) launcher (found: {", ".join(names) or "none"})',
        )
    if workload is not None:
        from klineage.gates.signature import signature_problem

        launcher = next(f for f in src.launchers if f.name == "launch")
        problem = signature_problem(launcher, workload)
        if problem is not None:
            return GateResult.reject("parse", "parse_error", f"{name}:{launcher.line}: {problem}")
    return src


def _require_gpu() -> None:
    """No GPU is bad input for the cuda backend (exit 2), never a cached `crash` verdict."""
    import torch

    if not torch.cuda.is_available():
        raise KLineageError("the cuda backend needs a CUDA GPU and none is visible here (use --backend emu)")


def _map_file(message: str, name: str) -> str:
    return re.sub(r"\bkernel\.cu\b", name, message)


def gate(
    source: str | Path,
    workload: Workload | str | Path,
    options: GateOptions | None = None,
    *,
    name: str | None = None,
    use_cache: bool = True,
    cache_root: Path | None = None,
) -> GateResult:
    """Gate one candidate. `source` is a path or the text itself (then give `name`). With the
    workload given as a folder, a cached verdict is found without loading it (`quick_answer`)."""
    options = options or GateOptions()
    t0 = time.perf_counter()
    if isinstance(source, Path):
        name = name or str(source)
        text = read_source(source)
    else:
        text = source
        name = name or "<candidate>"
    if isinstance(workload, str | Path):
        if use_cache:
            hit = quick_answer(text, Path(workload), options, cache_root)
            if hit is not None:
                return hit
        from klineage.workload import load_workload

        wl = load_workload(workload)
    else:
        wl = workload
    if wl.source_dir is None:
        raise KLineageError(
            f"workload '{wl.name}' has no folder: the gate's child process loads it from workload.py"
        )

    parsed = parse_stage(text, name, wl)
    if isinstance(parsed, GateResult):
        parsed.backend = options.backend
        parsed.elapsed_s = time.perf_counter() - t0
        return parsed

    if options.backend == "cuda":
        _require_gpu()
    try:
        backend = get_backend(options.backend)
    except KLineageError as e:
        if options.backend == "emu":
            return GateResult.reject("compile", "unsupported", f"{e}", backend=options.backend)
        raise
    toolchain = f"nvcc {nvcc_version()} | {backend.toolchain()}"
    key = cache.cache_key(text, wl.fingerprint(), options.key_fields(), toolchain)
    digest = cache.folder_digest(wl.source_dir)
    if digest is not None:
        cache.remember(cache.answer_key(text, digest, options.key_fields(), toolchain), key, cache_root)
    twins = None
    if use_cache and options.backend == "cuda":
        twins = Twins(wl.fingerprint(), options.key_fields(), toolchain, cache_root)
    with _single_flight(key):
        if use_cache:
            hit = cache.load_cached(key, cache_root)
            if hit is not None:
                return hit
        work = cache.fresh_dir(key, cache_root)
        (work / "source.cu").write_text(text)
        result = _run_stages(text, parsed, name, wl, options, backend, work, twins)
        result.artifact_id = key[:16]
        result.backend = options.backend
        result.elapsed_s = time.perf_counter() - t0
        cache.store(key, result, cache_root, staging=work)
        if twins is not None and not result.twin_of and cache.reusable(result):
            twins.file(key)
    return result


def _as_twin(earlier: GateResult, stages: dict[str, float], resources: Any) -> GateResult:
    """A binary twin's verdict for this candidate: the earlier gate's checks and timing, this
    gate's compile stages and resources, and whose verdict it is."""
    twin = GateResult.from_dict(earlier.to_dict())
    twin.cached = False
    twin.twin_of = earlier.artifact_id
    twin.resources = resources
    twin.stages_s = dict(stages)
    return twin


_flights: dict[str, threading.Lock] = {}
_flights_guard = threading.Lock()


@contextlib.contextmanager
def _single_flight(key: str) -> Iterator[None]:
    """One gate per cache key at a time in this process: threads gating the same candidate (a
    materializer's modes all start from the same naive kernel, and often take the same first step)
    wait for the first one and read its published verdict instead of gating it again."""
    with _flights_guard:
        lock = _flights.setdefault(key, threading.Lock())
    with lock:
        yield


def quick_answer(
    text: str, folder: Path, options: GateOptions, cache_root: Path | None = None
) -> GateResult | None:
    """The cached verdict of `text` on the workload in `folder`, found from the folder's bytes,
    the options and the toolchain alone: no workload import, no torch, no GPU (a `klineage gate`
    cache hit in a fraction of a second). None when there is none."""
    digest = cache.folder_digest(folder)
    if digest is None:
        return None
    try:
        backend = get_backend(options.backend)
    except KLineageError:
        return None
    toolchain = f"nvcc {nvcc_version()} | {backend.toolchain()}"
    return cache.recall(cache.answer_key(text, digest, options.key_fields(), toolchain), cache_root)


def _run_stages(
    text: str,
    parsed: CudaSource,
    name: str,
    wl: Workload,
    options: GateOptions,
    backend,
    work: Path,
    twins: Twins | None = None,
) -> GateResult:
    stages: dict[str, float] = {}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        nvcc_future = pool.submit(
            _timed,
            stages,
            "nvcc_s",
            compile_cubin,
            text,
            work / "nvcc",
            options.arch,
            options.nvcc_flags,
            options.timeout_s,
        )
        build_future = pool.submit(_timed, stages, "build_s", backend.build, text, work / "build", options)
        comp: CompileResult = nvcc_future.result()
        build: BuildOutcome = build_future.result()
    stages["compile_s"] = round(time.perf_counter() - t0, 4)
    resources = comp.resources
    nvcc_missing = not nvcc_version()
    if not comp.ok and not nvcc_missing:
        return GateResult.reject(
            "compile", "compile_error", _map_file(comp.first_error(), name), stages_s=stages
        )
    if not build.ok:
        return GateResult.reject(
            "compile", build.category, _map_file(build.message, name), resources=resources, stages_s=stages
        )

    if twins is not None and comp.ok:
        earlier = twins.look(parsed, work / "nvcc" / "kernel.cubin")
        if earlier is not None:
            return _as_twin(earlier, stages, resources)

    payload = {
        "library": str(build.library),
        "workload_dir": str(wl.source_dir),
        "options": options.key_fields() | {"timeout_s": options.timeout_s},
    }
    slot = device_slot() if options.backend == "cuda" else contextlib.nullcontext(0.0)
    with slot as waited:
        stages["device_wait_s"] = round(float(waited or 0.0), 4)
        t_run = time.perf_counter()
        child = run_worker(payload, work / "run", options.timeout_s, env=backend.child_env(options))
        stages["run_s"] = round(time.perf_counter() - t_run, 4)
    if child.result is not None:
        stages.update({f"worker_{k}": float(v) for k, v in (child.result.get("phases") or {}).items()})
    if child.timed_out:
        return GateResult.reject(
            "run",
            "timeout",
            f"{name}: no result within {options.timeout_s:g} s (hang or spin-wait?)",
            resources=resources,
            stages_s=stages,
        )
    if child.result is None:
        classified = backend.classify_failure(child.returncode, child.stderr)
        if classified is None:
            sig = child.signal_name or f"exit code {child.returncode}"
            tail = [ln for ln in child.stderr.splitlines() if ln.strip()][-1:]
            classified = (
                "crash",
                f"{name}: {cache.UNEXPLAINED_DEATH} ({sig}){': ' + tail[0] if tail else ''}",
            )
        category, message = classified
        return GateResult.reject(
            "run", category, _map_file(message, name), resources=resources, stages_s=stages
        )
    r = child.result
    checks = [ShapeCheck(**c) for c in r.get("checks", [])]
    category = r["category"]
    timing = r.get("timing")
    return GateResult(
        accepted=category == "ok",
        stage="done" if category == "ok" else r.get("stage", "correctness"),
        category=category,
        message=_map_file(r.get("message", ""), name)
        + ("" if not nvcc_missing else " (nvcc not found: resources unmeasured)"),
        shapes=checks,
        resources=resources,
        timing=Timing(**timing) if timing else None,
        profile=r.get("profile", {}),
        stages_s=stages,
    )


def _timed(stages: dict[str, float], label: str, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, its wall seconds written to `stages[label]` (the gate's own account of where
    a candidate's time went: compile, waiting for the GPU, the run)."""
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        stages[label] = round(time.perf_counter() - t0, 4)
