"""The DuckDB store: migrations, transactions, and refusing files it must not touch."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from klineage.store.db import Store, StoreError
from klineage.store.schema import SCHEMA_VERSION


def test_new_store_is_migrated(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as s:
        assert s.schema_version == SCHEMA_VERSION
        assert set(s.counts()) >= {"kernels", "steps", "skills", "llm_exchanges", "materialization_runs"}


def test_transaction_rolls_back(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as s:
        with pytest.raises(RuntimeError), s.transaction() as con:
            con.execute(
                "INSERT INTO kernels (kernel_hash, workload, role, source) VALUES ('a', 'w', 'expert', 'x')"
            )
            raise RuntimeError("killed mid-step")
        assert s.scalar("SELECT count(*) FROM kernels") == 0


def test_corrupt_file_is_refused_and_untouched(tmp_path: Path) -> None:
    p = tmp_path / "s.duckdb"
    p.write_bytes(b"this is not a database" * 100)
    before = p.read_bytes()
    with pytest.raises(StoreError, match="not a KLineage database"):
        Store(p)
    assert p.read_bytes() == before


def test_newer_schema_is_refused_and_untouched(tmp_path: Path) -> None:
    p = tmp_path / "s.duckdb"
    con = duckdb.connect(str(p))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION + 5)])
    con.close()
    before = p.read_bytes()
    with pytest.raises(StoreError, match="newer KLineage"):
        Store(p)
    assert p.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_read_only_path(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="not writable"):
            Store(d / "s.duckdb")
    finally:
        d.chmod(0o700)


def test_read_only_path_as_root_too(tmp_path: Path) -> None:
    """A path under a regular file can never be created, whoever we are."""
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="cannot create its folder|not writable"):
        Store(f / "sub" / "s.duckdb")


def test_missing_db_read_only(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such database"):
        Store(tmp_path / "none.duckdb", read_only=True)


def test_read_only_open_of_a_foreign_duckdb_file(tmp_path: Path) -> None:
    p = tmp_path / "other.duckdb"
    duckdb.connect(str(p)).close()
    with pytest.raises(StoreError, match="holds no KLineage tables"):
        Store(p, read_only=True)


def test_foreign_duckdb_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A DuckDB file of another tool, even one with a `skills` table, is never migrated into."""
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE skills (name VARCHAR, level INTEGER)")
    con.execute("INSERT INTO skills VALUES ('sql', 3)")
    con.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another tool \\(tables: skills\\)"):
        Store(path)
    assert path.read_bytes() == before
    con = duckdb.connect(str(path), read_only=True)
    assert [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()] == [
        "skills"
    ]
    con.close()


def test_empty_duckdb_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.duckdb"
    duckdb.connect(str(path)).close()
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
