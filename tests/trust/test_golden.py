"""Golden-set graders: declarative checks, abstention as its own category, and re-grading stored answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.contract.grade import grade
from orchestrator.spec.grader import GoldenGrader
from tests.cli_run import headroom as _headroom
from tests.taskfactory import requires_cgroups, write_task

SCHEMA = {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("grader", "answer", "reward", "abstained"),
    [
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
    ],
)
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


@pytest.mark.cgroup
@requires_cgroups
def test_sweep_grades_answers_then_regrade_shows_every_flip(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _golden_task(root, "capital", "Paris", '[grader]\nexact = "Paris"\n')
    _golden_task(root, "pi", "3.14", "[grader]\nnumeric = {value = 3.14159, tolerance = 0.01}\n")
    _golden_task(root, "unknown", "I do not know", '[grader]\nexact = "42"\nallow_abstain = true\n')
    store = tmp_path / "s.db"
    proc = _headroom(
        "sweep", str(root), "--multipliers", "unbounded", "--attempts", "2", "--store", str(store), "--format", "json"
    )
    assert proc.returncode == 0, proc.stderr
    import sqlite3

    rows = sqlite3.connect(store).execute("SELECT trial_id, outcome, reason FROM executions WHERE final=1").fetchall()
    by_task = {t.split(":")[0]: (o, r) for t, o, r in rows}
    assert by_task == {"capital": ("passed", None), "pi": ("passed", None), "unknown": ("abstained", None)}
    # A stricter grader: pi now needs two more digits; the others keep theirs.
    stricter = tmp_path / "g.toml"
    stricter.write_text(
        '[graders.pi]\nnumeric = {value = 3.14159, tolerance = 0.0001}\n[graders.unknown]\nexact = "42"\n'
    )
    proc = _headroom("runs", "regrade", "--store", str(store), "--grader", str(stricter), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["regrade"]["flips"] == {"passed -> failed": 2, "abstained -> failed": 2}
    assert {i["task_id"] for i in out["regrade"]["items"]} == {"pi", "unknown"}
    assert len(json.loads(_headroom("runs", "--store", str(store), "--json").stdout)["runs"]) == 2  # its own run
    report = _headroom("report", "--store", str(store), "--format", "json")
    assert report.returncode == 0, report.stderr


def _bare_golden_task(root: Path, name: str, answer: str, grader_toml: str) -> Path:
    """A golden task with no tests/ at all: the grader alone decides."""
    _golden_task(root, name, answer, grader_toml)
    import shutil

    shutil.rmtree(root / name / "tests")
    return root / name


@pytest.mark.cgroup
@requires_cgroups
def test_a_golden_task_without_tests_is_graded_with_the_verifier_skipped(tmp_path: Path) -> None:
    import sqlite3

    root = tmp_path / "tasks"
    _bare_golden_task(root, "capital", "Paris", '[grader]\nexact = "Paris"\n')
    _bare_golden_task(root, "wrong", "Lyon", '[grader]\nexact = "Paris"\n')
    _bare_golden_task(root, "unknown", "I do not know", '[grader]\nexact = "42"\nallow_abstain = true\n')
    store = tmp_path / "s.db"
    proc = _headroom(
        "sweep", str(root), "--multipliers", "1", "--attempts", "1", "--store", str(store), "--format", "json"
    )
    assert proc.returncode == 0, proc.stderr
    db = sqlite3.connect(store)
    assert db.execute("SELECT enforcement FROM executions LIMIT 1").fetchone()[0].startswith("cgroup-")
    rows = db.execute("""SELECT e.trial_id, e.outcome, e.reason, v.json FROM executions e
                         JOIN evidence v USING (run_id, trial_id, try) WHERE e.final = 1""").fetchall()
    by_task = {t.split(":")[0]: (o, r, json.loads(ev)) for t, o, r, ev in rows}
    assert {t: (o, r) for t, (o, r, _) in by_task.items()} == {
        "capital": ("passed", None),
        "wrong": ("failed", None),
        "unknown": ("abstained", None),
    }
    for _, _, ev in by_task.values():
        assert ev["agent"]["exit_code"] == 0 and ev["agent"]["duration_s"] > 0  # the agent really ran, under its cgroup
        assert ev["verifier"]["skipped"] and ev["verifier"]["duration_s"] == 0 and ev["verifier"]["exit_code"] is None
        assert "checks" in ev["extra"]["grade"]  # the grader decided
    assert by_task["capital"][2]["reward"] == 1.0 and by_task["wrong"][2]["extra"]["grade"]["checks"] == {
        "exact": False
    }
    report = json.loads(_headroom("report", "--store", str(store), "--format", "json").stdout)
    [c] = report["configurations"]
    assert (c["counts"]["passed"], c["counts"]["failed"], c["counts"]["abstained"], c["n"]) == (1, 1, 1, 3)
    assert (c["abstention_rate"]["k"], c["pass_rate"]["n"]) == (1, 3)


def test_tests_may_be_omitted_only_by_a_golden_task(tmp_path: Path) -> None:
    from orchestrator.errors import SpecError
    from orchestrator.tasks.loader import load_task

    golden = _bare_golden_task(tmp_path, "g", "x", '[grader]\nexact = "x"\n')
    assert load_task(golden).has_tests is False
    plain = tmp_path / "plain"
    write_task(tmp_path, "plain", solve="true\n")
    (plain / "tests" / "test.sh").unlink()
    (plain / "tests").rmdir()
    with pytest.raises(SpecError, match="required file is missing"):
        load_task(plain)
    half = _bare_golden_task(tmp_path, "half", "x", '[grader]\nexact = "x"\n')
    (half / "tests").mkdir()  # a tests/ directory without its test.sh is a mistake, not a choice
    with pytest.raises(SpecError, match="required file is missing"):
        load_task(half)
    proc = _headroom("sweep", str(plain), "--multipliers", "1", "--store", str(tmp_path / "s.db"))
    assert proc.returncode == 2 and "tests/test.sh" in proc.stderr and "Traceback" not in proc.stderr


def test_backends_that_always_verify_refuse_a_task_without_tests_before_the_run(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from orchestrator.backends.base import check_capabilities
    from orchestrator.controller.tasksets import bundles
    from orchestrator.errors import SpecError
    from orchestrator.tasks.loader import load_task

    task = load_task(_bare_golden_task(tmp_path, "g", "x", '[grader]\nexact = "x"\n'))
    # The docker and kubernetes backends leave skips_verifier at its default (False). Building them needs a
    # daemon or a cluster, so a stand-in carries Capabilities like theirs into the real check_capabilities.
    for name in ("docker", "kubernetes"):
        caps = _caps(name)
        with pytest.raises(SpecError, match=f"the {name} backend needs tests/test.sh") as err:
            check_capabilities(SimpleNamespace(name=name, abilities=caps), {"without_tests": [task.id]})
        assert "\n" not in str(err.value)
    with pytest.raises(SpecError, match="kubernetes backend needs tests/test.sh"):
        bundles([task])  # the controller's task-set upload (headroom cluster): refused before anything is written


def _caps(name: str):
    from orchestrator import backends

    return backends.declared_abilities(name)
