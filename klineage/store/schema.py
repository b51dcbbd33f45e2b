"""The DuckDB schema, as numbered migrations. `SCHEMA_VERSION` is the newest; a database file
written by a newer KLineage is refused rather than guessed at."""

from __future__ import annotations

from klineage.store.skill_record import skills_table_ddl

MIGRATIONS: list[str] = [
    # 1: the mining tables, the skill store, materialization and LLM exchanges
    """
    CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);

    CREATE TABLE IF NOT EXISTS kernels (
        kernel_hash VARCHAR PRIMARY KEY,
        workload VARCHAR NOT NULL,
        role VARCHAR NOT NULL,              -- expert | naive | state | candidate
        path VARCHAR,
        source VARCHAR NOT NULL,
        created_at TIMESTAMP DEFAULT current_timestamp
    );

    CREATE TABLE IF NOT EXISTS gate_runs (
        gate_key VARCHAR PRIMARY KEY,       -- content hash: source + workload + options + toolchain
        kernel_hash VARCHAR NOT NULL,
        workload VARCHAR NOT NULL,
        backend VARCHAR NOT NULL,
        accepted BOOLEAN NOT NULL,
        stage VARCHAR NOT NULL,
        category VARCHAR NOT NULL,
        message VARCHAR,
        result JSON NOT NULL,
        elapsed_s DOUBLE,
        device VARCHAR,
        created_at TIMESTAMP DEFAULT current_timestamp
    );

    CREATE TABLE IF NOT EXISTS mining_runs (
        run_id VARCHAR PRIMARY KEY,
        started_at TIMESTAMP DEFAULT current_timestamp,
        finished_at TIMESTAMP,
        args JSON,
        status VARCHAR                      -- running | done | failed
    );

    CREATE TABLE IF NOT EXISTS states (
        workload VARCHAR NOT NULL,
        state_hash VARCHAR NOT NULL,
        depth INTEGER NOT NULL,             -- backward steps from the expert (expert = 0)
        is_expert BOOLEAN NOT NULL,
        gate_key VARCHAR,
        PRIMARY KEY (workload, state_hash)
    );

    CREATE TABLE IF NOT EXISTS steps (
        step_id VARCHAR PRIMARY KEY,        -- hash of (workload, from_state, operator, site)
        workload VARCHAR NOT NULL,
        from_state VARCHAR NOT NULL,        -- the more optimized state
        to_state VARCHAR,                   -- the simplified state (NULL when refused)
        operator VARCHAR NOT NULL,
        site JSON NOT NULL,
        accepted BOOLEAN NOT NULL,
        category VARCHAR NOT NULL,          -- a gate category, or 'refused' (operator declined)
        message VARCHAR,
        gate_key VARCHAR,
        taken BOOLEAN NOT NULL DEFAULT false, -- the walker moved along this step
        roundtrip_ok BOOLEAN,
        roundtrip JSON,
        carrier VARCHAR,
        preconditions JSON,
        created_at TIMESTAMP DEFAULT current_timestamp
    );

"""
    + skills_table_ddl()
    + """  -- the columns: the Skill declaration (store/skill_record.py)

    CREATE TABLE IF NOT EXISTS skill_evidence (
        skill_id VARCHAR NOT NULL,
        step_id VARCHAR NOT NULL,
        PRIMARY KEY (skill_id, step_id)
    );

    CREATE TABLE IF NOT EXISTS materialization_runs (
        run_id VARCHAR PRIMARY KEY,
        workload VARCHAR NOT NULL,
        provider VARCHAR NOT NULL,
        model VARCHAR,
        skills_mode VARCHAR,
        order_mode VARCHAR,
        budget INTEGER,
        started_at TIMESTAMP DEFAULT current_timestamp,
        finished_at TIMESTAMP,
        best_kernel_hash VARCHAR,
        summary JSON
    );

    CREATE TABLE IF NOT EXISTS materialization_steps (
        run_id VARCHAR NOT NULL,
        step_index INTEGER NOT NULL,
        skill_id VARCHAR,
        operator VARCHAR,
        kernel_hash VARCHAR,
        gate_key VARCHAR,
        accepted BOOLEAN,
        kept BOOLEAN,
        category VARCHAR,
        message VARCHAR,
        time_ms DOUBLE,
        cost_usd DOUBLE,
        created_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (run_id, step_index)
    );

    CREATE TABLE IF NOT EXISTS llm_exchanges (
        exchange_id VARCHAR PRIMARY KEY,
        provider VARCHAR NOT NULL,
        model VARCHAR,
        purpose VARCHAR,
        prompt JSON,
        response VARCHAR,
        input_tokens INTEGER,
        output_tokens INTEGER,
        cache_read_tokens INTEGER,
        cache_write_tokens INTEGER,
        cost_usd DOUBLE,
        latency_s DOUBLE,
        error VARCHAR,
        created_at TIMESTAMP DEFAULT current_timestamp
    );
    """,
    # 2: materializer bookkeeping: run status and backend, step verdicts with detail, and which
    #    run and step an LLM exchange belongs to
    """
    ALTER TABLE materialization_runs ADD COLUMN IF NOT EXISTS status VARCHAR;
    ALTER TABLE materialization_runs ADD COLUMN IF NOT EXISTS backend VARCHAR;
    ALTER TABLE materialization_steps ADD COLUMN IF NOT EXISTS verdict VARCHAR;
    ALTER TABLE materialization_steps ADD COLUMN IF NOT EXISTS detail JSON;
    ALTER TABLE llm_exchanges ADD COLUMN IF NOT EXISTS run_id VARCHAR;
    ALTER TABLE llm_exchanges ADD COLUMN IF NOT EXISTS step_index INTEGER;
    """,
    # 3: GPU times of lineage states (and naive kernels) measured outside the gate (`klineage
    #    timings import`: every state of a lineage built, checked and timed in one GPU process),
    #    the effects of skills mined on the CPU emulator and the coverage of their lineages
    """
    CREATE TABLE IF NOT EXISTS kernel_timings (
        workload VARCHAR NOT NULL,
        kernel_hash VARCHAR NOT NULL,         -- a state, or the workload's naive kernel
        device VARCHAR NOT NULL,
        median_ms DOUBLE NOT NULL,
        torch_ms DOUBLE,                    -- the workload's vendor call, same run, same shape
        shape JSON,                         -- the bench bindings the time was taken at
        measured_at VARCHAR,                -- the measuring run's own date stamp
        source VARCHAR,                     -- the file the rows were imported from
        imported_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (workload, kernel_hash, device)
    );
    """,
    # 4: LLM prompts stored without repeating their static prefix (the system blocks: rules and
    #    skill cards, identical across a run's calls), which is kept once here, keyed by its hash;
    #    and why a mining run ended (a provider failure closes its row with the reason)
    """
    CREATE TABLE IF NOT EXISTS llm_prompt_prefixes (
        prefix_hash VARCHAR PRIMARY KEY,      -- SHA-256 of the prefix's JSON
        prefix JSON NOT NULL,                 -- the system blocks as sent
        created_at TIMESTAMP DEFAULT current_timestamp
    );
    ALTER TABLE llm_exchanges ADD COLUMN IF NOT EXISTS prefix_hash VARCHAR;
    ALTER TABLE mining_runs ADD COLUMN IF NOT EXISTS reason VARCHAR;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
