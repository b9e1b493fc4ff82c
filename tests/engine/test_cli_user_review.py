"""What a new user ran into (the walkthrough of 2026-12-01), each pinned through the real CLI.

One small rlimit sweep (no cgroups needed, so it runs anywhere) is shared by the tests that only read it;
a test that changes a store works on its own copy.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.cli_run import headroom as run_cli
from tests.engine.test_cli_input_errors import OK_SOLVE, assert_user_error
from tests.taskfactory import write_task

KEY = "HEADROOM_TEST_AGENT_KEY"
AGENT = 'touch "$HEADROOM_WORKDIR/out"; echo \'{"tokens_in": 11704, "tokens_out": 5}\' > "$HEADROOM_AGENT_RESULT"'


def headroom(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, cwd=cwd, without=(KEY,))


def _copy_store(src: Path, dest_dir: Path) -> Path:
    with closing(sqlite3.connect(src)) as db, db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    dest = dest_dir / src.name
    shutil.copy(src, dest)
    return dest


def _record(store: Path) -> dict[str, Any]:
    """Everything a resume could change about a run: its row, its provenance and its tries."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db, db:
        return {
            "runs": db.execute("SELECT * FROM runs").fetchall(),
            "provenance": db.execute("SELECT * FROM provenance").fetchall(),
            "executions": db.execute(
                "SELECT run_id, trial_id, try, status, final FROM executions ORDER BY 1, 2, 3"
            ).fetchall(),
        }


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(tasks dir, store) of a finished rlimit sweep: 2 tasks x 2 configurations, --retries 1, --timeout-multiplier 2."""
    root = tmp_path_factory.mktemp("review")
    tasks = root / "tasks"
    tasks.mkdir()
    for name in ("t", "u"):
        write_task(tasks, name, solve=OK_SOLVE)
    store = root / "h.db"
    res = headroom(
        "sweep",
        str(tasks),
        "--multipliers",
        "1x-strict,unbounded",
        "--attempts",
        "1",
        "--enforcement",
        "rlimit",
        "--no-canary",
        "--retries",
        "1",
        "--timeout-multiplier",
        "2",
        "--agent-command",
        AGENT,
        "--agent-env",
        KEY,
        "--store",
        str(store),
        "--format",
        "none",
        env={KEY: "secret-value"},
    )
    assert res.returncode == 0, res.stderr
    return tasks, store


# 3: an --agent-env variable that is not set -------------------------------------------------------------


def test_unset_agent_env_refuses_the_sweep_before_anything_is_written(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    store = tmp_path / "out" / "h.db"
    res = headroom("sweep", str(tasks_root), "--agent-command", "true", "--agent-env", KEY, "--store", str(store))
    assert_user_error(res, f"error: --agent-env: {KEY} is not set in this environment")
    assert not store.parent.exists()


def test_unset_agent_env_refuses_a_resume_and_leaves_the_run_alone(swept: tuple[Path, Path], tmp_path: Path) -> None:
    store = _copy_store(swept[1], tmp_path)
    with closing(sqlite3.connect(store)) as db, db:  # a run with work left, as after an interruption
        db.execute("UPDATE runs SET status='interrupted'")
        db.execute("DELETE FROM executions WHERE trial_id = (SELECT MIN(trial_id) FROM executions)")
    before = _record(store)
    assert_user_error(headroom("resume", "--store", str(store)), f"--agent-env: {KEY} is not set")
    assert _record(store) == before


# 5: a run id on a sweep (a new sweep always gets a new one) ---------------------------------------------


def test_run_id_on_a_sweep_is_refused(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    store = tmp_path / "h.db"
    res = headroom("sweep", str(tasks_root), "--run-id", "20261201T000000Z-abcdef", "--store", str(store))
    assert_user_error(res, "No such option", "--run-id")
    assert not store.exists()


# 6: progress when stderr is not a terminal -----------------------------------------------------------------


def test_plain_progress_lines_when_stderr_is_not_a_terminal(tasks_root: Path, tmp_path: Path) -> None:
    for name in ("a", "b", "c", "d", "e"):
        write_task(tasks_root, name, solve=OK_SOLVE)
    res = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "unbounded",
        "--attempts",
        "2",
        "--enforcement",
        "rlimit",
        "--no-canary",
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
    )
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("sweep: ")]
    # 10 trials: a line at every 10% of the plan, each with the tally, the elapsed time and an ETA.
    assert [ln.split(" trials")[0] for ln in lines] == [f"sweep: {i}/10" for i in range(1, 11)]
    assert lines[-1].startswith("sweep: 10/10 trials finished (100%): passed 10, failed 0, infra 0; elapsed ")
    assert all(", eta " in ln for ln in lines)
    assert "\x1b[" not in res.stderr  # no bar drawn with terminal codes into a log


# 7: every output path mistake is one line -------------------------------------------------------------------


def test_output_path_mistakes_are_one_line_errors(swept: tuple[Path, Path], tmp_path: Path) -> None:
    tasks, store = swept
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    missing = tmp_path / "no" / "such"
    cases = [
        (("report", "--store", str(store), "-o", str(tmp_path)), f"{tmp_path}: --output: is a directory"),
        (
            ("report", "--store", str(store), "-o", str(missing / "r.md"), "--format", "markdown"),
            f"{missing / 'r.md'}: --output: directory {missing} does not exist",
        ),
        (
            ("report", "--store", str(store), "-o", str(a_file / "r.html"), "--format", "html"),
            f"directory {a_file} is not a directory",
        ),
        (
            ("runs", "calibrate", str(store), "--out-dir", str(a_file)),
            f"{a_file}: --out-dir: exists and is not a directory",
        ),
        (
            ("runs", "calibrate", str(store), "--out-dir", "/proc/headroom-no-such"),
            "/proc/headroom-no-such: --out-dir: cannot create the directory",
        ),
        (
            ("runs", "calibrate", str(store), "--out-dir", str(tmp_path / "bands"), "--tasks-out", str(a_file)),
            f"{a_file}: --tasks-out: exists and is not a directory",
        ),
        (("runs", "bundle", "--store", str(store), "-o", str(missing / "b.json")), "--output: directory"),
        (
            ("tasks", "import", str(tasks), "--out-dir", str(a_file)),
            f"{a_file}: --out-dir: exists and is not a directory",
        ),
        (("tasks", "audit", str(tasks), "-o", str(missing / "a.jsonl")), "--output: directory"),
    ]
    for args, needle in cases:
        assert_user_error(headroom(*args), needle)
    assert a_file.read_text() == "keep me\n"
    assert not (tmp_path / "bands").exists() and not missing.parent.exists()


# 8: a store file that does not exist ---------------------------------------------------------------------------


def test_a_missing_store_file_is_named_as_such(swept: tuple[Path, Path], tmp_path: Path) -> None:
    store = swept[1]
    default = Path("headroom-results/headroom.db")
    for args in (
        ("runs", "compare", str(store), "nosuchfile.db"),
        ("runs", "calibrate", "nosuch.db"),
        ("runs", "compare", str(store), str(tmp_path / "gone" / "x.db")),
    ):
        bad = next(a for a in args[2:] if a != str(store))
        assert_user_error(
            headroom(*args, cwd=tmp_path), f"error: {bad}: no such file (and no run with that id in {default})"
        )
    assert_user_error(
        headroom("runs", "compare", str(store), "nosuch.db:20261201T000000Z-abcdef", cwd=tmp_path),
        "error: nosuch.db: no such file",
    )
    # A run id is still looked up in --store.
    res = headroom("runs", "compare", "nosuchrun", "nosuchrun", "--store", str(store))
    assert_user_error(res, str(store), "no run 'nosuchrun'")


# 9 and 15: the setup block, report -o in table format ---------------------------------------------------------


def test_every_format_names_timeouts_and_retries_and_leaks_no_none(swept: tuple[Path, Path], tmp_path: Path) -> None:
    store = swept[1]
    texts = {}
    for fmt in ("table", "markdown", "html"):
        out = tmp_path / f"r.{fmt}"
        res = headroom("report", "--store", str(store), "--format", fmt, "-o", str(out))
        assert res.returncode == 0, res.stderr
        texts[fmt] = out.read_text()
    for fmt, text in texts.items():
        assert "timeout multiplier" in text and "multiplied by 2" in text, fmt
        assert "up to 1 per trial" in text, fmt
        assert "None" not in text, fmt
    assert "| host | " in texts["markdown"] and "no cgroup: rlimit (rlimit enforcement requested)" in texts["markdown"]
    assert "cgroup None" not in texts["html"]


def test_report_table_to_a_file_is_the_table_as_plain_text(swept: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    res = headroom("report", "--store", str(swept[1]), "-o", str(out))
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    terminal = headroom("report", "--store", str(swept[1])).stdout
    assert text.splitlines()[0] == terminal.splitlines()[0]  # the terminal report, not Markdown
    assert "## Setup" not in text and "Outcomes by configuration" in text and "\x1b[" not in text


# 11: resuming a finished run -------------------------------------------------------------------------------------


def test_resume_of_a_finished_run_changes_nothing(swept: tuple[Path, Path], tmp_path: Path) -> None:
    store = _copy_store(swept[1], tmp_path)
    before = _record(store)
    for _ in range(2):
        res = headroom("resume", "--store", str(store), "--format", "none")  # KEY unset: not needed either
        assert res.returncode == 0, res.stderr
        assert "all 4 trials are already finished; nothing to resume" in res.stderr
        assert "canary" not in res.stderr
    assert _record(store) == before


# 14: calibrate claims only what it wrote --------------------------------------------------------------------------


def test_calibrate_claims_only_the_files_it_wrote(swept: tuple[Path, Path], tmp_path: Path) -> None:
    out, banded = tmp_path / "bands", tmp_path / "banded"
    res = headroom("runs", "calibrate", str(swept[1]), "--out-dir", str(out), "--tasks-out", str(banded))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("refused:") == 2  # one attempt each: every task is refused
    assert sorted(p.name for p in out.iterdir()) == ["bands.json", "summary.md"]
    assert not banded.exists()
    assert res.stderr.strip().splitlines()[-1] == (
        f"written: {out / 'summary.md'}, {out / 'bands.json'}; no task was "
        f"published, so no patch and nothing in {banded}"
    )


# 15: YAML line numbers, regrade naming, the viewer's token counts, "unrecorded model" ---------------------------


def test_malformed_experiment_yaml_names_the_line(tasks_root: Path, tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: x\ntasks_dir: {tasks_root}\nconfigurations: [1x-strict, 3\n")
    res = headroom("sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db"))
    assert_user_error(res, f"{exp}: malformed YAML (line 4, column 1: expected ',' or ']', but got '<stream end>')")


def test_regrade_twice_regrades_the_sweep_with_one_suffix(swept: tuple[Path, Path], tmp_path: Path) -> None:
    store = _copy_store(swept[1], tmp_path)
    graders = tmp_path / "g.toml"
    graders.write_text('[grader]\nexact = "x"\n')
    sweep_id = json.loads(headroom("report", "--store", str(store), "--format", "json").stdout)["run"]["run_id"]
    for _ in range(2):
        res = headroom("runs", "regrade", "--store", str(store), "--grader", str(graders), "--format", "json")
        assert res.returncode == 0, res.stderr
    with closing(sqlite3.connect(store)) as db, db:
        rows = db.execute("SELECT name, spec_json FROM runs ORDER BY created_at").fetchall()
    assert [name for name, _ in rows] == ["sweep", "sweep (regraded)", "sweep (regraded)"]
    assert [json.loads(spec).get("regraded_from") for _, spec in rows[1:]] == [sweep_id, sweep_id]


def test_viewer_shows_token_counts_as_integers_and_compare_names_no_model(swept: tuple[Path, Path]) -> None:
    from starlette.testclient import TestClient

    from orchestrator.store.sqlite import Store
    from orchestrator.view.app import create_app

    store = swept[1]
    s = Store.open_existing(store)
    run_id = s.runs()[0].run_id
    trial_id = s.db.execute("SELECT trial_id FROM trials WHERE run_id=? LIMIT 1", (run_id,)).fetchone()[0]
    s.close()
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    page = client.get(f"/runs/{run_id}/trial?id={quote(trial_id)}").text
    assert "11704 in, 5 out" in page and "11704.0" not in page
    compare = client.get(f"/compare?a={run_id}&b={run_id}").text
    assert "model unrecorded)" in compare and "unrecorded model" not in compare
