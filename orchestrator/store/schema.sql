-- headroom store. One file per project; many runs per file.
PRAGMA application_id = 1213415757;  -- 'HRDM': marks the file as a headroom store
PRAGMA user_version = 3;             -- schema version, for migrations (2: runs.axis; 3: executions.overcommit_*)
-- A planned trial is a row of `trials`; every try of it is a row of `executions`.
-- Only executions with status 'finished' count; the one with final = 1 is the trial's result.
CREATE TABLE IF NOT EXISTS runs (
    run_id        TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    finished_at   TEXT,
    status        TEXT NOT NULL,           -- planned | running | interrupted | failed | finished
    backend       TEXT NOT NULL,
    enforcement   TEXT NOT NULL,
    spec_json     TEXT NOT NULL,           -- the full experiment spec
    owner         TEXT,                    -- host:pid of the process executing it now, or NULL
    axis          TEXT NOT NULL DEFAULT 'resources'  -- what the configurations are: resources (a sweep) | labels
);
CREATE TABLE IF NOT EXISTS provenance (
    run_id        TEXT PRIMARY KEY REFERENCES runs(run_id),
    json          TEXT NOT NULL            -- versions, git revision, host or cluster facts
);
CREATE TABLE IF NOT EXISTS tasks (
    run_id        TEXT NOT NULL REFERENCES runs(run_id),
    task_id       TEXT NOT NULL,
    digest        TEXT NOT NULL,
    cluster_id    TEXT NOT NULL,
    spec_json     TEXT NOT NULL,
    PRIMARY KEY (run_id, task_id)
);
CREATE TABLE IF NOT EXISTS trials (
    run_id              TEXT NOT NULL REFERENCES runs(run_id),
    trial_id            TEXT NOT NULL,
    task_id             TEXT NOT NULL,
    config_label        TEXT NOT NULL,
    request_multiplier  REAL NOT NULL,
    limit_multiplier    REAL,              -- NULL = unbounded
    attempt             INTEGER NOT NULL,
    seed                INTEGER NOT NULL,
    ord                 INTEGER NOT NULL,
    PRIMARY KEY (run_id, trial_id)
);
CREATE TABLE IF NOT EXISTS executions (
    run_id              TEXT NOT NULL,
    trial_id            TEXT NOT NULL,
    try                 INTEGER NOT NULL,
    status              TEXT NOT NULL,     -- running | finished | abandoned
    final               INTEGER NOT NULL DEFAULT 0,
    started_at          TEXT NOT NULL,
    finished_at         TEXT,
    outcome             TEXT,
    reason              TEXT,
    reward              REAL,
    enforcement         TEXT,
    qos_class           TEXT,
    request_cpus        REAL,
    request_memory_bytes INTEGER,
    limit_cpus          REAL,
    limit_memory_bytes  INTEGER,
    peak_memory_bytes   INTEGER,
    cpu_time_s          REAL,
    duration_s          REAL,
    tokens_in           REAL,
    tokens_out          REAL,
    cost_usd            REAL,
    -- What the try ran beside (the evidence's extra.overcommit, see orchestrator/overcommit.py), kept as
    -- columns so a report over a million tries reads them with the trial frame instead of parsing JSON.
    overcommit_ratio           REAL,       -- largest sum of concurrent limits / memory; NULL = not recorded
    overcommit_beside_unbounded INTEGER,   -- 1 if an unbounded try ran beside it
    overcommit_memory_pressure INTEGER,    -- 1 if its node reported MemoryPressure
    PRIMARY KEY (run_id, trial_id, try),
    FOREIGN KEY (run_id, trial_id) REFERENCES trials(run_id, trial_id)
);
CREATE TABLE IF NOT EXISTS evidence (
    run_id        TEXT NOT NULL,
    trial_id      TEXT NOT NULL,
    try           INTEGER NOT NULL,
    json          TEXT NOT NULL,           -- the backend's raw facts, verbatim
    PRIMARY KEY (run_id, trial_id, try)
);
CREATE INDEX IF NOT EXISTS executions_final ON executions(run_id, final);
