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
``cpu.stat``, the Docker stats endpoint's ``throttling_data``); the evidence's
``CpuThrottling`` reads them into one: periods, throttled periods, throttled seconds.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pandas as pd
from pydantic import ValidationError

from orchestrator.spec.evidence import CpuThrottling, evidence_path

CPU_QUERY = f"""
SELECT t.task_id, t.config_label, t.attempt, e.enforcement, CAST(e.cpu_time_s AS REAL) AS cpu_time_s,
       json_extract(v.json, '$.agent.duration_s') AS agent_s,
       json_extract(v.json, '$.verifier.duration_s') AS verifier_s,
       json_extract(v.json, '{evidence_path("cpu_throttling")}') AS throttling
FROM executions e JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
LEFT JOIN evidence v ON v.run_id = e.run_id AND v.trial_id = e.trial_id AND v.try = e.try
WHERE e.run_id = ? AND e.final = 1
"""
COLUMNS = [
    "task_id",
    "config_label",
    "attempt",
    "enforcement",
    "cpu_time_s",
    "busy_s",
    "nr_periods",
    "nr_throttled",
    "throttled_s",
]


def throttling(raw: Any) -> tuple[float | None, float | None, float | None]:
    """(periods, throttled periods, throttled seconds) from any backend's record (a ``CpuThrottling``, as
    stored JSON); None where absent or unreadable."""
    if not raw:
        return None, None, None
    try:
        counters = (
            CpuThrottling.model_validate_json(raw)
            if isinstance(raw, str | bytes)
            else CpuThrottling.model_validate(raw)
        )
    except ValidationError:
        return None, None, None
    return counters.read()


def cpu_frame(db: sqlite3.Connection, run_id: str) -> pd.DataFrame:
    """One row per trial with a final result: CPU time, the steps' wall time, throttling (NaN where not recorded)."""
    rows = []
    for r in db.execute(CPU_QUERY, (run_id,)):
        agent_s, verifier_s = r["agent_s"], r["verifier_s"]
        # No agent step on record: no span the CPU time can be read against.
        busy = None if agent_s is None else float(agent_s) + float(verifier_s or 0.0)
        rows.append(
            (
                r["task_id"],
                r["config_label"],
                r["attempt"],
                r["enforcement"],
                r["cpu_time_s"],
                busy,
                *throttling(r["throttling"]),
            )
        )
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in COLUMNS[4:]:
        df[c] = df[c].astype(float)
    return df
