"""One configuration per submission whatever depth its runs sit at; a Harbor job's missing trials stop the
import; a native sweep's spread is over attempt indices. Fixtures written here in each format's shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.bench_stats import write_store
from orchestrator.report import document, markdown
from orchestrator.stats.synthetic import make_sweep
from orchestrator.store.sqlite import Store
from tests.importers.formats import H, T, write_harbor_job, write_tb_run

RULES_TB = "terminal-bench:leaderboard"


def test_runs_at_two_depths_are_two_submissions_unless_merge_is_asked(tmp_path: Path, import_json, report) -> None:
    """``sub/run1`` and ``sub/more/run2`` of one agent and model: two submissions by layout (each its own score);
    ``--merge`` joins them into one configuration of two source runs and says so; another agent's submission folder
    beside them stays its own either way."""
    root = tmp_path / "lb"
    run1 = write_tb_run(root / "sub" / "run1", [T("t1", True), T("t2", False)], per_trial_copies=False)
    run2 = write_tb_run(root / "sub" / "more" / "run2", [T("t1", True), T("t2", True)], per_trial_copies=False)
    write_tb_run(
        root / "sub" / "other-agent" / "r1",
        [T("t1", False), T("t2", False)],
        agent="droid",
        model="m/two",
        per_trial_copies=False,
    )
    write_tb_run(
        root / "sub" / "other-agent" / "r2",
        [T("t1", True), T("t2", False)],
        agent="droid",
        model="m/two",
        per_trial_copies=False,
    )
    [apart] = import_json(tmp_path / "apart.db", str(root))
    configs = {c["label"]: c for c in apart["summary"]["configurations"]}
    assert list(configs) == ["terminus@m/one (more)", "droid@m/two", "terminus@m/one (run1)"]
    assert configs["terminus@m/one (run1)"]["headline"] == 0.5 and configs["terminus@m/one (more)"]["headline"] == 1.0
    assert apart["summary"]["merges"] == []
    store = tmp_path / "s.db"
    [done] = import_json(store, str(root), "--merge")
    configs = {c["label"]: c for c in done["summary"]["configurations"]}
    assert list(configs) == ["terminus@m/one", "droid@m/two"]
    assert sorted(configs["terminus@m/one"]["sources"]) == ["lb/sub/more/run2", "lb/sub/run1"]
    [merged] = done["summary"]["merges"]
    assert merged["label"] == "terminus@m/one" and sorted(merged["submissions"]) == ["more", "run1"]
    assert merged["how"].startswith("--merge")
    doc = report(store)
    res = doc["statistics"]["scoring_rules"]["configs"]["terminus@m/one"][RULES_TB]
    # By hand: run accuracies 1/2 and 2/2, their mean 3/4, over two source runs.
    by_run = {r["run"]: r["accuracy"] for r in res["per_run"]}
    assert by_run == {"lb/sub/run1": run1["accuracy"], "lb/sub/more/run2": run2["accuracy"]}
    assert sorted(by_run.values()) == [0.5, 1.0]
    assert res["estimate"] == pytest.approx(0.75) and res["n_runs"] == 2
    spread = {c["label"]: c["spread"] for c in doc["configurations"]}
    assert spread["terminus@m/one"]["basis"] == "source runs" and spread["terminus@m/one"]["n_runs"] == 2


def test_runs_that_name_no_agent_are_not_joined_by_layout(tmp_path: Path, import_json) -> None:
    root = tmp_path / "lb"
    write_tb_run(root / "sub" / "run1", [T("t1", True)], metadata=False, per_trial_copies=False)
    write_tb_run(root / "sub" / "more" / "run2", [T("t1", False)], metadata=False, per_trial_copies=False)
    [done] = import_json(tmp_path / "n.db", str(root))
    assert len(done["summary"]["configurations"]) == 2


def test_a_harbor_job_listing_trials_not_on_disk_counts_them_as_skipped(tmp_path: Path, cli, import_json) -> None:
    job = write_harbor_job(tmp_path / "job", [H("a", 1.0), H("a", 0.0), H("b", 1.0), H("b", 1.0)])
    gone = sorted(p for p in job["dir"].iterdir() if p.is_dir())[:1]
    for p in gone:
        shutil.rmtree(p)
    store = tmp_path / "h.db"
    refused = cli("results", "import", str(job["dir"]), "--store", str(store), "--format", "json")
    assert refused.returncode == 1 and "nothing imported" in refused.stderr and not store.exists()
    summary = json.loads(refused.stdout)[0]["summary"]
    assert summary["partial"] is True and summary["totals"]["trials_skipped"] == 1
    [skip] = summary["skipped"]
    assert (
        skip["file"] == "job/result.json" and skip["trials"] == 1 and "no trial result.json on disk" in skip["reason"]
    )
    [done] = import_json(store, str(job["dir"]), "--allow-partial")
    tot = done["summary"]["totals"]
    # 4 listed = 3 imported + 1 skipped: every trial the job ran is accounted for.
    assert (tot["trials_imported"], tot["trials_skipped"]) == (3, 1)


def test_a_native_sweeps_spread_is_over_attempt_indices(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    write_store(make_sweep(5, 3, seed=1), path).close()
    doc = document.build(Store.open_existing(path))
    assert {c.spread.basis for c in doc.configurations} == {"attempt index"}
    assert all(c.spread.n_runs == 3 for c in doc.configurations)  # attempts 0, 1, 2 of every task
    assert "attempt r of every task forms run r" in markdown.render(doc)
    assert doc.statistics is not None and doc.statistics.scoring_rules is not None
    assert doc.statistics.scoring_rules.run_basis == "attempt index"
