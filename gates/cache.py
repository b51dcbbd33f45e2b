"""Content-addressed gate results and the archive of every candidate.

The key covers everything that can change a verdict: the source, the workload file, the gate
options, the toolchains (the emulator's sources among them) and the protocol version. Each
candidate's folder keeps its source, the compiler and child logs, and result.json; a result is
reused only when result.json exists and records this protocol version, so a run killed mid-gate
leaves nothing that looks finished. Only verdicts that the same gate would reach again are
published: a timeout (it depends on the machine's load) or a child that died without saying why
(killed from outside, out of memory) is kept in the archive as unreused.json and gated again next
time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from klineage.gates.result import GateResult
from klineage.paths import home

#: Bump when the protocol or result semantics change, so old verdicts are not reused.
#: 2: the last launch of each shape runs with new values in the same buffers (issue 27).
#: 3: a 0-dimensional output is poisoned and checked (it was a `crash` before).
#: 4: slow kernels are timed by the slow rule (gates/cuda/stats.plan_timing).
PROTOCOL_VERSION = 5
#: How the gate words a child that died without a verdict and without a report the backend knows.
UNEXPLAINED_DEATH = "the kernel process died"


def cache_key(source: str, workload_fingerprint: str, options: dict[str, Any], toolchain: str) -> str:
    blob = json.dumps(
        {
            "source": source,
            "workload": workload_fingerprint,
            "options": options,
            "toolchain": toolchain,
            "protocol": PROTOCOL_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


#: a workload folder bigger than this is not hashed for the quick answer (the full path runs)
_FOLDER_HASH_LIMIT = 64 << 20
_folder_memo: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}


def folder_digest(folder: Path) -> str | None:
    """SHA-256 over every file of a workload folder (names and bytes; caches left out), or None
    when it is too big to hash quickly. A folder holds every file its fingerprint reads (an
    imported FlashInfer-Trace workload's data files are copied into it), so equal digests mean
    equal fingerprints."""
    try:
        files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        stats = tuple((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    except OSError:
        return None
    if sum(s[1] for s in stats) > _FOLDER_HASH_LIMIT:
        return None
    memo = (str(Path(folder).resolve()), stats)
    if memo not in _folder_memo:
        h = hashlib.sha256()
        for (rel, _size, _mtime), p in zip(stats, files, strict=True):
            h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
        _folder_memo[memo] = h.hexdigest()
    return _folder_memo[memo]


def answer_key(source: str, folder_hash: str, options: dict[str, Any], toolchain: str) -> str:
    """The quick-answer key: like `cache_key`, with the folder's bytes instead of the loaded
    workload's fingerprint, so it is computed without importing the workload (nor torch)."""
    return cache_key(source, "folder:" + folder_hash, options, toolchain)


def _index_path(akey: str, root: Path | None) -> Path:
    return (root or home() / "gate") / "answers" / akey[:2] / akey


def remember(akey: str, key: str, root: Path | None = None) -> None:
    """Note that the quick-answer key `akey` names the verdict filed under `key`."""
    path = _index_path(akey, root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(key)
        os.replace(tmp, path)
    except OSError:
        pass


def recall(akey: str, root: Path | None = None) -> GateResult | None:
    """The cached verdict a quick-answer key names, or None."""
    try:
        key = _index_path(akey, root).read_text().strip()
    except OSError:
        return None
    return load_cached(key, root) if len(key) == 64 else None


def artifact_dir(key: str, root: Path | None = None) -> Path:
    return (root or home() / "gate") / key[:2] / key


def reusable(result: GateResult) -> bool:
    """Whether the same gate would reach this verdict again: not a timeout, not a death that the
    backend could not explain. Every other verdict comes from a deterministic stage (parse,
    compile) or from the protocol's completed runs."""
    if result.category == "timeout":
        return False
    return not (result.category == "crash" and UNEXPLAINED_DEATH in result.message)


def load_cached(key: str, root: Path | None = None) -> GateResult | None:
    path = artifact_dir(key, root) / "result.json"
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        if doc.pop("protocol", None) != PROTOCOL_VERSION:
            return None
        result = GateResult.from_dict(doc)
    except (json.JSONDecodeError, TypeError, ValueError, AttributeError):
        return None
    result.cached = True
    return result


def store(key: str, result: GateResult, root: Path | None = None, staging: Path | None = None) -> None:
    """Publish a verdict: result.json goes into the private staging folder (from `fresh_dir`),
    which is then renamed into place in one step. Two processes gating the same source never
    touch each other's files; the first to publish wins and the other's folder is dropped. A
    verdict that is not `reusable` goes into the archive as unreused.json, never result.json."""
    final = artifact_dir(key, root)
    staging = staging or fresh_dir(key, root)
    name = "result.json" if reusable(result) else "unreused.json"
    (staging / name).write_text(json.dumps(result.to_dict() | {"protocol": PROTOCOL_VERSION}, indent=1))
    if (final / "result.json").exists():
        shutil.rmtree(staging, ignore_errors=True)
        return
    if final.exists():  # a killed run's leftovers, never published
        shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(staging, final)
    except OSError:  # another process published between the check and the rename
        shutil.rmtree(staging, ignore_errors=True)


def fresh_dir(key: str, root: Path | None = None) -> Path:
    """A private, empty staging folder for a new gate of this key (published by `store`)."""
    final = artifact_dir(key, root)
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".staging-{key[:16]}-", dir=final.parent))
