-- headroom store. One file per project; many runs per file.
PRAGMA application_id = 1213415757;  -- 'HRDM': marks the file as a headroom store
PRAGMA user_version = 5;             -- schema version, for migrations (2: runs.axis; 3: executions.overcommit_*;
                                     -- 4: executions.usage_source, artifacts, artifact_blobs, model_calls;
                                     -- 5: executions.started_at nullable, trials.source_run)
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
    source_run          TEXT,              -- imported trials: the run (job, run directory) they came from; NULL = native
    PRIMARY KEY (run_id, trial_id)
);
CREATE TABLE IF NOT EXISTS executions (
    run_id              TEXT NOT NULL,
    trial_id            TEXT NOT NULL,
    try                 INTEGER NOT NULL,
    status              TEXT NOT NULL,     -- running | finished | abandoned
    final               INTEGER NOT NULL DEFAULT 0,
    started_at          TEXT,              -- NULL = not recorded (an imported trial without times), never ''
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
    usage_source        TEXT,              -- where tokens_* and cost_usd come from: gateway | self-reported | NULL (none)
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
-- What a try left (orchestrator/artifacts): the agent's logs dir, its complete output, the exec log, the
-- gateway's transcript. Content is redacted, then addressed by its sha256 and stored compressed once.
CREATE TABLE IF NOT EXISTS artifact_blobs (
    sha256        TEXT PRIMARY KEY,        -- of the redacted (and, if the cap cut it, cut) content
    size          INTEGER NOT NULL,        -- bytes of that content
    codec         TEXT NOT NULL,           -- how data is compressed: zstd
    data          BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS artifacts (
    run_id        TEXT NOT NULL,
    trial_id      TEXT NOT NULL,
    try           INTEGER NOT NULL,
    name          TEXT NOT NULL,           -- e.g. agent/stdout, logs/trajectory.json (valid UTF-8; see artifacts/names.py)
    status        TEXT NOT NULL,           -- stored | truncated (the per-try cap cut it) | dropped (the cap was spent)
                                           -- | skipped (a symlink, FIFO, socket, device) | failed (could not be read or stored)
    sha256        TEXT REFERENCES artifact_blobs(sha256),  -- NULL unless stored or truncated
    size          INTEGER NOT NULL,        -- bytes kept
    original_size INTEGER,                 -- bytes the file had (NULL: unknown)
    detail        TEXT,                    -- why it was cut, skipped or failed
    added_at      TEXT NOT NULL,
    PRIMARY KEY (run_id, trial_id, try, name)
);
-- Every model call a try made through the gateway (orchestrator/agents/gateway); usage is the upstream's.
CREATE TABLE IF NOT EXISTS model_calls (
    run_id        TEXT NOT NULL,
    trial_id      TEXT NOT NULL,
    try           INTEGER NOT NULL,
    seq           INTEGER NOT NULL,        -- the try's calls in the order they ended, from 1
    started_at    TEXT NOT NULL,
    api           TEXT NOT NULL,           -- openai-chat | openai-responses | anthropic-messages
    model         TEXT,
    status        INTEGER NOT NULL,        -- the HTTP status the agent got (502: upstream unreachable)
    latency_s     REAL NOT NULL,
    streamed      INTEGER NOT NULL,
    tokens_in     INTEGER,                 -- all input tokens, cached ones included
    tokens_out    INTEGER,
    cached_tokens INTEGER,
    cost_usd      REAL,                    -- from the experiment's price table; NULL: no price for the model
    error         TEXT,
    PRIMARY KEY (run_id, trial_id, try, seq)
);
