"""The typed provenance (orchestrator/spec/provenance.py): a run's record and its canary's verdict, one versioned
model from writer to reader; rows written before it was typed still read, newer rows are refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.engine.canary_verdict import not_run, run_problems
from orchestrator.errors import UserError
from orchestrator.report import document
from orchestrator.spec.provenance import SCHEMA_VERSION, CanaryVerdict, Provenance, read_stored
from orchestrator.store.sqlite import Store
from orchestrator.view.data import isolation_of
from tests.cli_run import headroom
from tests.engine.test_evidence import _local_run

PROBLEM = "1x-strict on local: memory is capped only by the rlimit fallback"

#: A run's provenance as headroom wrote it before it was typed: no version, a key since retired at the top
#: level (``isolation``) and one inside the canary's arm (``hog_mb``).
OLD_ROW: dict[str, Any] = {
    "orchestrator": {"version": "0.1.0", "revision": "0" * 40, "dirty": False},
    "python": "3.11.9",
    "packages": {"pydantic": "2.9.0", "kubernetes": None},
    "backend": {"name": "local", "kernel": "6.1.0", "cpu_count": 2},
    "started_at": "2026-01-02T02:04:05+00:00",
    "started_at_local": "2026-01-02T03:04:05+01:00",
    "command": ["headroom", "sweep", "tasks"],
    "isolation": "namespaces",
    "faithful": {"backend": "local", "run_on_host": False, "tasks_run_on_host": {}, "architectures": []},
    "agent_preflight": {"where": "local", "checked": True, "note": None},
    "canary": {
        "status": "flagged",
        "backend": "local",
        "enforcement": "rlimit",
        "started_at": "2026-01-02T02:04:00+00:00",
        "targets": ["local"],
        "by_target": {"local": "weak"},
        "skipped_targets": [],
        "arms": [
            {
                "config": "1x-strict",
                "target": "local",
                "status": "weak",
                "limit_memory_bytes": 64 * 2**20,
                "limit_cpus": 0.25,
                "above": {"verdict": "failed", "exit_code": 1, "oom_evidence": None},
                "below": {"verdict": "passed"},
                "problems": ["memory is capped only by the rlimit fallback"],
                "notes": [],
                "hog_mb": 80,
            }
        ],
        "cpu": {"local": {"limit_cpus": 0.25, "declared": True, "problems": [], "notes": [], "limited": True}},
        "problems": [PROBLEM],
    },
    "overcommit": {
        "capacity_bytes": 2**33,
        "placement": "default",
        "concurrency": 1,
        "worst_concurrent_limit_bytes": {"1x-strict": 64 * 2**20},
        "warnings": [],
    },
    "paused": [{"at": "2026-01-02T02:10:00+00:00", "why": "provider down"}],
}


def _write_row(path: Path, run_id: str, row: dict[str, Any]) -> None:
    """Overwrite a run's provenance row with plain SQLite, as an older headroom left it."""
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute("UPDATE provenance SET json = ? WHERE run_id = ?", (json.dumps(row), run_id))
    finally:
        db.close()


def _raw_row(path: Path, run_id: str) -> dict[str, Any]:
    db = sqlite3.connect(path)
    try:
        (text,) = db.execute("SELECT json FROM provenance WHERE run_id = ?", (run_id,)).fetchone()
    finally:
        db.close()
    row: dict[str, Any] = json.loads(text)
    return row


def test_an_old_shape_provenance_row_reads_as_the_model_through_every_reader(tasks_root: Path, tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    store = Store(path)
    run_id, _ = _local_run(tasks_root, store)
    store.close()
    _write_row(path, run_id, OLD_ROW)

    store = Store(path)
    prov = store.provenance(run_id)
    assert isinstance(prov, Provenance) and prov.schema_version == SCHEMA_VERSION
    assert prov.canary is not None and prov.canary.flagged and prov.canary.arms[0].above.verdict == "failed"
    assert prov.canary.cpu["local"].limited is True and prov.paused[0].why == "provider down"
    assert prov.legacy == {"isolation": "namespaces", "canary.arms.0.hog_mb": 80}  # kept, by dotted path
    assert prov.tasks["t"].digest == store.task_specs(run_id)[0].digest  # the store's own part, on read

    # the readers: the canary's verdict, the viewer's isolation (an early row's, from legacy), the report
    assert run_problems(prov) == [PROBLEM]
    assert isolation_of(prov) == "namespaces"
    doc = document.build(store, run_id)
    assert doc.checks is not None and doc.checks.canary.status == "flagged" and not doc.checks.resource_sweep.valid
    assert doc.checks.paused[0].at == "2026-01-02T02:10:00+00:00"
    shown = doc.to_dict()["provenance"]  # `report --format json`: the row's keys, as written
    assert set(shown) == (set(OLD_ROW) - {"isolation"}) | {"schema_version", "legacy", "tasks"}
    assert shown["canary"]["arms"][0]["above"] == {"verdict": "failed", "exit_code": 1, "oom_evidence": None}

    # a --resume re-stores the row at this version; nothing an older writer put there is lost
    store.append_canary_resumed(run_id, not_run("not requested (--no-canary)"))
    row = _raw_row(path, run_id)
    assert row["schema_version"] == SCHEMA_VERSION and "isolation" not in row
    assert row["legacy"] == {"isolation": "namespaces", "canary.arms.0.hog_mb": 80}
    assert [c["status"] for c in row["canary_resumed"]] == ["not run"] and "tasks" not in row
    assert read_stored(row).canary == prov.canary

    # a bundle carries it whole into another store
    bundled = Store(tmp_path / "b.db")
    copied = bundled.provenance(bundled.import_run(*store.export_run(run_id)))
    assert copied.legacy == prov.legacy and copied.canary == prov.canary and copied.paused == prov.paused
    bundled.close()
    store.close()

    report = headroom("report", f"{path}:{run_id}", "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["provenance"]["canary"]["status"] == "flagged"


def test_a_newer_row_is_refused_with_its_version(tasks_root: Path, tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    store = Store(path)
    run_id, _ = _local_run(tasks_root, store)
    store.close()
    _write_row(path, run_id, {"schema_version": SCHEMA_VERSION + 1})
    store = Store(path)
    with pytest.raises(UserError, match=f"provenance schema version {SCHEMA_VERSION + 1} is newer"):
        store.provenance(run_id)
    store.close()
    report = headroom("report", f"{path}:{run_id}", "--format", "json")
    assert report.returncode != 0 and "Traceback" not in report.stderr, report.stderr
    assert f"provenance schema version {SCHEMA_VERSION + 1} is newer than this headroom reads" in report.stderr


def test_a_writer_cannot_invent_a_key_and_only_what_it_set_is_written() -> None:
    with pytest.raises(ValidationError):
        Provenance.model_validate({"isolation": "none"})  # only a stored row's reader sets keys aside
    with pytest.raises(ValidationError):
        CanaryVerdict.model_validate({"status": "enforced", "verdict": "ok"})
    prov = Provenance(python="3.11.9")
    prov.canary = not_run("not requested (--no-canary)")
    assert prov.to_stored() == {
        "schema_version": SCHEMA_VERSION,
        "python": "3.11.9",
        "canary": {"status": "not run", "reason": "not requested (--no-canary)", "arms": [], "problems": []},
    }
    assert Provenance.model_validate({"import": {"sources": []}}).to_stored()["import"] == {"sources": []}
