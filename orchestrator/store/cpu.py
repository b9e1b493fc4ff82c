"""Per trial, what the CPU did: CPU time, the time the steps ran, and the quota's throttling counters.

Read for ``headroom runs calibrate`` (orchestrator.stats.bands), which turns them into a
measured CPU floor. One row per final try, keyed like the trial frame
(task, configuration, attempt).

WHY the steps' time and not the trial's ``duration_s``: the CPU time is the trial
cgroup's counter (or the container's), which runs from the agent's start to the
verifier's end. The local backend's ``duration_s`` also counts the set-up outside the
cgroup (copying the task, making the cgroup), which would dilute the average; the
agent's time alone would overstate it, since the verifier's CPU is in the counter too.

Throttling counters arrive in three spellings (cgroup v2 ``cpu.stat``, cgroup v1
``cpu.stat``, the Docker stats endpoint's ``throttling_data``); they are read here
into one: periods, throttled periods, throttled seconds.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pandas as pd

CPU_QUERY = """
SELECT t.task_id, t.config_label, t.attempt, e.enforcement, CAST(e.cpu_time_s AS REAL) AS cpu_time_s,
       json_extract(v.json, '$.agent.duration_s') AS agent_s,
       json_extract(v.json, '$.verifier.duration_s') AS verifier_s,
       json_extract(v.json, '$.extra.cpu_throttling') AS throttling
FROM executions e JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
LEFT JOIN evidence v ON v.run_id = e.run_id AND v.trial_id = e.trial_id AND v.try = e.try
WHERE e.run_id = ? AND e.final = 1
"""
COLUMNS = ["task_id", "config_label", "attempt", "enforcement", "cpu_time_s", "busy_s", "nr_periods", "nr_throttled",
           "throttled_s"]


def throttling(raw: Any) -> tuple[float | None, float | None, float | None]:
    """(periods, throttled periods, throttled seconds) from any backend's record; None where absent."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None, None, None
    if not isinstance(raw, dict) or not raw:
        return None, None, None

    def num(*keys: str) -> float | None:
        for k in keys:
            v = raw.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
        return None

    periods, throttled = num("nr_periods", "periods"), num("nr_throttled", "throttled_periods")
    if (us := num("throttled_usec")) is not None:
        seconds: float | None = us / 1e6
    else:  # cgroup v1 and Docker count nanoseconds
        ns = num("throttled_time")
        seconds = None if ns is None else ns / 1e9
    return periods, throttled, seconds


def cpu_frame(db: sqlite3.Connection, run_id: str) -> pd.DataFrame:
    """One row per trial with a final result: CPU time, the steps' wall time, throttling (NaN where not recorded)."""
    rows = []
    for r in db.execute(CPU_QUERY, (run_id,)):
        agent_s, verifier_s = r["agent_s"], r["verifier_s"]
        # No agent step on record: no span the CPU time can be read against.
        busy = None if agent_s is None else float(agent_s) + float(verifier_s or 0.0)
        rows.append((r["task_id"], r["config_label"], r["attempt"], r["enforcement"], r["cpu_time_s"], busy,
                     *throttling(r["throttling"])))
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in COLUMNS[4:]:
        df[c] = df[c].astype(float)
    return df
