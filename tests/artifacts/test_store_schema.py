"""Schema 4: artifacts, model calls and the usage source; older stores open read-only and migrate in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd

from orchestrator.artifacts import reader
from orchestrator.store.sqlite import SCHEMA_VERSION, Store


def _schema_3_store(path: Path) -> None:
    store = Store(path)
    db = store.db
    db.execute(
        "INSERT INTO runs (run_id, name, created_at, status, backend, enforcement, spec_json) "
        "VALUES ('r', 'n', '2026-01-01', 'finished', 'local', 'cgroup-v1', '{}')"
    )
    db.execute("INSERT INTO tasks VALUES ('r', 't', 'd', 'c', '{}')")
    for i, tokens in enumerate((120.0, None)):
        db.execute(
            "INSERT INTO trials (run_id, trial_id, task_id, config_label, request_multiplier, limit_multiplier, "
            "attempt, seed, ord) VALUES ('r', ?, 't', '1x', 1, 1, ?, 0, ?)",
            (f"x{i}", i, i),
        )
        db.execute(
            "INSERT INTO executions (run_id, trial_id, try, status, final, started_at, outcome, tokens_in) "
            "VALUES ('r', ?, 0, 'finished', 1, '2026-01-01T00:00:00+00:00', 'passed', ?)",
            (f"x{i}", tokens),
        )
    for table in ("artifacts", "artifact_blobs", "model_calls"):
        db.execute(f"DROP TABLE {table}")
    db.execute("ALTER TABLE executions DROP COLUMN usage_source")
    db.execute("ALTER TABLE trials DROP COLUMN source_run")  # schema 5's
    db.execute("PRAGMA user_version = 3")
    store.close()


def test_a_schema_3_store_reads_as_self_reported_and_migrates(tmp_path: Path) -> None:
    assert SCHEMA_VERSION >= 4  # step 4 of the migration is the one under test; later steps run after it
    path = tmp_path / "v3.db"
    _schema_3_store(path)
    old = Store.open_existing(path)  # read-only: nothing added, nothing crashes
    frame = old.trial_frame("r").set_index("attempt")
    assert frame.loc[0, "usage_source"] == "self-reported" and pd.isna(frame.loc[1, "usage_source"])
    assert reader.list_artifacts(old.db, "r", "x0") == [] and reader.run_manifest(old.db, "r") == []
    old.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 3

    migrated = Store(path)
    assert migrated.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    sources = dict(migrated.db.execute("SELECT trial_id, usage_source FROM executions").fetchall())
    assert sources == {"x0": "self-reported", "x1": None}
    tables = {r[0] for r in migrated.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"artifacts", "artifact_blobs", "model_calls"} <= tables
    migrated.close()
