"""The gate cache under concurrency: two gates of the same source at once never touch each
other's files, and exactly one verdict is published."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from klineage.gates import cache
from klineage.gates.gate import gate
from klineage.gates.result import GateResult
from tests.conftest import EXAMPLES


def test_concurrent_gates_of_one_source(tmp_path: Path) -> None:
    src = (EXAMPLES / "vector_add/naive.cu").read_text()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: gate(src, EXAMPLES / "vector_add", name="k.cu", cache_root=tmp_path), range(2)))
    assert all(r.accepted for r in results), [(r.category, r.message) for r in results]
    published = list(tmp_path.glob("*/*/result.json"))
    assert len(published) == 1
    assert not list(tmp_path.glob("*/.staging-*"))  # the loser's folder is gone


def test_store_keeps_the_first_publication(tmp_path: Path) -> None:
    key = "ab" * 32
    first = GateResult.reject("run", "timeout", "first")
    second = GateResult.reject("run", "crash", "second")
    a, b = cache.fresh_dir(key, tmp_path), cache.fresh_dir(key, tmp_path)
    assert a != b
    cache.store(key, first, tmp_path, staging=a)
    cache.store(key, second, tmp_path, staging=b)
    hit = cache.load_cached(key, tmp_path)
    assert hit is not None and hit.message == "first" and not b.exists()
