"""Things a user can do that once went wrong: each test pins the behaviour that is right."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli_run import start as start_cli
from tests.engine.test_cli_input_errors import OK_SOLVE, assert_user_error, headroom
from tests.taskfactory import requires_cgroups, write_task


def test_agent_command_alone_runs_that_command_not_the_oracle(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve='touch "$HEADROOM_WORKDIR/out"\n')  # the oracle would pass
    store = tmp_path / "h.db"
    res = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "unbounded",
        "--attempts",
        "1",
        "--agent-command",
        "true",
        "--store",
        str(store),
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["experiment"]["agent"]["kind"] == "command"
    assert doc["configurations"][0]["counts"]["failed"] == 1  # `true` writes nothing: the verifier fails it


def test_agent_cannot_forge_the_verifiers_reward(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve="true\n", test='echo 0 > "$HEADROOM_LOGS_DIR/reward.txt"\n')
    forge = (
        'for d in "$HEADROOM_LOGS_DIR/.." "$HEADROOM_LOGS_DIR/../verifier" "$HOME" "$HOME/logs/verifier" '
        '"$HEADROOM_WORKDIR" "$HEADROOM_WORKDIR/.."; do mkdir -p "$d" && echo 1 > "$d/reward.txt"; done'
    )
    res = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "unbounded",
        "--attempts",
        "1",
        "--agent-command",
        forge,
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["configurations"][0]["counts"]["failed"] == 1


def test_flags_are_not_mistaken_for_secrets_and_the_run_resumes(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    store = tmp_path / "h.db"
    # (a path on the host is not visible in the sandbox: the preflight would refuse it)
    cmd = "bash -c 'touch \"$HEADROOM_WORKDIR/out\"' agent --max-tokens=4096"
    assert (
        headroom(
            "sweep",
            str(tasks_root),
            "--multipliers",
            "1",
            "--attempts",
            "1",
            "--agent-command",
            cmd,
            "--store",
            str(store),
            "--format",
            "none",
        ).returncode
        == 0
    )
    doc = json.loads(headroom("report", "--store", str(store), "--format", "json").stdout)
    assert doc["experiment"]["agent"]["command"] == cmd
    res = headroom("resume", "--store", str(store), "--format", "none")
    assert res.returncode == 0, res.stderr


@requires_cgroups
def test_task_ids_that_differ_only_in_punctuation_do_not_share_a_cgroup(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "a.b", solve='sleep 1; touch "$HEADROOM_WORKDIR/out"\n')
    write_task(tasks_root, "a_b", solve='sleep 2; touch "$HEADROOM_WORKDIR/out"\n')
    res = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1",
        "--attempts",
        "1",
        "--concurrency",
        "2",
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["configurations"][0]["counts"]["passed"] == 2


def test_a_second_process_cannot_resume_a_run_that_is_still_executing(tasks_root: Path, tmp_path: Path) -> None:
    # Long enough that the second process (a fresh interpreter, slow on a loaded machine) starts
    # while the first still executes; both trials run at once, so the test takes one sleep.
    write_task(tasks_root, "slow", solve='sleep 15; touch "$HEADROOM_WORKDIR/out"\n', agent_timeout=60)
    store = tmp_path / "h.db"
    first = start_cli(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1",
        "--attempts",
        "2",
        "--concurrency",
        "2",
        "--store",
        str(store),
        "--format",
        "none",
        "--no-canary",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if store.exists() and sqlite3.connect(store).execute("SELECT COUNT(*) FROM executions").fetchone()[0]:
                break
        except sqlite3.OperationalError:  # the file exists a moment before its tables do
            pass
        time.sleep(0.05)
    second = headroom("resume", "--store", str(store), "--format", "none")
    assert_user_error(second, "being executed by process")
    assert first.wait(60) == 0
    doc = json.loads(headroom("report", "--store", str(store), "--format", "json").stdout)
    assert doc["run"]["trials_finished"] == doc["run"]["trials_planned"] == 2
    assert doc["tries"]["all_tries"] == 2


def test_resume_refuses_changed_flags_and_missing_tasks(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    write_task(tasks_root, "u", solve=OK_SOLVE)
    store = tmp_path / "h.db"
    assert (
        headroom(
            "sweep", str(tasks_root), "--multipliers", "1", "--attempts", "1", "--store", str(store), "--format", "none"
        ).returncode
        == 0
    )
    assert_user_error(headroom("resume", "--attempts", "5", "--store", str(store)), "No such option", "--attempts")
    shutil.rmtree(tasks_root / "u")
    with closing(sqlite3.connect(store)) as db, db:  # as if interrupted: a finished run has nothing to resume
        db.execute("UPDATE runs SET status='interrupted'")
    assert_user_error(headroom("resume", "--store", str(store)), "tasks of this run are gone: u")


@pytest.mark.parametrize(
    ("yaml_text", "needles"),
    [
        ("agent: oracle\n", ("agent", "expected a mapping")),
        ("model: gpt\n", ("model", "expected a mapping")),
        ("retry: 3\n", ("retry", "expected a mapping")),
        ("agent: {kind: oracle, command: x}\n", ("agent", "takes no command")),
    ],
)
def test_experiment_file_wrong_types(
    tasks_root: Path, tmp_path: Path, yaml_text: str, needles: tuple[str, ...]
) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    exp = tmp_path / "e.yaml"
    exp.write_text(f"tasks_dir: {tasks_root}\n{yaml_text}")
    store = tmp_path / "h.db"
    assert_user_error(
        headroom("sweep", "--experiment", str(exp), "--model", "x", "--retries", "1", "--store", str(store)),
        str(exp),
        *needles,
    )
    assert not store.exists()


def test_experiment_file_with_yaml_numbers_and_relative_tasks_dir(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    exp = tasks_root.parent / "e.yaml"
    exp.write_text("tasks_dir: tasks\nconfigurations: [1, 3, unbounded]\nattempts: 1\n")
    res = headroom("sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db"), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [c["label"] for c in doc["configurations"]] == ["1x-strict", "1x/3x", "unbounded"]
    assert Path(doc["experiment"]["tasks_dir"]).is_absolute()


def test_a_foreign_database_is_refused_and_left_untouched(tmp_path: Path, tasks_root: Path) -> None:
    foreign = tmp_path / "other.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE runs (id INTEGER)")
    db.commit()
    db.close()
    before = foreign.read_bytes()
    assert_user_error(headroom("report", "--store", str(foreign)), "not a headroom store")
    assert_user_error(headroom("runs", "--store", str(foreign)), "not a headroom store")
    write_task(tasks_root, "t", solve=OK_SOLVE)
    assert_user_error(headroom("sweep", str(tasks_root), "--store", str(foreign)), "not a headroom store")
    assert foreign.read_bytes() == before


def test_unwritable_places_and_non_directories(tmp_path: Path, tasks_root: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_user_error(headroom("sweep", str(tasks_root), "--store", str(blocker / "h.db")), "cannot create the store")
    assert_user_error(headroom("sweep", str(blocker), "--store", str(tmp_path / "h.db")), "not a directory of tasks")
    store = tmp_path / "h.db"
    assert (
        headroom(
            "sweep", str(tasks_root), "--multipliers", "1", "--attempts", "1", "--store", str(store), "--format", "none"
        ).returncode
        == 0
    )
    assert_user_error(
        headroom("report", "--store", str(store), "--format", "markdown", "-o", str(tmp_path / "no" / "r.md")),
        f"--output: directory {tmp_path / 'no'} does not exist",
    )
    assert_user_error(headroom("report", "--store", str(store), "--reference", "unbounded"), "no finished trials under")
