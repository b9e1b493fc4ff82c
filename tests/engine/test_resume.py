"""Interrupt a sweep (kill -9 of the CLI, or Ctrl-C), resume it: nothing lost, re-run or counted twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.cli_run import headroom as run_cli
from tests.cli_run import start as start_cli
from tests.taskfactory import write_task

pytestmark = pytest.mark.slow


def make_tasks(root: Path, marker: str) -> None:
    for name in ("alpha", "beta"):
        write_task(
            root, name, solve=f"python3 -c 'import time; time.sleep(0.35)' {marker}\ntouch \"$HEADROOM_WORKDIR/out\"\n"
        )


def start_sweep(root: Path, store: Path) -> subprocess.Popen[str]:
    return start_cli(
        "sweep",
        str(root),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "5",
        "--concurrency",
        "2",
        "--store",
        str(store),
        "--format",
        "none",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def executions(store: Path) -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return db.execute(
            "SELECT trial_id, try, status, final, started_at, finished_at, outcome FROM executions"
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def wait_for_finished(store: Path, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if store.exists() and sum(1 for r in executions(store) if r[2] == "finished") >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("sweep made no progress")


def check_complete(store: Path, before: list[tuple]) -> None:
    rows = executions(store)
    db = sqlite3.connect(store)
    planned = {r[0] for r in db.execute("SELECT trial_id FROM trials")}
    db.close()
    assert len(planned) == 2 * 2 * 5
    finals = [r for r in rows if r[3] == 1]
    assert sorted(r[0] for r in finals) == sorted(planned)  # every trial exactly once: none lost, none twice
    assert all(r[6] == "passed" for r in finals)
    # What had finished before the interruption is untouched: not re-run, not rewritten.
    after = {(r[0], r[1]): r for r in rows}
    for r in before:
        if r[2] == "finished":
            assert after[(r[0], r[1])] == r
    # Tries that were running when the CLI died stay on record as abandoned, and are never final.
    for r in rows:
        assert r[2] in ("finished", "abandoned")
        if r[2] == "abandoned":
            assert r[3] == 0


def test_resume_after_kill_9_loses_and_duplicates_nothing(tasks_root: Path, tmp_path: Path) -> None:
    marker = f"headroom-test-{uuid.uuid4().hex}"
    make_tasks(tasks_root, marker)
    store = tmp_path / "h.db"
    proc = start_sweep(tasks_root, store)
    wait_for_finished(store, 6, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = executions(store)
    assert any(r[2] == "running" for r in before)  # killed mid-trial
    assert sum(1 for r in before if r[3] == 1) < 20

    res = run_cli("resume", "--store", str(store), "--format", "json", timeout=120)
    assert res.returncode == 0, res.stderr
    assert "resuming run" in res.stderr
    check_complete(store, before)
    assert any(r[2] == "abandoned" for r in executions(store))
    # The dead CLI's orphaned trials were reaped, not left running.
    left = [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if marker in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE
    ]
    assert left == []
    import json

    report = json.loads(res.stdout)
    assert sum(c["n"] for c in report["configurations"]) == 20


def test_ctrl_c_then_resume(tasks_root: Path, tmp_path: Path) -> None:
    make_tasks(tasks_root, f"headroom-test-{uuid.uuid4().hex}")
    store = tmp_path / "h.db"
    proc = start_sweep(tasks_root, store)
    wait_for_finished(store, 4, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "headroom resume " in stderr
    assert "Traceback" not in stderr
    before = executions(store)
    assert not any(r[2] == "running" for r in before)  # a clean interrupt abandons what it cancelled
    db = sqlite3.connect(store)
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    db.close()
    res = run_cli("resume", "--store", str(store), "--format", "none", timeout=120)
    assert res.returncode == 0, res.stderr
    check_complete(store, before)
