"""Every input mistake named in issue 22, and the ones found fuzzing the CLI: one line, exit 2, nothing stored."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import Headroom, one_line_error

HARBOR_JOB = Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "harbor_job"


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
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
        (["--run-id", "x"], ["No such option", "--run-id"]),
    ],
)
def test_sweep_flag_mistakes(
    flags: list[str], needles: list[str], tasks: Path, tmp_path: Path, headroom: Headroom
) -> None:
    store = tmp_path / "out" / "h.db"
    one_line_error(headroom("sweep", str(tasks), "--store", str(store), *flags), *needles)
    assert not store.parent.exists()  # refused before anything was written


def test_timeout_multiplier_is_bounded_on_the_model_too(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    """An experiment file reaches the same bound: the pydantic model validates it, not only the flag."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"tasks_dir: {tasks}\ntimeout_multiplier: 1.0e9\n")
    one_line_error(
        headroom("sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db")),
        str(exp),
        "timeout_multiplier",
        "less than or equal to 100",
    )
    exp.write_text(f"tasks_dir: {tasks}\nagent:\n  env_passthrough: [OPENAI_API_KEY=sk-123]\n")
    line = one_line_error(
        headroom("sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db")),
        "agent.env_passthrough",
        "not a variable name",
    )
    assert not (tmp_path / "h.db").exists()
    assert "sk-123" in line  # the user's own input echoed back, never stored (nothing was written)


@pytest.mark.parametrize("spelling", ["4x", "1.5x", "2X"])
def test_an_ambiguous_nx_is_refused_naming_both_readings(
    spelling: str, tasks: Path, tmp_path: Path, headroom: Headroom
) -> None:
    """``4x`` alone reads as a 4x limit or as both at 4x: the flag refuses it and names the two spellings."""
    store = tmp_path / "h.db"
    m = spelling.lower()
    line = one_line_error(
        headroom("sweep", str(tasks), "--multipliers", f"1,{spelling}", "--store", str(store)),
        "--multipliers",
        f"'{spelling}' reads two ways",
    )
    assert f"1x/{m}" in line and f"{m}/{m}" in line
    assert not store.exists()


def test_unambiguous_spellings_still_run(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    store = tmp_path / "h.db"
    res = headroom(
        "sweep",
        str(tasks),
        "--multipliers",
        "1x,2,1x/4x,4x/4x",
        "--attempts",
        "1",
        "--store",
        str(store),
        "--format",
        "json",
        "--no-canary",
    )
    assert res.returncode == 0, res.stderr
    assert "reads" not in res.stderr  # a bare number, 1x and the explicit forms were never ambiguous
    labels = {c["label"] for c in json.loads(res.stdout)["configurations"]}
    assert labels == {"1x-strict", "1x/2x", "1x/4x", "4x-strict"}


def test_an_experiment_file_s_nx_keeps_its_reading_and_says_it(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    """Files (and Experiment resources already in clusters) are written with ``3x``: read as before, said aloud."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"tasks_dir: {tasks}\nconfigurations: [1x-strict, 3x]\nattempts: 1\n")
    res = headroom(
        "sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db"), "--format", "json", "--no-canary"
    )
    assert res.returncode == 0, res.stderr
    assert f"note: {exp}: configurations: '3x' is read as 1x/3x (request 1x); write 3x/3x" in res.stderr
    assert {c["label"] for c in json.loads(res.stdout)["configurations"]} == {"1x-strict", "1x/3x"}


def test_crlf_scripts_fail_validation_and_the_sweep(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    test_sh = tasks / "t" / "tests" / "test.sh"
    test_sh.write_bytes(test_sh.read_bytes().replace(b"\n", b"\r\n"))
    res = headroom("tasks", "validate", str(tasks))
    assert res.returncode == 1
    assert "tests/test.sh has Windows (CRLF) line endings" in res.stdout + res.stderr
    assert "`headroom tasks import PATH --out-dir DIR` first" not in res.stdout  # bad, not merely needing an import
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
    one_line_error(
        headroom("report", str(swept), "--format", "markdown", "-o", str(js)),
        "--format markdown",
        "the file name says json",
    )
    txt = tmp_path / "report.txt"
    assert headroom("report", str(swept), "-o", str(txt)).returncode == 0
    assert "1x-strict" in txt.read_text() and "<" not in txt.read_text()[:20]  # no extension of its own: the table


def test_calibrate_on_an_imported_run(tmp_path: Path, headroom: Headroom) -> None:
    store = tmp_path / "imp.db"
    assert headroom("results", "import", str(HARBOR_JOB), "--store", str(store)).returncode == 0
    one_line_error(
        headroom("runs", "calibrate", str(store), "--out-dir", str(tmp_path / "bands")),
        "is imported (harbor)",
        "calibrate a `headroom sweep` run",
    )
    assert not (tmp_path / "bands").exists()


def test_resume_on_an_imported_run_names_the_run_not_an_old_flag(tmp_path: Path, headroom: Headroom) -> None:
    store = tmp_path / "imp.db"
    assert headroom("results", "import", str(HARBOR_JOB), "--store", str(store)).returncode == 0
    line = one_line_error(headroom("resume", str(store)), "error: RUN: run ", "imported from results made elsewhere")
    assert "--resume" not in line


@pytest.mark.parametrize("make", ["text", "dir", "missing", "empty"])
def test_bad_store_files(make: str, tmp_path: Path, headroom: Headroom) -> None:
    store = tmp_path / "s.db"
    if make == "text":
        store.write_text("not a database\n")
    elif make == "dir":
        store.mkdir()
    elif make == "empty":
        sqlite3.connect(store).close()
    for args in (
        ("runs", "--store", str(store)),
        ("report", "--store", str(store)),
        ("resume", "--store", str(store)),
        ("runs", "calibrate", "--store", str(store)),
        ("runs", "--store", str(store)),
    ):
        res = headroom(*args)
        one_line_error(res)
    assert make != "missing" or not store.exists()


def test_unknown_runs_and_bad_run_names(swept: Path, tmp_path: Path, headroom: Headroom) -> None:
    one_line_error(headroom("report", "nope", "--store", str(swept)), "no run 'nope'")
    one_line_error(headroom("report", f"{swept}:nope"), "no run 'nope'")
    one_line_error(headroom("report", f"{swept}:"), "names a file but no run")
    one_line_error(headroom("report", ""), "empty run name")
    one_line_error(headroom("report", str(tmp_path / "missing.db")), "no such file")
    one_line_error(headroom("runs", "compare", str(swept)), "Missing argument 'RUN_B'")
    one_line_error(headroom("runs", "calibrate", f"{swept}:nope"), "no run 'nope'")
    one_line_error(headroom("resume", "nope", "--store", str(swept)), "no run 'nope'")


def test_bad_paths(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    (tmp_path / "bad.yaml").write_text("a: [\n")
    one_line_error(headroom("sweep", str(tmp_path / "nope")), "does not exist")
    one_line_error(headroom("sweep", "--experiment", str(tmp_path / "bad.yaml")), "malformed YAML", "line 2")
    one_line_error(headroom("sweep", "--experiment", str(tmp_path)), "is a directory")
    one_line_error(headroom("sweep", str(tasks), "--store", str(tmp_path)), "--store", "is a directory")
    one_line_error(headroom("tasks", "validate", str(tmp_path / "nope")))
    one_line_error(headroom("results", "import", str(tmp_path / "nope")))


def test_the_context_is_kube_context_alone(headroom: Headroom, tmp_path: Path) -> None:
    one_line_error(headroom("cluster", "nodes", "advertise", "--context", "a"), "No such option", "--context")
    assert "--context" not in headroom("cluster", "status", "--help").stdout.replace("--kube-context", "")


def test_the_old_context_of_tasks_image_is_build_dir(headroom: Headroom, tmp_path: Path) -> None:
    """``tasks image --context DIR`` clashed with the old name of --kube-context: it is --build-dir now."""
    bundled = Path(__file__).resolve().parents[2] / "tasks"
    new = headroom(
        "tasks", "image", str(bundled), "--tag", "t/tasks:1", "--base", "b:1", "--build-dir", str(tmp_path / "a")
    )
    assert new.returncode == 0, new.stderr
    assert (tmp_path / "a").is_dir() and any((tmp_path / "a").iterdir())
    one_line_error(
        headroom("tasks", "image", str(bundled), "--tag", "t/tasks:1", "--base", "b:1", "--context", str(tmp_path)),
        "No such option",
        "--context",
    )
    assert "--context" not in headroom("tasks", "image", "--help").stdout


@pytest.mark.parametrize(
    ("section", "backend"), [("kubernetes", "local"), ("docker", "local"), ("kubernetes", "docker")]
)
def test_a_backend_section_for_another_backend_is_refused(
    section: str, backend: str, tasks: Path, tmp_path: Path, headroom: Headroom
) -> None:
    """Once silently ignored: a kubernetes: or docker: section the run's backend never reads."""
    exp = tmp_path / "exp.yaml"
    body = {"kubernetes": "{namespace: evals}", "docker": "{build: true}"}[section]
    exp.write_text(f"tasks_dir: {tasks}\nbackend: {backend}\n{section}: {body}\n")
    store = tmp_path / "h.db"
    one_line_error(
        headroom("sweep", "--experiment", str(exp), "--store", str(store)),
        f"{exp}: {section}: a {section} section applies to backend {section}",
        f"runs on {backend}",
    )
    assert not store.exists()


def test_a_value_the_experiment_refuses_names_the_flag_that_gave_it(
    tasks: Path, tmp_path: Path, headroom: Headroom
) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"tasks_dir: {tasks}\nagent: {{kind: oracle}}\n")
    one_line_error(
        headroom("sweep", "--experiment", str(exp), "--agent-command", "my-agent"),
        "error: --agent-command: the oracle agent runs the task's solution and takes no command",
    )
    one_line_error(
        headroom("sweep", str(tasks), "--agent", "command"), "error: --agent: agent kind 'command' needs a command"
    )
    exp.write_text(f"tasks_dir: {tasks}\nagent: {{kind: command}}\n")  # the same mistake, from the file
    one_line_error(headroom("sweep", "--experiment", str(exp)), f"error: {exp}: agent: agent kind 'command' needs")


def test_flags_override_the_file_field_by_field(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: from-file\ntasks_dir: {tasks}\nconfigurations: [1x-strict]\nattempts: 2\n"
        "model: {name: m-file, sampling: {temperature: 0.5}}\nretry: {max_retries: 2}\n"
    )
    res = headroom(
        "sweep",
        "--experiment",
        str(exp),
        "--attempts",
        "1",
        "--model",
        "m-flag",
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "json",
        "--no-canary",
    )
    assert res.returncode == 0, res.stderr
    spec = json.loads(res.stdout)["experiment"]
    assert (spec["name"], spec["attempts"], spec["model"]["name"]) == ("from-file", 1, "m-flag")
    assert spec["model"]["sampling"] == {"temperature": 0.5} and spec["retry"]["max_retries"] == 2
    assert [c["request_multiplier"] for c in spec["configurations"]] == [1.0]


def test_a_refused_preflight_leaves_no_store(tasks: Path, tmp_path: Path, headroom: Headroom) -> None:
    """The agent's preflight refuses after the store used to be created: no file, no directory is left."""
    store = tmp_path / "out" / "h.db"
    res = headroom(
        "sweep",
        str(tasks),
        "--agent",
        "command",
        "--agent-command",
        "no-such-agent-binary --go",
        "--store",
        str(store),
        "--no-canary",
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.lines[-1].startswith("error: agent.command: agent command not found: no-such-agent-binary")
    assert not store.parent.exists()


def test_usage_errors_are_one_line(headroom: Headroom) -> None:
    one_line_error(headroom("sweep", "--no-such-flag"), "No such option", "headroom sweep --help")
    one_line_error(headroom("no-such-command"), "No such command")


def test_agent_env_names_are_checked_before_their_presence(
    tasks: Path, tmp_path: Path, headroom: Headroom, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HEADROOM_TEST_UNSET", raising=False)
    res = headroom("sweep", str(tasks), "--agent-env", "HEADROOM_TEST_UNSET", "--store", str(tmp_path / "h.db"))
    one_line_error(res, "HEADROOM_TEST_UNSET is not set")
    assert "HEADROOM_TEST_UNSET" not in os.environ
