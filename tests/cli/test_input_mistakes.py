"""Every input mistake named in issue 22, and the ones found fuzzing the CLI: one line, exit 2, nothing stored."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import Headroom, one_line_error
from tests.taskfactory import write_task

OK_SOLVE = 'touch "$HEADROOM_WORKDIR/out"\n'


@pytest.fixture
def tasks(tasks_root: Path) -> Path:
    write_task(tasks_root, "t", solve=OK_SOLVE)
    return tasks_root


@pytest.fixture
def swept(tasks: Path, tmp_path: Path, headroom: Headroom) -> Path:
    """A store holding one finished two-trial sweep."""
    store = tmp_path / "h.db"
    res = headroom("sweep", str(tasks), "--multipliers", "1,unbounded", "--attempts", "1", "--store", str(store),
                   "--format", "none", "--no-canary", "--name", "first")
    assert res.returncode == 0, res.stderr
    return store


@pytest.mark.parametrize(("flags", "needles"), [
    (["--namespace", "ns"], ["--namespace", "applies to --backend kubernetes", "local"]),
    (["--kube-context", "kind"], ["--kube-context", "applies to --backend kubernetes"]),
    (["--queue", "q", "--keep-pods"], ["--queue, --keep-pods", "apply to --backend kubernetes"]),
    (["--agent-env", "A=B"], ["--agent-env", "'A=B' is not a variable name", "'A'"]),
    (["--agent-env", "1KEY"], ["--agent-env", "not a valid environment variable name"]),
    (["--timeout-multiplier", "1e9"], ["--timeout-multiplier", "0<x<=100"]),
    (["--timeout-multiplier", "nan"], ["--timeout-multiplier"]),
    (["--attempts", "many"], ["--attempts", "'many'"]),
    (["--seed", "1.5"], ["--seed"]),
    (["--multipliers", "1x/0x"], ["--multipliers"]),
    (["--multipliers", "lots"], ["--multipliers", "unknown configuration label 'lots'"]),
    (["--agent-command", " "], ["--agent-command", "empty command"]),
    (["--name", ""], ["--name", "is empty"]),
    (["--model", " "], ["--model", "is empty"]),
    (["--run-id", "x"], ["--run-id", "applies only with --resume"]),
])
def test_sweep_flag_mistakes(flags: list[str], needles: list[str], tasks: Path, tmp_path: Path,
                             headroom: Headroom) -> None:
    store = tmp_path / "out" / "h.db"
    one_line_error(headroom("sweep", str(tasks), "--store", str(store), *flags), *needles)
    assert not store.parent.exists()  # refused before anything was written


def test_timeout_multiplier_is_bounded_on_the_model_too(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    """An experiment file reaches the same bound: the pydantic model validates it, not only the flag."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"tasks_dir: {tasks}\ntimeout_multiplier: 1.0e9\n")
    one_line_error(headroom("sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db")),
                   str(exp), "timeout_multiplier", "less than or equal to 100")
    exp.write_text(f"tasks_dir: {tasks}\nagent:\n  env_passthrough: [OPENAI_API_KEY=sk-123]\n")
    line = one_line_error(headroom("sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db")),
                          "agent.env_passthrough", "not a variable name")
    assert not (tmp_path / "h.db").exists()
    assert "sk-123" in line  # the user's own input echoed back, never stored (nothing was written)


def test_4x_is_said_to_mean_request_1x_limit_4x(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    """Decided: ``4x`` keeps meaning 1x/4x (every experiment file writing ``3x`` relies on it), and the sweep says so."""
    store = tmp_path / "h.db"
    res = headroom("sweep", str(tasks), "--multipliers", "1,4x", "--attempts", "1", "--store", str(store),
                   "--format", "json", "--no-canary")
    assert res.returncode == 0, res.stderr
    assert "'4x' means 1x/4x (request 1x, limit 4x); write 4x-strict" in res.stderr
    labels = {c["label"] for c in json.loads(res.stdout)["configurations"]}
    assert labels == {"1x-strict", "1x/4x"}
    plain = headroom("sweep", str(tasks), "--multipliers", "1,4", "--attempts", "1", "--store", str(store),
                     "--format", "none", "--no-canary")
    assert plain.returncode == 0 and "means" not in plain.stderr  # a bare number was never ambiguous


def test_crlf_scripts_fail_validation_and_the_sweep(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    test_sh = tasks / "t" / "tests" / "test.sh"
    test_sh.write_bytes(test_sh.read_bytes().replace(b"\n", b"\r\n"))
    res = headroom("tasks", "validate", str(tasks))
    assert res.returncode == 1
    assert "tests/test.sh has Windows (CRLF) line endings" in res.stdout + res.stderr
    one_line_error(headroom("sweep", str(tasks), "--store", str(tmp_path / "h.db")), "tests/test.sh", "CRLF")
    test_sh.write_bytes(test_sh.read_bytes().replace(b"\r\n", b"\n"))
    assert headroom("tasks", "validate", str(tasks)).returncode == 0


def test_report_format_follows_the_extension(swept: Path, tmp_path: Path, headroom: Headroom) -> None:
    html, js, md = tmp_path / "report.html", tmp_path / "report.json", tmp_path / "report.md"
    for path in (html, js, md):
        res = headroom("report", str(swept), "-o", str(path))
        assert res.returncode == 0, res.stderr
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
    assert json.loads(js.read_text())["run"]["name"] == "first"
    assert md.read_text().startswith("#")
    one_line_error(headroom("report", str(swept), "--format", "markdown", "-o", str(js)),
                   "--format markdown", "the file name says json")
    txt = tmp_path / "report.txt"
    assert headroom("report", str(swept), "-o", str(txt)).returncode == 0
    assert "1x-strict" in txt.read_text() and "<" not in txt.read_text()[:20]  # no extension of its own: the table


def test_calibrate_on_an_imported_run(tmp_path: Path, headroom: Headroom) -> None:
    fixtures = Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "harbor_job"
    store = tmp_path / "imp.db"
    assert headroom("results", "import", str(fixtures), "--store", str(store)).returncode == 0
    one_line_error(headroom("calibrate", str(store), "--out-dir", str(tmp_path / "bands")),
                   "is imported (harbor)", "calibrate a `headroom sweep` run")
    assert not (tmp_path / "bands").exists()


@pytest.mark.parametrize("make", ["text", "dir", "missing", "empty"])
def test_bad_store_files(make: str, tmp_path: Path, headroom: Headroom) -> None:
    store = tmp_path / "s.db"
    if make == "text":
        store.write_text("not a database\n")
    elif make == "dir":
        store.mkdir()
    elif make == "empty":
        sqlite3.connect(store).close()
    for args in (("runs", "--store", str(store)), ("report", "--store", str(store)), ("resume", "--store", str(store)),
                 ("calibrate", "--store", str(store))):
        res = headroom(*args)
        one_line_error(res)
    assert make != "missing" or not store.exists()


def test_unknown_runs_and_bad_run_names(swept: Path, tmp_path: Path, headroom: Headroom) -> None:
    one_line_error(headroom("report", "nope", "--store", str(swept)), "no run 'nope'")
    one_line_error(headroom("report", f"{swept}:nope"), "no run 'nope'")
    one_line_error(headroom("report", f"{swept}:"), "names a file but no run")
    one_line_error(headroom("report", ""), "empty run name")
    one_line_error(headroom("report", str(tmp_path / "missing.db")), "no such file")
    one_line_error(headroom("compare", str(swept)), "Missing argument 'RUN_B'")
    one_line_error(headroom("calibrate", f"{swept}:nope"), "no run 'nope'")
    one_line_error(headroom("resume", "nope", "--store", str(swept)), "no run 'nope'")


def test_bad_paths(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    (tmp_path / "bad.yaml").write_text("a: [\n")
    one_line_error(headroom("sweep", str(tmp_path / "nope")), "does not exist")
    one_line_error(headroom("sweep", "--experiment", str(tmp_path / "bad.yaml")), "malformed YAML", "line 2")
    one_line_error(headroom("sweep", "--experiment", str(tmp_path)), "is a directory")
    one_line_error(headroom("sweep", str(tasks), "--store", str(tmp_path)), "--store", "is a directory")
    one_line_error(headroom("tasks", "validate", str(tmp_path / "nope")))
    one_line_error(headroom("results", "import", str(tmp_path / "nope")))


def test_context_is_an_old_name_for_kube_context(headroom: Headroom, tmp_path: Path) -> None:
    res = headroom("nodes", "advertise", "--context", "a", "--kube-context", "b")
    assert res.returncode == 2
    assert res.lines[0].startswith("warning: --context is deprecated") and "--kube-context" in res.lines[0]
    assert "give --kube-context once" in res.lines[1]
    assert "--context" not in headroom("status", "--help").stdout.replace("--kube-context", "")


def test_usage_errors_are_one_line(headroom: Headroom) -> None:
    one_line_error(headroom("sweep", "--no-such-flag"), "No such option", "headroom sweep --help")
    one_line_error(headroom("no-such-command"), "No such command")


def test_agent_env_names_are_checked_before_their_presence(tasks: Path, tmp_path: Path, headroom: Headroom,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADROOM_TEST_UNSET", raising=False)
    res = headroom("sweep", str(tasks), "--agent-env", "HEADROOM_TEST_UNSET", "--store", str(tmp_path / "h.db"))
    one_line_error(res, "HEADROOM_TEST_UNSET is not set")
    assert "HEADROOM_TEST_UNSET" not in os.environ
