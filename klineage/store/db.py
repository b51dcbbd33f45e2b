"""The DuckDB store (DESIGN.md, 'Store'): one file, a schema version with migrations, and a
transaction per mining step so a killed run loses at most the step in flight.

One connection, shared by the driver's threads (`klineage mine` walks several workloads at once):
a DuckDB connection is not safe to use from several threads at once, so every access here —
a whole transaction, a query with its fetch — holds the store's re-entrant lock. A transaction
therefore never interleaves with another thread's statements, and each step still commits alone.

Opening is careful: a file that is not a DuckDB database, or that a newer KLineage wrote, is
refused with one clear line and left untouched (it is first opened read-only to look).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from klineage.errors import KLineageError
from klineage.store.schema import MIGRATIONS, SCHEMA_VERSION

DEFAULT_DB = Path("skills_db") / "skills.duckdb"


class StoreError(KLineageError):
    """The database cannot be used (corrupt, newer schema, unwritable)."""


def default_db_path() -> Path:
    return Path(os.environ.get("KLINEAGE_DB") or DEFAULT_DB)


def _version_of(con: duckdb.DuckDBPyConnection) -> int:
    has_meta = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
    ).fetchone()
    if not has_meta or not has_meta[0]:
        return 0
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables of a DuckDB file, sorted (a file without KLineage's meta table)."""
    return [
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()
    ]


class Store:
    """A KLineage database. Use as a context manager or call close()."""

    def __init__(self, path: str | Path | None = None, read_only: bool = False) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self.read_only = read_only
        self._lock = threading.RLock()  # serializes every use of self.con across threads
        self._check_existing()
        if not read_only:
            parent = self.path.parent if str(self.path.parent) else Path(".")
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"{self.path}: cannot create its folder ({e.strerror})") from None
            if not os.access(parent, os.W_OK) or (self.path.exists() and not os.access(self.path, os.W_OK)):
                raise StoreError(f"{self.path}: not writable (use --db to choose another path)")
        elif not self.path.exists():
            raise StoreError(f"{self.path}: no such database (run `klineage mine` first or give --db)")
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as e:
            raise StoreError(f"{self.path}: cannot open database ({str(e).splitlines()[0]})") from None
        if not read_only:
            self._migrate()
        elif _version_of(self.con) == 0:
            self.con.close()
            raise StoreError(f"{self.path}: holds no KLineage tables (an empty or foreign DuckDB file)")

    def _check_existing(self) -> None:
        if not self.path.exists():
            return
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a database file")
        try:
            con = duckdb.connect(str(self.path), read_only=True)
        except duckdb.Error as e:
            first = str(e).splitlines()[0]
            raise StoreError(
                f"{self.path}: not a KLineage database (corrupt or another format: {first})"
            ) from None
        try:
            version = _version_of(con)
            tables = [] if version else _table_names(con)
        except duckdb.Error as e:
            raise StoreError(f"{self.path}: unreadable database ({str(e).splitlines()[0]})") from None
        finally:
            con.close()
        if tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StoreError(
                f"{self.path}: a DuckDB file of another tool (tables: {shown}), not a KLineage store; "
                "left untouched (give --db a new path)"
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer KLineage (schema {version}, this one knows {SCHEMA_VERSION}); left untouched"
            )

    def _migrate(self) -> None:
        version = _version_of(self.con)
        for i in range(version, SCHEMA_VERSION):
            with self.transaction():
                self.con.execute(MIGRATIONS[i])
                self.con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(i + 1)])

    # ---- plumbing ---------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Everything inside commits together or not at all. The calling thread holds the store
        until the commit: other threads' transactions and queries wait (re-entrant: `rows` and
        `scalar` work inside)."""
        with self._lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield self.con
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return _version_of(self.con)

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Query as a list of dicts (JSON columns decoded)."""
        with self._lock:
            cur = self.con.execute(sql, params or [])
            cols = [d[0] for d in cur.description]
            types = [str(d[1]) for d in cur.description]
            fetched = cur.fetchall()
        out = []
        for row in fetched:
            rec = {}
            for c, t, v in zip(cols, types, row, strict=True):
                rec[c] = json.loads(v) if t == "JSON" and isinstance(v, str) else v
            out.append(rec)
        return out

    def scalar(self, sql: str, params: list[Any] | None = None) -> Any:
        with self._lock:
            row = self.con.execute(sql, params or []).fetchone()
        return row[0] if row else None

    def counts(self) -> dict[str, int]:
        tables = [
            "kernels",
            "gate_runs",
            "states",
            "steps",
            "skills",
            "skill_evidence",
            "materialization_runs",
            "materialization_steps",
            "llm_exchanges",
        ]
        return {t: int(self.scalar(f"SELECT count(*) FROM {t}")) for t in tables}
