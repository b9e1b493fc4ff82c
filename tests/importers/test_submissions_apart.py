"""Imports keep submissions apart: one agent name without a model never makes one configuration of several
submissions; a join happens only when asked for, and is printed; a source the store already holds is skipped.

Fixtures are written here in Terminal-Bench's run layout (tests/importers/formats.py), with the shapes of real
leaderboard entries: a submission filed as one renamed run directory, and submission folders holding their runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.store.sqlite import Store
from tests.importers.formats import H, T, write_harbor_job, write_tb_run

RULES_TB = "terminal-bench:leaderboard"

#: Three submissions of one agent that records no model, each with its own score (as on the leaderboard, where
#: one agent name ran three different models).
THREE = {
    "20250902_lead_sonnet": [T("t1", True), T("t2", True), T("t3", False), T("t4", False)],  # 0.50
    "20250902_lead_qwen": [T("t1", True), T("t2", False), T("t3", False), T("t4", False)],  # 0.25
    "20250906_lead_opus": [T("t1", True), T("t2", True), T("t3", True), T("t4", False)],  # 0.75
}


def _renamed_run(parent: Path, submission: str, trials: list[T], run_id: str) -> dict:
    """A run as the harness writes it (directory named after its run id), then renamed to the submission's name."""
    run = write_tb_run(parent / run_id, trials, agent="LeadArchitectAgent", model=None, per_trial_copies=False)
    (parent / run_id).rename(parent / submission)
    return run


def _runs(store: Path) -> int:
    s = Store.open_existing(store)
    try:
        return len(s.runs())
    finally:
        s.close()


def _labels_and_scores(done: dict) -> dict[str, float]:
    return {c["label"]: c["source_rule_score"] for c in done["summary"]["configurations"]}


def _expect_three_apart(done: dict, runs: dict[str, dict]) -> None:
    scores = _labels_and_scores(done)
    assert len(scores) == 3, scores
    for submission, run in runs.items():
        [label] = [lab for lab in scores if submission in lab]
        assert label == f"LeadArchitectAgent ({submission})"
        assert scores[label] == pytest.approx(run["accuracy"])  # each submission's own published accuracy
    assert sorted(scores.values()) == pytest.approx([0.25, 0.5, 0.75])  # not one pooled 0.5
    assert done["summary"]["merges"] == []


def test_three_renamed_runs_beside_other_submissions_stay_three_configurations(tmp_path: Path, import_json) -> None:
    """The leaderboard's shape: three one-run submissions filed as renamed run directories, beside a submission
    folder holding its runs. The agent name is the same and no model is recorded: three configurations."""
    lb = tmp_path / "lb"
    runs = {
        sub: _renamed_run(lb, sub, trials, f"2025-09-0{i + 1}__11-19-06")
        for i, (sub, trials) in enumerate(THREE.items())
    }
    write_tb_run(lb / "20250923_droid" / "rc_1", [T("t1", True), T("t2", False)], agent="droid", model=None)
    write_tb_run(lb / "20250923_droid" / "rc_2", [T("t1", True), T("t2", True)], agent="droid", model=None)
    [done] = import_json(tmp_path / "s.db", str(lb))
    scores = _labels_and_scores(done)
    assert scores.pop("droid (20250923_droid)") == pytest.approx(0.75)  # its two runs: one submission
    done["summary"]["configurations"] = [c for c in done["summary"]["configurations"] if c["label"] in scores]
    _expect_three_apart(done, runs)


def test_three_renamed_runs_alone_in_a_folder_stay_three_configurations(tmp_path: Path, import_json) -> None:
    """The same three submissions copied into one folder with nothing else: by layout alone they could be one
    submission's three runs, but each directory was renamed from the run it holds: each is its own submission."""
    lb = tmp_path / "lead"
    runs = {
        sub: _renamed_run(lb, sub, trials, f"2025-09-0{i + 1}__11-19-06")
        for i, (sub, trials) in enumerate(THREE.items())
    }
    [done] = import_json(tmp_path / "s.db", str(lb))
    _expect_three_apart(done, runs)


@pytest.mark.parametrize("renamed", [False, True], ids=["run-named-by-harness", "run-renamed"])
def test_three_submission_folders_each_holding_a_run_stay_three_configurations(
    tmp_path: Path, import_json, report, renamed: bool
) -> None:
    """Three submission folders, each holding its run under the harness's own name (the same timestamp in all
    three) or renamed: three configurations, each named by its submission folder, each with its own score."""
    lb = tmp_path / "lb"
    runs = {}
    for sub, trials in THREE.items():
        runs[sub] = write_tb_run(
            lb / sub / "2025-09-01__11-19-06", trials, agent="LeadArchitectAgent", model=None, per_trial_copies=False
        )
        if renamed:
            (lb / sub / "2025-09-01__11-19-06").rename(lb / sub / "final-run")
    store = tmp_path / "s.db"
    [done] = import_json(store, str(lb))
    _expect_three_apart(done, runs)
    doc = report(store)
    rules = doc["statistics"]["scoring_rules"]["configs"]
    for sub, run in runs.items():
        assert rules[f"LeadArchitectAgent ({sub})"][RULES_TB]["estimate"] == pytest.approx(run["accuracy"])


def test_runs_of_one_submission_naming_no_model_stay_one_configuration(tmp_path: Path, import_json) -> None:
    """A submission folder of runs the harness named (run id = directory name): one submission, as filed."""
    sub = tmp_path / "20250923_droid_opus"
    write_tb_run(sub / "tb_rc_1", [T("t1", True), T("t2", False)], agent="Factory Droid", model=None)
    write_tb_run(sub / "tb_rc_2", [T("t1", True), T("t2", True)], agent="Factory Droid", model=None)
    [done] = import_json(tmp_path / "s.db", str(sub))
    [c] = done["summary"]["configurations"]
    assert c["label"] == "Factory Droid (20250923_droid_opus)" and len(c["sources"]) == 2
    # Layout alone decided: the summary says so, and how to keep them apart, which works.
    assert any("read as one submission (20250923_droid_opus)" in n for n in c["notes"])
    [apart] = import_json(tmp_path / "apart.db", str(sub / "tb_rc_1"), str(sub / "tb_rc_2"))
    assert [c["label"] for c in apart["summary"]["configurations"]] == [
        "Factory Droid (tb_rc_1)",
        "Factory Droid (tb_rc_2)",
    ]


def test_merge_never_joins_sources_without_a_model_and_label_joins_are_printed(tmp_path: Path, cli) -> None:
    lb = tmp_path / "lb"
    for sub, trials in THREE.items():
        write_tb_run(lb / sub / "run", trials, agent="LeadArchitectAgent", model=None, per_trial_copies=False)
    res = cli("results", "import", str(lb), "--merge", "--store", str(tmp_path / "m.db"), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)[0]["summary"]["configurations"]) == 3  # nothing says they ran the same model
    res = cli(
        "results",
        "import",
        str(lb),
        "--label",
        "lead",
        "--label",
        "lead",
        "--label",
        "opus",
        "--store",
        str(tmp_path / "l.db"),
    )
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "merged on request (--label given the same name): lead is one configuration of 2 submissions" in text
    assert "20250902_lead_qwen" in text and "20250902_lead_sonnet" in text


def test_a_source_the_store_holds_is_skipped_unless_again(tmp_path: Path, cli, import_json) -> None:
    sub = tmp_path / "sub"
    write_tb_run(sub / "2026-01-01__10-00-00", [T("t1", True), T("t2", False)])
    store = tmp_path / "s.db"
    import_json(store, str(sub))
    # The same content, copied elsewhere under another name, is the same source.
    copy = tmp_path / "copy-of-sub"
    shutil.copytree(sub, copy)
    again = cli("results", "import", str(copy), "--store", str(store))
    assert again.returncode == 0, again.stderr
    text = " ".join(again.stdout.split())
    assert "already imported: copy-of-sub/2026-01-01__10-00-00: the same content is in run" in text
    assert "nothing new to import" in text
    assert _runs(store) == 1
    [held] = import_json(store, str(copy))
    assert held["run_id"] is None and held["summary"]["nothing_new"] is True
    assert held["summary"]["already_imported"][0]["imported_as"] == "sub/2026-01-01__10-00-00"
    assert _runs(store) == 1
    # A new run beside it: only the new one is imported, and the held one is named.
    write_tb_run(copy / "2026-01-02__10-00-00", [T("t1", False), T("t2", False)])
    [done] = import_json(store, str(copy))
    assert [h["source"] for h in done["summary"]["already_imported"]] == ["copy-of-sub/2026-01-01__10-00-00"]
    assert done["summary"]["totals"]["sources"] == 1 and done["summary"]["totals"]["trials_imported"] == 2
    # --again imports the held ones once more, as a run of their own.
    [done] = import_json(store, str(sub), "--again")
    assert done["summary"]["already_imported"] == [] and done["summary"]["totals"]["trials_imported"] == 2
    assert _runs(store) == 3


def test_three_harbor_jobs_of_one_agent_without_a_model_stay_three_configurations(tmp_path: Path, import_json) -> None:
    """The same in Harbor's job layout: three submission folders each holding a job of agent ``lead`` that records
    no model; each keeps its own mean reward, which agrees with the job's own."""
    lb = tmp_path / "lb"
    rewards = {"sub-a": [1.0, 0.0, 0.0, 0.0], "sub-b": [1.0, 1.0, 0.0, 0.0], "sub-c": [1.0, 1.0, 1.0, 0.0]}
    jobs = {
        sub: write_harbor_job(
            lb / sub / "2026-04-01__10-00-00", [H(f"t{i}", r) for i, r in enumerate(rs)], agent="lead", model=None
        )
        for sub, rs in rewards.items()
    }
    [done] = import_json(tmp_path / "h.db", str(lb))
    got = {c["label"]: c for c in done["summary"]["configurations"]}
    assert sorted(got) == ["lead (sub-a)", "lead (sub-b)", "lead (sub-c)"]
    for sub, job in jobs.items():
        assert got[f"lead ({sub})"]["source_rule_score"] == pytest.approx(job["mean"])
    assert all(all(c["agrees"] for c in s["accuracy_checks"]) for s in done["summary"]["sources"])
