"""The store keeps a time that was not recorded as NULL, never '': schema 5, its migration and its readers."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd

from orchestrator.spec.provenance import Provenance
from orchestrator.stats.drift import drift_check
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord
from orchestrator.store.sqlite import SCHEMA_VERSION, Store


def _imported(n: int, started: list[str | None]) -> tuple[RunRecord, list[TaskRecord], list[TrialRecord]]:
    run = RunRecord(
        "r",
        "import:terminal-bench",
        "tb",
        "labels",
        {"configurations": ["c"]},
        Provenance.model_validate({"import": {"sources": []}}),
        run_id="r",
    )
    trials = [
        TrialRecord(
            f"t{i}",
            "task",
            "c",
            1.0,
            None,
            i,
            0,
            i,
            source_run="run-1" if i % 2 else "run-2",
            executions=[
                ExecutionRecord(
                    0,
                    "finished",
                    True,
                    started[i],
                    None,
                    "passed",
                    evidence={"source": "terminal-bench", "is_resolved": True},
                )
            ],
        )
        for i in range(n)
    ]
    return run, [TaskRecord("task", "unrecorded", "task", {})], trials


def test_an_unrecorded_time_is_stored_and_exported_as_null(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.import_run(*_imported(3, [None, "2026-01-01T00:00:00+00:00", None]))
    rows = store.db.execute("SELECT trial_id, started_at, finished_at FROM executions ORDER BY trial_id").fetchall()
    assert [tuple(r) for r in rows] == [
        ("t0", None, None),
        ("t1", "2026-01-01T00:00:00+00:00", None),
        ("t2", None, None),
    ]
    _, _, trials = store.export_run("r")
    assert [t.executions[0].started_at for t in trials] == [None, "2026-01-01T00:00:00+00:00", None]
    assert [t.source_run for t in trials] == ["run-2", "run-1", "run-2"]
    frame = store.trial_frame("r")
    assert frame["started_at"].isna().tolist() == [True, False, True]
    assert frame["source_run"].tolist() == ["run-2", "run-1", "run-2"]
    store.close()


def test_a_schema_3_store_with_empty_string_times_is_migrated_to_null(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    store = Store(path)
    store.import_run(*_imported(2, ["2026-01-01T00:00:00+00:00", "2026-01-01T00:00:01+00:00"]))
    store.db.execute("UPDATE executions SET started_at = '', finished_at = '' WHERE trial_id = 't0'")
    store.close()
    # Back to schema 3's shape: started_at NOT NULL, no trials.source_run.
    db = sqlite3.connect(path)
    db.executescript("""
        PRAGMA foreign_keys = OFF;
        CREATE TABLE executions_old AS SELECT * FROM executions;
        DROP TABLE executions;
        CREATE TABLE executions (run_id TEXT NOT NULL, trial_id TEXT NOT NULL, try INTEGER NOT NULL,
            status TEXT NOT NULL, final INTEGER NOT NULL DEFAULT 0, started_at TEXT NOT NULL, finished_at TEXT,
            outcome TEXT, reason TEXT, reward REAL, enforcement TEXT, qos_class TEXT, request_cpus REAL,
            request_memory_bytes INTEGER, limit_cpus REAL, limit_memory_bytes INTEGER, peak_memory_bytes INTEGER,
            cpu_time_s REAL, duration_s REAL, tokens_in REAL, tokens_out REAL, cost_usd REAL,
            overcommit_ratio REAL, overcommit_beside_unbounded INTEGER, overcommit_memory_pressure INTEGER,
            PRIMARY KEY (run_id, trial_id, try));
        INSERT INTO executions SELECT run_id, trial_id, try, status, final, started_at, finished_at, outcome,
            reason, reward, enforcement, qos_class, request_cpus, request_memory_bytes, limit_cpus,
            limit_memory_bytes, peak_memory_bytes, cpu_time_s, duration_s, tokens_in, tokens_out, cost_usd,
            overcommit_ratio, overcommit_beside_unbounded, overcommit_memory_pressure FROM executions_old;
        CREATE INDEX executions_final ON executions(run_id, final);
        DROP TABLE executions_old;
        ALTER TABLE trials DROP COLUMN source_run;
        PRAGMA user_version = 3;
    """)
    db.close()
    old = Store.open_existing(path)  # read-only, not migrated: '' still reads as no time, never as a time
    frame = old.trial_frame("r")
    assert frame["started_at"].isna().tolist() == [True, False] and frame["source_run"].isna().all()
    old.close()
    migrated = Store(path)
    assert migrated.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    rows = migrated.db.execute("SELECT started_at, finished_at FROM executions ORDER BY trial_id").fetchall()
    assert [tuple(r) for r in rows] == [(None, None), ("2026-01-01T00:00:01+00:00", None)]
    notnull = {r[1]: r[3] for r in migrated.db.execute("PRAGMA table_info(executions)")}
    assert notnull["started_at"] == 0
    assert "source_run" in {r[1] for r in migrated.db.execute("PRAGMA table_info(trials)")}
    assert migrated.db.execute("PRAGMA foreign_key_check").fetchall() == []
    migrated.close()


def test_drift_leaves_out_trials_without_a_time_and_says_how_many() -> None:
    times = [None if i % 5 == 0 else f"2026-01-01T00:{i:02d}:00+00:00" for i in range(60)]
    times[3] = ""
    df = pd.DataFrame(
        {
            "config_label": "c",
            "task_id": [f"t{i % 5}" for i in range(60)],
            "attempt": 0,
            "outcome": ["passed" if i % 3 else "failed" for i in range(60)],
            "started_at": times,
        }
    )
    out = drift_check(df)
    assert out["n_without_time"] == 13 and sum(b["n"] for b in out["blocks"]) == 47
    assert "13 trial(s) without one left out" in out["ordered_by"]
    none = drift_check(df.assign(started_at=None))
    assert none["note"] == "not testable: none of the 60 trials recorded a start time" and not none["blocks"]
    json.dumps(out, allow_nan=False)  # no NaN block index, no NaN anywhere
