"""Runs you can tell apart: `sweep --name`, `headroom runs` (table and --json), a stale run shown as interrupted,
`headroom resume RUN` with the one way of naming a run (no old `sweep --resume` or `--run-id`);
`runs cleanup RUN` names a run the same way."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli.conftest import Headroom, one_line_error
from tests.taskfactory import write_task


@pytest.fixture
def store(tasks_root: Path, tmp_path: Path, headroom: Headroom) -> Path:
    write_task(tasks_root, "good", solve='touch "$HEADROOM_WORKDIR/out"\n')
    write_task(tasks_root, "bad", solve="true\n")
    path = tmp_path / "h.db"
    for name, model in (("baseline", "m-1"), ("candidate", "m-2")):
        res = headroom(
            "sweep",
            str(tasks_root),
            "--name",
            name,
            "--model",
            model,
            "--multipliers",
            "1,unbounded",
            "--attempts",
            "1",
            "--store",
            str(path),
            "--format",
            "none",
            "--no-canary",
        )
        assert res.returncode == 0, res.stderr
    return path


def runs_json(headroom: Headroom, store: Path) -> list[dict]:
    res = headroom("runs", "--store", str(store), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["runs"]


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_runs_show_name_agent_model_trials_and_score(store: Path, headroom: Headroom) -> None:
    rows = runs_json(headroom, store)
    assert [(r["name"], r["model"], r["agent"], r["status"]) for r in rows] == [
        ("baseline", "m-1", "oracle", "finished"),
        ("candidate", "m-2", "oracle", "finished"),
    ]
    for r in rows:  # 2 tasks x 2 configurations; only "good" passes
        assert (r["trials_finished"], r["trials_planned"], r["passed"], r["score"]) == (4, 4, 2, 0.5)
    table = headroom("runs", "--store", str(store)).stdout
    assert "baseline" in table and "m-2" in table and "4/4" in table and "50.0%" in table


def test_a_run_whose_process_is_gone_shows_as_interrupted(store: Path, headroom: Headroom) -> None:
    """What `kill -9` leaves: status running, the owner host:pid of a process that no longer exists."""
    first = runs_json(headroom, store)[0]["run_id"]
    with closing(sqlite3.connect(store)) as db, db:
        db.execute(
            "UPDATE runs SET status='running', owner=? WHERE run_id=?", (f"{socket.gethostname()}:{dead_pid()}", first)
        )
    res = headroom("runs", "--store", str(store))
    row = next(r for r in runs_json(headroom, store) if r["run_id"] == first)
    assert row["status"] == "interrupted" and row["recorded_status"] == "running"
    assert "is gone" in row["status_detail"]
    assert f"headroom resume {store}:{first}" in res.stderr
    with closing(sqlite3.connect(store)) as db, db:  # another host's process cannot be checked from here
        db.execute("UPDATE runs SET owner='elsewhere:1' WHERE run_id=?", (first,))
    row = next(r for r in runs_json(headroom, store) if r["run_id"] == first)
    assert row["status"] == "running" and "on elsewhere" in row["status_detail"] and row["last_activity"]


def test_resume_names_a_run_like_every_other_command(store: Path, headroom: Headroom) -> None:
    first, second = (r["run_id"] for r in runs_json(headroom, store))
    with closing(sqlite3.connect(store)) as db, db:  # as a crash leaves it: the last try unfinished
        db.execute("UPDATE runs SET status='interrupted' WHERE run_id=?", (first,))
        db.execute(
            "DELETE FROM executions WHERE run_id=? AND trial_id=(SELECT MAX(trial_id) FROM executions WHERE run_id=?)",
            (first, first),
        )
    res = headroom("resume", f"{store}:{first}", "--format", "json", "--no-canary")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["run"]["run_id"] == first
    assert [r["status"] for r in runs_json(headroom, store)] == ["finished", "finished"]
    again = headroom("resume", first, "--store", str(store), "--format", "none")
    assert again.returncode == 0 and "nothing to resume" in again.stderr
    latest = headroom("resume", str(store), "--format", "none")  # a store file alone: its latest run
    assert latest.returncode == 0 and second in latest.stderr


def test_the_old_spellings_of_a_run_are_gone(store: Path, headroom: Headroom) -> None:
    first = runs_json(headroom, store)[0]["run_id"]
    one_line_error(headroom("sweep", "--resume", "--store", str(store)), "No such option", "--resume")
    one_line_error(headroom("report", "--store", str(store), "--run-id", first), "No such option", "--run-id")
    assert json.loads(headroom("report", f"{store}:{first}", "--format", "json").stdout)["run"]["name"] == "baseline"


def test_runs_alone_lists_as_runs_list_does(store: Path, headroom: Headroom) -> None:
    bare, listed = (
        headroom("runs", "--store", str(store), "--json"),
        headroom("runs", "list", "--store", str(store), "--json"),
    )
    assert bare.returncode == listed.returncode == 0 and bare.stdout == listed.stdout
    assert "Commands:" in headroom("runs", "--help").stdout  # --help is the group's, not the listing's
    one_line_error(headroom("runs", "nope"), "No such command 'nope'")


def test_cleanup_takes_run_like_every_other_command(store: Path, headroom: Headroom) -> None:
    """RUN as a bare id (taken as written), as FILE:RUN_ID or as a store file."""
    first, second = (r["run_id"] for r in runs_json(headroom, store))
    for args in ([first], [f"{store}:{first}"], [str(store)], ["20261201T000000Z-abcdef"]):
        res = headroom("runs", "cleanup", *args)
        assert res.returncode == 0, res.stderr
        assert res.lines[-1].endswith("removed, 0 kept"), res.stderr
    one_line_error(headroom("runs", "cleanup", first, second), "unexpected extra argument")
    one_line_error(headroom("runs", "cleanup", f"{store}:nope"), "no run 'nope'")
    one_line_error(headroom("runs", "cleanup", "--namespace", "ns"), "--namespace", "applies to --backend kubernetes")
