"""Mining runs in the store: the rows `klineage mine` keeps of each run."""

from __future__ import annotations

from klineage.store.db import Store


def interrupt_stale_mining_runs(store: Store) -> int:
    """Mark every mining run still `running` as `interrupted`; returns how many. Called when a
    run starts: DuckDB lets one process write a file at a time, so a `running` row left behind
    belongs to a run that was killed (kill -9, power loss) before it could say so."""
    with store.transaction() as con:
        n = con.execute("SELECT count(*) FROM mining_runs WHERE status = 'running'").fetchone()
        con.execute("UPDATE mining_runs SET status = 'interrupted' WHERE status = 'running'")
    return int(n[0]) if n else 0
