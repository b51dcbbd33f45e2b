"""The mining tables: `kernels`, `gate_runs`, `states` and `steps` (DESIGN.md, 'Store').

The walker writes them (one transaction per expanded state: the functions taking `con` run inside
the caller's transaction); skill extraction, the lineage graph, the report and the timings read
them. A kernel or gate verdict two workloads share belongs to the workload whose name sorts
first, whichever walk records it first, so the rows do not depend on the walk order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

from klineage.gates.result import GateResult
from klineage.store.db import Store

Row = dict[str, Any]


# ---- kernels and gate runs ------------------------------------------------------------------
def record_kernel(
    con: duckdb.DuckDBPyConnection,
    kernel_hash: str,
    workload: str,
    role: str,
    path: str | None,
    source: str,
    first_name_wins: bool = True,
) -> None:
    """A kernel's text. `first_name_wins`: a kernel two workloads share belongs to the first name
    (the walker); otherwise the first writer keeps it (the materializer)."""
    if first_name_wins:
        con.execute(
            "INSERT INTO kernels (kernel_hash, workload, role, path, source) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (kernel_hash) DO UPDATE SET workload = excluded.workload, role = excluded.role,"
            " path = excluded.path WHERE excluded.workload < kernels.workload",
            [kernel_hash, workload, role, path, source],
        )
    else:
        con.execute(
            "INSERT INTO kernels (kernel_hash, workload, role, path, source) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            [kernel_hash, workload, role, path, source],
        )


def record_gate_run(
    con: duckdb.DuckDBPyConnection,
    kernel_hash: str,
    workload: str,
    r: GateResult,
    device: str,
    first_name_wins: bool = True,
) -> None:
    """A gate verdict, keyed by its content hash (`r.artifact_id`); `first_name_wins` as for kernels."""
    values = [
        r.artifact_id,
        kernel_hash,
        workload,
        r.backend,
        r.accepted,
        r.stage,
        r.category,
        r.message,
        json.dumps(r.to_dict(), default=str),
        r.elapsed_s,
        device,
    ]
    if first_name_wins:
        con.execute(
            "INSERT INTO gate_runs (gate_key, kernel_hash, workload, backend, accepted, stage, category, message, result,"
            " elapsed_s, device) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (gate_key) DO UPDATE SET"
            " workload = excluded.workload, result = excluded.result, elapsed_s = excluded.elapsed_s"
            " WHERE excluded.workload < gate_runs.workload",
            values,
        )
    else:
        con.execute(
            "INSERT INTO gate_runs (gate_key, kernel_hash, workload, backend, accepted, stage, category, message,"
            " result, elapsed_s, device) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            values,
        )


def gate_result(store: Store, gate_key: str | None) -> Row | None:
    """A stored verdict's result document with its device; None for no key or no row."""
    if not gate_key:
        return None
    rows = store.rows("SELECT result, device FROM gate_runs WHERE gate_key = ?", [gate_key])
    return rows[0]["result"] | {"device": rows[0]["device"]} if rows else None


def kernel_sources(store: Store, workload: str) -> dict[str, str]:
    return {
        r["kernel_hash"]: r["source"]
        for r in store.rows("SELECT kernel_hash, source FROM kernels WHERE workload = ?", [workload])
    }


def naive_kernel(store: Store, workload: str) -> Row | None:
    """The workload's naive kernel (`kernel_hash`, `source`), if recorded."""
    rows = store.rows(
        "SELECT kernel_hash, source FROM kernels WHERE workload = ? AND role = 'naive' LIMIT 1", [workload]
    )
    return rows[0] if rows else None


def expert_path(store: Store, workload: str) -> str | None:
    return store.scalar("SELECT path FROM kernels WHERE workload = ? AND role = 'expert' LIMIT 1", [workload])


def expert_verdict(store: Store, workload: str) -> Row | None:
    """The newest gate verdict (`category`, `message`) of the workload's expert kernel."""
    rows = store.rows(
        "SELECT g.category, g.message FROM kernels k JOIN gate_runs g ON g.kernel_hash = k.kernel_hash"
        " WHERE k.workload = ? AND k.role = 'expert' ORDER BY g.created_at DESC LIMIT 1",
        [workload],
    )
    return rows[0] if rows else None


def count_gate_runs(store: Store, workload: str | None = None) -> int:
    if workload is None:
        return int(store.scalar("SELECT count(*) FROM gate_runs") or 0)
    return int(store.scalar("SELECT count(*) FROM gate_runs WHERE workload = ?", [workload]) or 0)


def gate_runs_by_category(store: Store) -> list[Row]:
    """(category, backend, runs), most runs first."""
    return store.rows(
        "SELECT category, backend, count(*) AS runs FROM gate_runs GROUP BY ALL ORDER BY runs DESC, 1, 2"
    )


def gate_run_devices(store: Store) -> list[Row]:
    """(device, backend, result) of every gate run."""
    return store.rows("SELECT device, backend, result FROM gate_runs")


# ---- states ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class StateSource:
    workload: str
    state_hash: str
    depth: int
    source: str


def add_expert_state(con: duckdb.DuckDBPyConnection, workload: str, state_hash: str, gate_key: str) -> None:
    con.execute(
        "INSERT INTO states VALUES (?, ?, 0, true, ?) ON CONFLICT DO NOTHING",
        [workload, state_hash, gate_key],
    )


def add_state(
    con: duckdb.DuckDBPyConnection,
    workload: str,
    state_hash: str,
    depth: int,
    gate_key: str | None,
    smallest_depth: bool = False,
) -> None:
    """A state reached at `depth`. `smallest_depth` (beam walk): a state reached again at a smaller
    depth takes that depth and gate key; otherwise the first row stays."""
    if smallest_depth:
        con.execute(
            "INSERT INTO states VALUES (?, ?, ?, false, ?) ON CONFLICT (workload, state_hash) DO UPDATE"
            " SET depth = excluded.depth, gate_key = excluded.gate_key WHERE excluded.depth < states.depth",
            [workload, state_hash, depth, gate_key],
        )
    else:
        con.execute(
            "INSERT INTO states VALUES (?, ?, ?, false, ?) ON CONFLICT DO NOTHING",
            [workload, state_hash, depth, gate_key],
        )


def state_workloads(store: Store) -> list[str]:
    """The workloads with a lineage, by name."""
    return [r["workload"] for r in store.rows("SELECT DISTINCT workload FROM states ORDER BY 1")]


def recorded_workloads(store: Store) -> list[str]:
    """The workloads with an expert, a state or a lineage recorded (the report's list), by name."""
    return [
        r["w"]
        for r in store.rows(
            "SELECT DISTINCT workload AS w FROM kernels WHERE role IN ('expert', 'state')"
            " UNION SELECT DISTINCT workload FROM states ORDER BY 1"
        )
    ]


def expert_state(store: Store, workload: str) -> str | None:
    return store.scalar("SELECT state_hash FROM states WHERE workload = ? AND is_expert", [workload])


def state_gate_keys(store: Store, workload: str) -> dict[str, str | None]:
    return {
        r["state_hash"]: r["gate_key"]
        for r in store.rows("SELECT state_hash, gate_key FROM states WHERE workload = ?", [workload])
    }


def states_with_results(store: Store, workload: str) -> list[Row]:
    """(state_hash, depth, is_expert, result) by depth then hash; result: the state's gate verdict."""
    return store.rows(
        "SELECT st.state_hash, st.depth, st.is_expert, g.result FROM states st LEFT JOIN gate_runs g ON g.gate_key = st.gate_key"
        " WHERE st.workload = ? ORDER BY st.depth, st.state_hash",
        [workload],
    )


def state_gates(store: Store, workload: str) -> dict[str, Row]:
    """state hash -> (state_hash, result, device) of its gate verdict."""
    return {
        r["state_hash"]: r
        for r in store.rows(
            "SELECT st.state_hash, g.result, g.device FROM states st LEFT JOIN gate_runs g ON g.gate_key = st.gate_key"
            " WHERE st.workload = ?",
            [workload],
        )
    }


def state_sources(store: Store) -> list[StateSource]:
    """Every state with its text, by workload, depth and hash."""
    return [
        StateSource(r["workload"], r["state_hash"], r["depth"], r["source"])
        for r in store.rows(
            "SELECT s.workload, s.state_hash, s.depth, k.source FROM states s JOIN kernels k ON k.kernel_hash = s.state_hash"
            " ORDER BY s.workload, s.depth, s.state_hash"
        )
    ]


def timeable_kernels(store: Store) -> set[tuple[str, str]]:
    """(workload, hash) of every state and naive kernel: the kernels a timing may be stored for."""
    return {
        (r["workload"], r["h"])
        for r in store.rows(
            "SELECT workload, state_hash AS h FROM states UNION SELECT workload, kernel_hash FROM kernels WHERE role = 'naive'"
        )
    }


def count_states(store: Store) -> int:
    return int(store.scalar("SELECT count(*) FROM states") or 0)


# ---- steps ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepRow:
    """One attempt from a state: accepted, rejected by the gate, or refused by the operator."""

    step_id: str
    workload: str
    from_state: str
    to_state: str | None
    operator: str
    site: dict[str, Any]
    accepted: bool
    category: str
    message: str
    gate_key: str | None


@dataclass(frozen=True)
class PathMark:
    """What marking a step `taken` stores: its roundtrip, carrier and the facts that held."""

    roundtrip_ok: bool | None
    roundtrip: dict[str, Any] | None
    carrier: str | None
    preconditions: list[dict[str, Any]]


def add_step(
    con: duckdb.DuckDBPyConnection, step: StepRow, mark: PathMark | None = None, keep_existing: bool = False
) -> None:
    """Record an attempt; `mark` makes it a taken step (the greedy walk). An attempt recorded
    before keeps its verdict: `keep_existing` leaves its row as it is, otherwise its taken mark,
    roundtrip, carrier and preconditions are overwritten with this one's."""
    values = [
        step.step_id,
        step.workload,
        step.from_state,
        step.to_state,
        step.operator,
        json.dumps(step.site),
        step.accepted,
        step.category,
        step.message,
        step.gate_key,
    ]
    if keep_existing:
        con.execute(
            "INSERT INTO steps (step_id, workload, from_state, to_state, operator, site, accepted, category, message,"
            " gate_key, taken) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, false) ON CONFLICT (step_id) DO NOTHING",
            values,
        )
        return
    con.execute(
        "INSERT INTO steps (step_id, workload, from_state, to_state, operator, site, accepted, category, message,"
        " gate_key, taken, roundtrip_ok, roundtrip, carrier, preconditions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (step_id) DO UPDATE SET taken = excluded.taken, roundtrip_ok = excluded.roundtrip_ok,"
        " roundtrip = excluded.roundtrip, carrier = excluded.carrier, preconditions = excluded.preconditions",
        [
            *values,
            mark is not None,
            mark.roundtrip_ok if mark else None,
            json.dumps(mark.roundtrip) if mark and mark.roundtrip else None,
            mark.carrier if mark else None,
            json.dumps(mark.preconditions) if mark else None,
        ],
    )


def taken_successor(store: Store, workload: str, state: str) -> str | None:
    """The text of the state a recorded taken step leads to from `state` (a resumed greedy walk)."""
    rows = store.rows(
        "SELECT s.to_state, k.source FROM steps s JOIN kernels k ON k.kernel_hash = s.to_state"
        " WHERE s.workload = ? AND s.from_state = ? AND s.taken",
        [workload, state],
    )
    return rows[0]["source"] if rows else None


def recorded_verdicts(store: Store, workload: str, state: str) -> dict[str, Row]:
    """step id -> (step_id, accepted, category, message, gate_key) of the attempts recorded from `state`."""
    return {
        r["step_id"]: r
        for r in store.rows(
            "SELECT step_id, accepted, category, message, gate_key FROM steps WHERE workload = ? AND from_state = ?",
            [workload, state],
        )
    }


def taken_marks(store: Store, workload: str) -> dict[str, Row]:
    """step id -> (step_id, operator, taken, roundtrip_ok, roundtrip, carrier, preconditions) of the taken steps."""
    return {
        r["step_id"]: r
        for r in store.rows(
            "SELECT step_id, operator, taken, roundtrip_ok, roundtrip, carrier, preconditions FROM steps"
            " WHERE workload = ? AND taken",
            [workload],
        )
    }


def mark_path(store: Store, unmark: list[str], marks: list[tuple[str, PathMark]]) -> None:
    """In one transaction: unmark `unmark`, then mark each (step id, mark) taken."""
    with store.transaction() as con:
        for sid in unmark:
            con.execute(
                "UPDATE steps SET taken = false, roundtrip_ok = NULL, roundtrip = NULL, carrier = NULL,"
                " preconditions = NULL WHERE step_id = ?",
                [sid],
            )
        for sid, m in marks:
            con.execute(
                "UPDATE steps SET taken = true, roundtrip_ok = ?, roundtrip = ?, carrier = ?, preconditions = ?"
                " WHERE step_id = ?",
                [m.roundtrip_ok, json.dumps(m.roundtrip), m.carrier, json.dumps(m.preconditions or []), sid],
            )


def taken_steps(store: Store, workload: str) -> list[Row]:
    """The taken steps with their from-state's depth, expert first (every column of `steps`)."""
    return store.rows(
        "SELECT s.*, st.depth FROM steps s JOIN states st ON st.workload = s.workload AND st.state_hash = s.from_state"
        " WHERE s.workload = ? AND s.taken ORDER BY st.depth",
        [workload],
    )


def rejected_steps(store: Store, workload: str) -> list[Row]:
    """(step_id, operator, category, message, site) of every attempt not accepted."""
    return store.rows(
        "SELECT step_id, operator, category, message, site FROM steps WHERE workload = ? AND NOT accepted",
        [workload],
    )


def accepted_edges(store: Store, workload: str) -> list[Row]:
    """Accepted steps between two states, the taken ones last (the edge kept where two join)."""
    return store.rows(
        "SELECT step_id, from_state, to_state, operator, site, roundtrip_ok, preconditions, taken FROM steps"
        " WHERE workload = ? AND accepted AND to_state IS NOT NULL ORDER BY taken, step_id",
        [workload],
    )


def taken_roundtrips(store: Store, workload: str) -> dict[str, dict[str, Any]]:
    return {
        r["step_id"]: r["roundtrip"] or {}
        for r in store.rows("SELECT step_id, roundtrip FROM steps WHERE workload = ? AND taken", [workload])
    }


def untaken_attempts(store: Store, workload: str) -> list[Row]:
    """The attempts not taken, refusals last, by operator and id (the report's evidence)."""
    return store.rows(
        "SELECT step_id, from_state, operator, site, accepted, category, message, gate_key FROM steps"
        " WHERE workload = ? AND NOT taken ORDER BY category = 'refused', operator, step_id",
        [workload],
    )


def step_counts(store: Store) -> Row:
    """taken, accepted, rejected (by the gate) and refused attempts over the whole store."""
    return store.rows(
        "SELECT count(*) FILTER (WHERE taken) AS taken, count(*) FILTER (WHERE accepted) AS accepted,"
        " count(*) FILTER (WHERE NOT accepted AND category <> 'refused') AS rejected,"
        " count(*) FILTER (WHERE category = 'refused') AS refused FROM steps"
    )[0]


def table_rows(store: Store) -> dict[str, list[Row]]:
    """Every row of the mining tables and the skill ids (for comparing two stores)."""
    return {
        t: store.rows(f"SELECT * FROM {t}") for t in ("states", "steps", "kernels", "gate_runs", "skills")
    }
