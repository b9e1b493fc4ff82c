"""Bad input: one line naming the file and the field, exit code 2, nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli_run import headroom
from tests.taskfactory import write_task

OK_SOLVE = 'touch "$HEADROOM_WORKDIR/out"\n'


def assert_user_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "out" / "h.db"


def test_missing_field_names_file_and_field(tasks_root: Path, store: Path) -> None:
    d = write_task(tasks_root, "t", solve=OK_SOLVE)
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 64\n", ""))
    proc = headroom("sweep", str(tasks_root), "--store", str(store))
    assert_user_error(proc, str(toml), "environment.memory_mb", "missing")
    assert not store.exists() and not store.parent.exists()


def test_malformed_toml(tasks_root: Path, store: Path) -> None:
    d = write_task(tasks_root, "t", solve=OK_SOLVE)
    (d / "task.toml").write_text("[environment\ncpus = 1\n")
    assert_user_error(headroom("sweep", str(tasks_root), "--store", str(store)), "task.toml", "malformed TOML")
    assert not store.exists()


def test_task_without_tests(tasks_root: Path, store: Path) -> None:
    d = write_task(tasks_root, "t", solve=OK_SOLVE)
    (d / "tests" / "test.sh").unlink()
    assert_user_error(headroom("sweep", str(tasks_root), "--store", str(store)), "tests/test.sh", "missing")
    assert not store.exists()


def test_limit_below_request(tasks_root: Path, store: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    proc = headroom("sweep", str(tasks_root), "--multipliers", "1,3x/2x", "--store", str(store))
    assert_user_error(proc, "--multipliers", "below request")
    assert not store.exists()


def test_unknown_configuration_label(tasks_root: Path, store: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    proc = headroom("sweep", str(tasks_root), "--multipliers", "1,lots", "--store", str(store))
    assert_user_error(proc, "--multipliers", "unknown configuration label 'lots'")
    assert not store.exists()


def test_bad_experiment_file_field(tasks_root: Path, store: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"tasks_dir: {tasks_root}\nattempts: -1\n")
    assert_user_error(headroom("sweep", "--experiment", str(exp), "--store", str(store)), str(exp), "attempts")
    assert not store.exists()


def test_missing_tasks_dir_and_missing_store(tmp_path: Path, store: Path) -> None:
    assert_user_error(headroom("sweep", str(tmp_path / "nope"), "--store", str(store)), "does not exist")
    assert_user_error(headroom("report", "--store", str(store)), str(store), "no such store")
    assert not store.exists()


def test_unknown_task_selection(tasks_root: Path, store: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    assert_user_error(headroom("sweep", str(tasks_root), "--task", "nope*", "--store", str(store)), "tasks", "nope*")


def test_rlimit_enforcement_is_said_plainly_and_recorded(tasks_root: Path, store: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    proc = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "1",
        "--enforcement",
        "rlimit",
        "--store",
        str(store),
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    assert "enforcement: rlimit" in proc.stderr and "CPU limits are NOT enforced" in proc.stderr
    import json

    doc = json.loads(proc.stdout)
    assert doc["run"]["enforcement"] == "rlimit"
    assert all(c["enforcement"] == ["rlimit"] for c in doc["configurations"])
    assert doc["provenance"]["backend"]["local"]["enforcement_fallback_reason"] == "rlimit enforcement requested"
