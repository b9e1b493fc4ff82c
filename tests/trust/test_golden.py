"""Golden-set graders: declarative checks, abstention as its own category, and re-grading stored answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.grade import grade
from orchestrator.spec.grader import GoldenGrader
from tests.taskfactory import requires_cgroups, write_task

SCHEMA = {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}}


@pytest.mark.parametrize(("grader", "answer", "reward", "abstained"), [
    ({"must": [r"\b42\b"], "must_not": [r"(?i)maybe"]}, "The answer is 42.", 1.0, False),
    ({"must": [r"\b42\b"], "must_not": [r"(?i)maybe"]}, "maybe 42", 0.0, False),
    ({"exact": "Paris"}, "  Paris\n", 1.0, False),
    ({"exact": "Paris"}, "paris", 0.0, False),
    ({"numeric": {"value": 3.14159, "tolerance": 0.001}}, "3.1416", 1.0, False),
    ({"numeric": {"value": 3.14159, "tolerance": 0.001}}, "3.15", 0.0, False),
    ({"numeric": {"value": 1, "tolerance": 0.5}}, "nan", 0.0, False),
    ({"json_schema": SCHEMA}, '{"total": 7}', 1.0, False),
    ({"json_schema": SCHEMA}, '{"total": "7"}', 0.0, False),
    ({"json_schema": SCHEMA}, "not json", 0.0, False),
    ({"exact": "Paris", "allow_abstain": True}, "I don't know.", 0.0, True),
    ({"exact": "Paris"}, "I don't know.", 0.0, False),  # abstention not allowed: a plain failure
])
def test_checks(grader: dict, answer: str, reward: float, abstained: bool) -> None:
    g = grade(GoldenGrader.model_validate(grader), answer)
    assert (g.reward, g.abstained) == (reward, abstained)


def test_no_answer_is_missing_and_bad_regex_is_refused() -> None:
    assert grade(GoldenGrader(exact="x"), None).reward is None
    with pytest.raises(ValueError, match="bad regular expression"):
        GoldenGrader(must=["(unclosed"])


def _golden_task(root: Path, name: str, answer: str, grader_toml: str) -> None:
    solve = f"printf '%s' {json.dumps(json.dumps({'answer': answer}))} > \"$HEADROOM_AGENT_RESULT\"\n"
    write_task(root, name, solve=solve, test="exit 0\n", extra_toml=grader_toml)


def _headroom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True)


@pytest.mark.cgroup
@requires_cgroups
def test_sweep_grades_answers_then_regrade_shows_every_flip(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _golden_task(root, "capital", "Paris", '[grader]\nexact = "Paris"\n')
    _golden_task(root, "pi", "3.14", '[grader]\nnumeric = {value = 3.14159, tolerance = 0.01}\n')
    _golden_task(root, "unknown", "I do not know", '[grader]\nexact = "42"\nallow_abstain = true\n')
    store = tmp_path / "s.db"
    proc = _headroom("sweep", str(root), "--multipliers", "unbounded", "--attempts", "2", "--store", str(store),
                     "--format", "json")
    assert proc.returncode == 0, proc.stderr
    import sqlite3

    rows = sqlite3.connect(store).execute("SELECT trial_id, outcome, reason FROM executions WHERE final=1").fetchall()
    by_task = {t.split(":")[0]: (o, r) for t, o, r in rows}
    assert by_task == {"capital": ("passed", None), "pi": ("passed", None), "unknown": ("abstained", None)}
    # A stricter grader: pi now needs two more digits; the others keep theirs.
    stricter = tmp_path / "g.toml"
    stricter.write_text('[graders.pi]\nnumeric = {value = 3.14159, tolerance = 0.0001}\n'
                        '[graders.unknown]\nexact = "42"\n')
    proc = _headroom("regrade", "--store", str(store), "--grader", str(stricter), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["regrade"]["flips"] == {"passed -> failed": 2, "abstained -> failed": 2}
    assert {i["task_id"] for i in out["regrade"]["items"]} == {"pi", "unknown"}
    assert len(_headroom("runs", "--store", str(store)).stdout.splitlines()) == 2  # the regrade is its own run
    report = _headroom("report", "--store", str(store), "--format", "json")
    assert report.returncode == 0, report.stderr
