"""A store that cannot be used says why in one line: newer schema, corrupt, full disk, lost WAL, read-only."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from orchestrator.store.sqlite import SCHEMA_VERSION
from tests.cli_run import start as start_cli
from tests.engine.test_cli_input_errors import OK_SOLVE, assert_user_error, headroom
from tests.taskfactory import write_task


def _one_run(tasks_root: Path, store: Path, attempts: int = 1) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    res = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1",
        "--attempts",
        str(attempts),
        "--store",
        str(store),
        "--format",
        "none",
    )
    assert res.returncode == 0, res.stderr


def _last_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """For commands that print progress before failing: exit 2, no traceback, the last line says why."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error:"), proc.stderr
    for n in needles:
        assert n in last, last


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real, tiny file system of our own (tmpfs), so a full or read-only disk needs no mock."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_store_from_a_newer_schema_is_refused_not_downgraded(tasks_root: Path, tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    _one_run(tasks_root, store)
    db = sqlite3.connect(store)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    for args in (("report",), ("runs",), ("resume",), ("sweep", str(tasks_root), "--attempts", "1")):
        assert_user_error(headroom(*args, "--store", str(store)), str(store), "newer headroom")
    assert sqlite3.connect(store).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1


def test_a_corrupt_store_gets_one_line(tasks_root: Path, tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    _one_run(tasks_root, store, attempts=3)
    sqlite3.connect(store).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    data = bytearray(store.read_bytes())
    page = 4096
    data[page:] = os.urandom(len(data) - page)  # every page but the header's
    store.write_bytes(bytes(data))
    for args in (("report", "--format", "json"), ("runs",), ("resume",)):
        proc = headroom(*args, "--store", str(store))
        assert_user_error(proc)
        assert "corrupt" in proc.stderr or "not a headroom store" in proc.stderr, proc.stderr
    garbage = tmp_path / "g.db"
    garbage.write_bytes(os.urandom(8192))
    assert_user_error(headroom("report", "--store", str(garbage)), str(garbage))


def test_a_full_disk_under_the_store_gets_one_line(tasks_root: Path, small_fs: Path) -> None:
    # Fill the file system but for ~320 KiB; every try's evidence (two 4 KiB output tails) then runs it out.
    with open(small_fs / "filler", "wb") as f:
        f.write(b"\0" * (4 * 1024 * 1024 - 320 * 1024))
    write_task(
        tasks_root,
        "t",
        solve='head -c 8000 /dev/zero | tr "\\0" x; head -c 8000 /dev/zero | tr "\\0" y >&2; ' + OK_SOLVE,
    )
    store = small_fs / "h.db"
    proc = headroom(
        "sweep", str(tasks_root), "--multipliers", "1", "--attempts", "20", "--store", str(store), "--format", "none"
    )
    _last_line_error(proc, "disk")
    (small_fs / "filler").unlink()  # space again: nothing recorded is lost, the rest runs on resume
    res = headroom("resume", "--store", str(store), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert '"trials_finished": 20' in res.stdout


def test_a_store_in_a_read_only_place_says_read_only(tasks_root: Path, small_fs: Path) -> None:
    store = small_fs / "h.db"
    _one_run(tasks_root, store)
    with closing(sqlite3.connect(store)) as db, db:  # work left: a finished run has nothing to resume
        db.execute("UPDATE runs SET status='interrupted'")
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    assert_user_error(headroom("resume", "--store", str(store)), "read-only")
    assert_user_error(headroom("sweep", str(tasks_root), "--attempts", "1", "--store", str(store)), "read-only")
    res = headroom("report", "--store", str(store), "--format", "json")  # reading still works
    assert res.returncode == 0, res.stderr


def test_a_wal_lost_under_a_running_sweep_does_not_exit_zero(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve="sleep 0.7; " + OK_SOLVE)
    store = tmp_path / "h.db"
    wal = tmp_path / "h.db-wal"
    cli = start_cli(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1",
        "--attempts",
        "5",
        "--concurrency",
        "1",
        "--store",
        str(store),
        "--format",
        "none",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            n = (
                sqlite3.connect(f"file:{store}?mode=ro", uri=True)
                .execute("SELECT COUNT(*) FROM executions WHERE status='finished'")
                .fetchone()[0]
            )
        except sqlite3.Error:
            n = 0
        if n >= 2:
            break
        time.sleep(0.1)
    os.truncate(wal, 0)  # what a crashed disk, a careless copy or a cleanup script can do
    _, err = cli.communicate(timeout=120)
    assert cli.returncode != 0, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error:"), err
