"""The statistics' input, read from a store column by column.

WHY not the sqlite3 module: a million trials through ``cursor.fetchall()`` make
thirteen million Python objects before pandas sees one, and that alone took
several times longer than the whole analysis. The ADBC SQLite driver runs the
same SQL and hands back Arrow columns built in C; pandas wraps them without a
per-row loop. The query, not the driver, defines what a trial is (see
:meth:`orchestrator.store.sqlite.Store.trial_frame`).

Type inference: the driver infers each column's type from its first batch, and
an all-NULL first batch (no agent reported a cost in the first rows) would be
typed int64 and then fail on the first float. One batch holding every row
makes the inference see every value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from orchestrator.contract.outputs import USAGE_CAPS
from orchestrator.spec.evidence import evidence_path
from orchestrator.spec.outcome import OUTCOME_SQL, REASON_SQL

# Enough for any store: the whole result arrives as one batch (see module docstring).
_ONE_BATCH = str(2**30)


def _capped(col: str) -> str:
    """A self-reported usage column within its per-try cap, else NULL (not reported). Stores are
    capped as they are written; one written before may hold 1e308, and two of those sum to inf."""
    return f"(CASE WHEN {col} <= {USAGE_CAPS[col.rpartition('.')[2]]!r} THEN {col} END)"


# The agent could not start: the outcome harness_error(agent_not_found), or an exit of 126/127 kept as evidence
# (settle writes ``extra.agent_not_found``; the verifier's verdict stands). instr() skips the JSON parse for the
# evidence that does not mention it; json_extract() then checks it is the key, not text an agent printed.
AGENT_NOT_FOUND = (
    "CAST((e.reason IS 'agent_not_found') OR EXISTS (SELECT 1 FROM evidence v WHERE v.run_id = e.run_id "
    "AND v.trial_id = e.trial_id AND v.try = e.try AND instr(v.json, '\"agent_not_found\"') > 0 "
    f"AND json_extract(v.json, '{evidence_path('agent_not_found')}') IS NOT NULL) AS INTEGER)"
)

# A try whose model usage the gateway could not put all on record (rows the store refused, a stream that ended
# without its usage, a call still streaming at the end): ModelUsage.incomplete, summed over all its tries.
USAGE_INCOMPLETE = (
    "CAST(EXISTS (SELECT 1 FROM evidence v WHERE v.run_id = e.run_id AND v.trial_id = e.trial_id "
    "AND instr(v.json, '\"model_usage\"') > 0 AND (COALESCE(json_extract(v.json, '$.model_usage.unrecorded_calls'), 0) "
    "+ COALESCE(json_extract(v.json, '$.model_usage.usage_missing'), 0) "
    "+ COALESCE(json_extract(v.json, '$.model_usage.in_flight_at_close'), 0)) > 0) AS INTEGER)"
)

TRIAL_QUERY = f"""
SELECT t.task_id, t.config_label, t.request_multiplier, t.limit_multiplier, t.attempt,
       {OUTCOME_SQL} AS outcome, {REASON_SQL} AS reason,
       CAST(e.duration_s + COALESCE(r.duration_s, 0) AS REAL) AS duration_s,
       CAST({_capped("e.cost_usd")} + COALESCE(r.cost_usd, 0) AS REAL) AS cost_usd,
       CAST({_capped("e.tokens_in")} + COALESCE(r.tokens_in, 0) AS REAL) AS tokens_in,
       CAST({_capped("e.tokens_out")} + COALESCE(r.tokens_out, 0) AS REAL) AS tokens_out,
       CAST(e.peak_memory_bytes AS REAL) AS peak_memory_bytes,
       CAST(e.limit_memory_bytes AS REAL) AS memory_limit_bytes,
       e.enforcement, e.qos_class, NULLIF(e.started_at, '') AS started_at, t.ord AS plan_order,
       CAST(e.reward AS REAL) AS reward, {{source_run}},
       {{overcommit}}, {{usage_source}}, {AGENT_NOT_FOUND} AS agent_not_found,
       {USAGE_INCOMPLETE} AS usage_incomplete
FROM executions e JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
LEFT JOIN (SELECT trial_id, SUM(duration_s) AS duration_s, SUM({_capped("cost_usd")}) AS cost_usd,
                  SUM({_capped("tokens_in")}) AS tokens_in, SUM({_capped("tokens_out")}) AS tokens_out
           FROM executions INDEXED BY executions_final WHERE run_id = ?1 AND final = 0 AND status = 'finished'
           GROUP BY trial_id) r ON r.trial_id = e.trial_id
WHERE e.run_id = ?1 AND e.final = 1
"""
OVERCOMMIT = ("overcommit_ratio", "overcommit_beside_unbounded", "overcommit_memory_pressure")
# Stores older than schema 3 opened read-only have no such columns: the frame then carries NULLs.
_OVERCOMMIT_SELECT = {
    True: ", ".join(f"CAST(e.{c} AS REAL) AS {c}" for c in OVERCOMMIT),
    False: ", ".join(f"CAST(NULL AS REAL) AS {c}" for c in OVERCOMMIT),
}
# Stores older than schema 4 have no usage_source: what they hold was self-reported (the migration says so).
_USAGE_SOURCE_SELECT = {
    True: "e.usage_source AS usage_source",
    False: "CASE WHEN COALESCE(e.tokens_in, e.tokens_out, e.cost_usd) IS NOT NULL "
    "THEN 'self-reported' END AS usage_source",
}
# Imported trials name the run they came from (schema 5); older stores opened read-only carry NULL.
_SOURCE_RUN_SELECT = {True: "t.source_run AS source_run", False: "CAST(NULL AS TEXT) AS source_run"}
# The outcome and reason are read in this version's taxonomy (an older failed(abstained) row is
# abstained): see orchestrator.spec.outcome.current_outcome.
# Cost, tokens and time of a trial include its retried tries: they were really spent to
# get this result. The retried tries are few (an index range on final = 0), so their
# aggregate is a small join.

INTEGER = ("attempt", "plan_order", "agent_not_found")
USAGE = ("cost_usd", "tokens_in", "tokens_out")
NUMERIC = (
    "request_multiplier",
    "limit_multiplier",
    "duration_s",
    "cost_usd",
    "tokens_in",
    "tokens_out",
    "peak_memory_bytes",
    "memory_limit_bytes",
    "reward",
    *OVERCOMMIT,
)


def read_trial_frame(
    path: Path,
    run_id: str,
    *,
    immutable: bool = False,
    with_overcommit: bool = True,
    with_usage_source: bool = True,
    with_source_run: bool = True,
) -> pd.DataFrame:
    """One row per trial with a final result, plus its cluster; opened read-only.

    ``immutable``: the file sits where nothing can write (a read-only mount), so SQLite
    cannot make its WAL index there; it is then read as the immutable file it is.
    ``with_overcommit``: the store has schema 3's overcommit columns; ``with_usage_source``: schema 4's
    usage_source (the final try's: a run's tries all had the gateway or none did); ``with_source_run``:
    schema 5's ``trials.source_run``. A start time that was not recorded is NULL (NaT in the frame), never ''.
    """
    import adbc_driver_sqlite.dbapi as adbc  # heavy import, only when a report is made

    uri = f"{Path(path).resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
    with adbc.connect(uri) as conn, conn.cursor() as cur:
        cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": _ONE_BATCH})
        cur.execute(
            TRIAL_QUERY.format(
                overcommit=_OVERCOMMIT_SELECT[with_overcommit],
                usage_source=_USAGE_SOURCE_SELECT[with_usage_source],
                source_run=_SOURCE_RUN_SELECT[with_source_run],
            ),
            (run_id,),
        )
        table = cur.fetch_arrow_table()
        cur.execute("SELECT task_id, cluster_id FROM tasks WHERE run_id = ?", (run_id,))
        clusters = dict(zip(*(c.to_pylist() for c in cur.fetch_arrow_table().columns)))
    return _to_frame(table, clusters)


def _to_frame(table: pa.Table, clusters: dict[str, str]) -> pd.DataFrame:
    """Arrow columns to pandas without a per-row loop; numbers as float64, text as pandas strings.

    Text stays plain strings rather than categoricals so every consumer of the frame
    (groupby, comparisons) behaves as on any other frame; with pandas 3 they are
    Arrow-backed, so the conversion copies no Python objects.
    """
    cols: dict[str, pa.ChunkedArray] = {}
    for name in table.column_names:
        col = table.column(name)
        if name in NUMERIC:
            col = col.cast(pa.float64())  # an all-NULL column arrives typed int64
        elif name == "started_at":
            col = _timestamps(col.cast(pa.string()))
        elif name not in INTEGER:
            col = col.cast(pa.string())  # likewise, an all-NULL text column
        cols[name] = col
    task = cols["task_id"].combine_chunks().dictionary_encode()
    cluster_of = pa.array([clusters.get(t) for t in task.dictionary.to_pylist()], pa.string())
    cols["cluster_id"] = pa.chunked_array([cluster_of.take(task.indices)], pa.string())
    df = pa.table(cols).to_pandas()
    # Self-reported usage is capped when stored; a store written before the caps may hold 1e308,
    # whose sum is inf. Such a trial did not report (NaN): a report total must stay finite.
    for name in USAGE:
        if name in df:
            df[name] = df[name].where(np.isfinite(df[name]))
    return df


def _timestamps(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """ISO times as UTC timestamps, parsed in C (a million strings through pandas take a second).

    The store writes them with an offset; anything else stays text for the reader to parse.
    """
    try:
        return col.cast(pa.timestamp("ms", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return col


def config_facts(df: pd.DataFrame) -> dict[str, dict[str, list[str]]]:
    """Per configuration: the enforcement mechanisms and QoS classes its final tries ran under."""
    out: dict[str, dict[str, list[str]]] = {}
    if df.empty:
        return out
    seen = df[["config_label", "enforcement", "qos_class"]].drop_duplicates()
    for label, enforcement, qos in seen.itertuples(index=False):
        facts = out.setdefault(str(label), {"enforcement": [], "qos_class": []})
        for key, value in (("enforcement", enforcement), ("qos_class", qos)):
            if pd.notna(value) and value not in facts[key]:
                facts[key] = sorted([*facts[key], str(value)])
    return out
