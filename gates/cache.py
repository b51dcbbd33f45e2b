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
PROTOCOL_VERSION = 2
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
