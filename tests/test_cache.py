"""The gate cache under concurrency: two gates of the same source at once never touch each
other's files, and exactly one verdict is published."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from klineage.gates import cache
from klineage.gates.gate import gate
from klineage.gates.result import GateResult
from tests.conftest import EXAMPLES


def test_concurrent_gates_of_one_source(tmp_path: Path) -> None:
    src = (EXAMPLES / "vector_add/naive.cu").read_text()
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(lambda _: gate(src, EXAMPLES / "vector_add", name="k.cu", cache_root=tmp_path), range(2))
        )
    assert all(r.accepted for r in results), [(r.category, r.message) for r in results]
    published = list(tmp_path.glob("*/*/result.json"))
    assert len(published) == 1
    assert not list(tmp_path.glob("*/.staging-*"))  # the loser's folder is gone


def test_store_keeps_the_first_publication(tmp_path: Path) -> None:
    key = "ab" * 32
    first = GateResult.reject("correctness", "mismatch", "first")
    second = GateResult.reject("run", "crash", "second")
    a, b = cache.fresh_dir(key, tmp_path), cache.fresh_dir(key, tmp_path)
    assert a != b
    cache.store(key, first, tmp_path, staging=a)
    cache.store(key, second, tmp_path, staging=b)
    hit = cache.load_cached(key, tmp_path)
    assert hit is not None and hit.message == "first" and not b.exists()


def test_verdicts_that_would_not_come_again_are_not_reused(tmp_path: Path) -> None:
    """A timeout, or a child that died without saying why, is archived but gated again next time."""
    for i, result in enumerate(
        [
            GateResult.reject("run", "timeout", "k.cu: no result within 1 s"),
            GateResult.reject("run", "crash", f"k.cu: {cache.UNEXPLAINED_DEATH} (SIGKILL)"),
        ]
    ):
        key = f"{i:02d}" * 32
        cache.store(key, result, tmp_path)
        assert cache.load_cached(key, tmp_path) is None
        assert (cache.artifact_dir(key, tmp_path) / "unreused.json").exists()
    explained = GateResult.reject("run", "crash", "k.cu:6: kernel 'vadd': invalid memory access")
    cache.store("cd" * 32, explained, tmp_path)
    assert cache.load_cached("cd" * 32, tmp_path) is not None


def test_an_entry_of_another_protocol_version_is_not_reused(tmp_path: Path) -> None:
    key = "ef" * 32
    cache.store(key, GateResult(True, "done", "ok"), tmp_path)
    path = cache.artifact_dir(key, tmp_path) / "result.json"
    doc = json.loads(path.read_text())
    assert doc["protocol"] == cache.PROTOCOL_VERSION
    assert cache.load_cached(key, tmp_path) is not None
    doc["protocol"] = cache.PROTOCOL_VERSION - 1
    path.write_text(json.dumps(doc))
    assert cache.load_cached(key, tmp_path) is None
    del doc["protocol"]
    path.write_text(json.dumps(doc))
    assert cache.load_cached(key, tmp_path) is None


def test_concurrent_gates_of_one_source_gate_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads gating the same candidate at once (a materializer's modes from one naive kernel)
    run the gate's stages once; the others read the published verdict."""
    from klineage.gates import gate as gate_mod

    real, calls = gate_mod._run_stages, []

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gate_mod, "_run_stages", counted)
    src = (EXAMPLES / "vector_add/naive.cu").read_text().replace("naive", "naive_once")
    with ThreadPoolExecutor(3) as pool:
        results = list(
            pool.map(lambda _: gate(src, EXAMPLES / "vector_add", name="k.cu", cache_root=tmp_path), range(3))
        )
    assert [r.accepted for r in results] == [True, True, True], [(r.category, r.message) for r in results]
    assert len(calls) == 1
    assert len({r.artifact_id for r in results}) == 1
