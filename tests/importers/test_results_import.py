"""``headroom results import``: Harbor jobs and Terminal-Bench runs become first-class runs.

The fixtures under fixtures/ and those tests/importers/formats.py writes are written for these
tests in the shapes of Harbor's job and trial ``result.json`` and terminal-bench's ``results.json`` /
``run_metadata.json``. Expected figures are computed by hand in the test (or independently with numpy).
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests.importers.formats import H, T, write_harbor_job, write_tb_file, write_tb_run
from tests.importers.leaderboard import write_submission

FIX = Path(__file__).parent / "fixtures"
HARBOR_JOB = FIX / "harbor_job"
HARBOR_RESUMED = FIX / "harbor_job_resumed"
TB_RUN = FIX / "tb_run"
RULES_TB = "terminal-bench:leaderboard"


def outcomes(store: Path) -> dict[str, tuple[str, str | None]]:
    db = sqlite3.connect(store)
    return {t: (o, r) for t, o, r in db.execute("SELECT trial_id, outcome, reason FROM executions WHERE final = 1")}


def rules_of(doc: dict, label: str) -> dict:
    return doc["statistics"]["scoring_rules"]["configs"][label]


def test_harbor_job_maps_every_exception_type_and_lists_the_unmapped(tmp_path: Path, import_json) -> None:
    store = tmp_path / "h.db"
    [done] = import_json(store, str(HARBOR_JOB))
    got = outcomes(store)
    assert got == {
        "fix-git__A1b2C3d": ("passed", None),
        "fix-git__E4f5G6h": ("failed", None),
        "fix-git__C2d3E4f": ("passed", None),  # ContextLengthExceededError: the verifier's reward decides
        "serve-api__I7j8K9l": ("timeout", None),
        "serve-api__M0n1O2p": ("timeout", None),  # timed out, though the verifier passed it
        "train-model__Q3r4S5t": ("infra_error", "spawn_failed"),  # EnvironmentStartTimeoutError
        "train-model__U6v7W8x": ("harness_error", "reward_missing"),  # RewardFileNotFoundError
        "train-model__Y9z0A1b": ("harness_error", "orchestrator_error"),  # not in the table
    }
    summary = done["summary"]
    assert summary["unmapped"] == {"SandboxQuotaExceededError": 1}
    [config] = summary["configurations"]
    # Harbor's own rule counts serve-api__M0n1O2p by its reward: the one trial that moves.
    assert config["moves"] == [
        {"reason": "rewarded after agent timeout", "effect": "success under the rule, not under headroom", "trials": 1}
    ]
    [src] = summary["sources"]
    assert src["harness_version"] == "0.3.1" and src["files_read"] == 11  # result, config, lock and 8 trials
    assert summary["totals"] == {
        "sources": 1,
        "configurations": 1,
        "files_read": 11,
        "trials_read": 8,
        "trials_imported": 8,
        "trials_duplicate": 0,
        "trials_skipped": 0,
        "files_skipped": 0,
    }
    # Harbor's own mean reward (0.375) is recomputed from the imported trials by Harbor's rule.
    assert src["accuracy_checks"] == [
        {
            "reported_as": "mean reward (terminus-2__model-a__mini-bench)",
            "reported": 0.375,
            "recomputed": 0.375,
            "agrees": True,
        }
    ]
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(*), SUM(final), SUM(status = 'finished') FROM executions").fetchone() == (8, 8, 8)
    assert db.execute("SELECT axis, backend FROM runs").fetchone() == ("labels", "import:harbor")
    tokens = db.execute(
        "SELECT tokens_in, tokens_out, cost_usd, duration_s FROM executions WHERE trial_id = 'fix-git__A1b2C3d'"
    ).fetchone()
    assert tokens == (1000.0, 200.0, 0.01, 300.0)
    evidence = json.loads(db.execute("SELECT json FROM evidence WHERE trial_id = 'fix-git__A1b2C3d'").fetchone()[0])
    assert evidence["phases_s"] == {
        "environment_setup": 30.0,
        "agent_setup": 30.0,
        "agent_execution": 180.0,
        "verifier": 60.0,
    }
    assert evidence["config_overrides"]["override_memory_mb"] == 4096
    assert evidence["config_overrides"]["memory_enforcement_policy"] == "limit"
    assert evidence["env_names"] == ["EXAMPLE_API_KEY"]
    raw = (
        store.read_bytes() + (tmp_path / "h.db-wal").read_bytes()
        if (tmp_path / "h.db-wal").exists()
        else store.read_bytes()
    )
    assert b"sk-abcdefghijklmnopqrstuvwxyz" not in raw and b"sk-a****xyz" not in raw  # no secret reaches the store


def test_map_option_overrides_a_rule_and_restating_a_default_changes_nothing(tmp_path: Path, import_json, cli) -> None:
    plain = outcomes_of(tmp_path / "a.db", import_json, str(HARBOR_JOB))
    restated = outcomes_of(
        tmp_path / "b.db",
        import_json,
        str(HARBOR_JOB),
        "--map",
        "AgentTimeoutError=timeout",
        "--map",
        "EnvironmentStartTimeoutError=infra_error:spawn_failed",
    )
    assert restated == plain
    got = outcomes_of(
        tmp_path / "c.db",
        import_json,
        str(HARBOR_JOB),
        "--map",
        "SandboxQuotaExceededError=infra_error:api_error",
        "--map",
        "AgentTimeoutError=failed",
    )
    assert got["train-model__Y9z0A1b"] == ("infra_error", "api_error")
    assert got["serve-api__M0n1O2p"] == ("passed", None)  # mapped to 'failed': the reward decides
    bad = cli("results", "import", str(HARBOR_JOB), "--store", str(tmp_path / "x.db"), "--map", "X=infra_error")
    assert bad.returncode == 2 and "needs a reason" in bad.stderr and "Traceback" not in bad.stderr


def outcomes_of(store: Path, import_json, *args: str) -> dict[str, tuple[str, str | None]]:
    import_json(store, *args)
    return outcomes(store)


def test_a_terminal_bench_map_restating_the_default_changes_no_score(tmp_path: Path, import_json, report) -> None:
    """--map agent_timeout=timeout is the default: every trial, and so every score, stays the same."""
    run = write_tb_run(
        tmp_path / "runs" / "2026-03-01__10-00-00",
        [T("a", True), T("a", True, "agent_timeout"), T("b", False, "agent_timeout"), T("b", False)],
    )
    plain = outcomes_of(tmp_path / "a.db", import_json, str(run["dir"]))
    restated = outcomes_of(
        tmp_path / "b.db",
        import_json,
        str(run["dir"]),
        "--map",
        "agent_timeout=timeout",
        "--map",
        "unset=failed",
        "--map",
        "test_timeout=harness_error:verifier_timeout",
    )
    assert restated == plain
    headline = [c["score_infra_as_failure"]["estimate"] for c in report(tmp_path / "b.db")["configurations"]]
    assert headline == [0.25]  # one of four passed; the resolved trial after its agent timeout is a timeout
    relaxed = outcomes_of(tmp_path / "c.db", import_json, str(run["dir"]), "--map", "agent_timeout=failed")
    assert sorted(o for o, _ in relaxed.values()) == ["failed", "failed", "passed", "passed"]  # the tests decide


def test_a_trial_is_a_duplicate_only_by_identity_and_same_labels_merge(tmp_path: Path, import_json) -> None:
    """The resumed job repeats fix-git__A1b2C3d with the same trial id: one copy is kept. Given the same
    label, the job and its continuation form one configuration (attempts numbered by start time)."""
    store = tmp_path / "h.db"
    [done] = import_json(store, str(HARBOR_JOB), str(HARBOR_RESUMED), "--label", "terminus-2", "--label", "terminus-2")
    [dup] = done["summary"]["duplicates"]
    assert dup["trials"] == 1 and dup["examples"][0]["file"].endswith("fix-git__A1b2C3d/result.json")
    assert dup["duplicate_of_source"] != dup["source"]
    assert done["summary"]["totals"]["trials_duplicate"] == 1 and done["summary"]["partial"] is False
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 9
    attempts = db.execute(
        "SELECT trial_id, attempt FROM trials WHERE task_id = 'serve-api' ORDER BY attempt"
    ).fetchall()
    assert [a for _, a in attempts] == [0, 1, 2]  # in the order the trials started
    assert attempts[-1][0] == "serve-api__Z9y8X7w"
    # Without labels: two sources named on the command line are two configurations, never merged.
    [apart] = import_json(tmp_path / "apart.db", str(HARBOR_JOB), str(HARBOR_RESUMED))
    assert len(apart["summary"]["configurations"]) == 2 and apart["summary"]["totals"]["trials_imported"] == 9


def test_terminal_bench_run_mapping_and_provenance(tmp_path: Path, import_json, report, cli) -> None:
    store = tmp_path / "t.db"
    [done] = import_json(store, str(TB_RUN))
    got = outcomes(store)
    run = "2026-10-01__09-00-00"
    assert got[f"hello-world.1-of-2.{run}"] == ("passed", None)
    assert got[f"big-build.2-of-2.{run}"] == ("timeout", None)
    assert got[f"chess-best-move.1-of-2.{run}"] == ("harness_error", "verifier_timeout")
    assert got[f"fix-permissions.1-of-2.{run}"] == ("infra_error", "spawn_failed")
    assert got[f"fix-permissions.2-of-2.{run}"] == ("failed", None)
    doc = report(store)
    src = doc["provenance"]["import"]["sources"][0]
    assert src["harness"] == "terminal-bench" and src["harness_version"] == "commit 0123abcd"
    run_dir = TB_RUN / run
    for name in ("results.json", "run_metadata.json"):
        assert src["files_sha256"][f"tb_run/{run}/{name}"] == hashlib.sha256((run_dir / name).read_bytes()).hexdigest()
    assert src["path"] == str(run_dir.resolve())
    assert doc["experiment"]["configurations"] == ["terminus@example/model-b"]
    checks = done["summary"]["sources"][0]["accuracy_checks"]
    assert {c["reported"] for c in checks if c["reported_as"].startswith("accuracy")} == {0.375}
    assert all(c["agrees"] for c in checks)
    resumed = cli("resume", "--store", str(store), "--format", "none")
    assert resumed.returncode == 2 and "nothing to resume" in resumed.stderr and "Traceback" not in resumed.stderr


def test_several_runs_of_one_agent_with_repeating_trial_names(tmp_path: Path, import_json, report) -> None:
    """Three runs of one agent whose trials are all named task.N-of-2 (no run id in the name): every
    trial is its own (ids differ), the submission is one configuration of three source runs, and its
    published accuracy and pass@k are reproduced under the leaderboard rule."""
    sub = tmp_path / "results" / "20260301_terminus_m-one"
    runs = [
        write_tb_run(
            sub / "run-a", [T("t1", True), T("t1", False), T("t2", False), T("t2", False)], names_with_run=False
        ),
        write_tb_run(
            sub / "run-b", [T("t1", True), T("t1", True), T("t2", True), T("t2", False)], names_with_run=False
        ),
        write_tb_run(
            sub / "run-c",
            [T("t1", False), T("t1", False), T("t2", False), T("t2", True, "agent_timeout")],
            names_with_run=False,
        ),
    ]
    store = tmp_path / "r.db"
    [done] = import_json(store, str(tmp_path / "results"))
    tot = done["summary"]["totals"]
    # 12 trials in the run files, and each again as a per-trial copy (same id, same run): 12 duplicates of their own.
    assert (tot["trials_read"], tot["trials_imported"], tot["trials_duplicate"], tot["trials_skipped"]) == (
        24,
        12,
        12,
        0,
    )
    assert [c["label"] for c in done["summary"]["configurations"]] == ["terminus@m/one"]
    doc = report(store)
    res = rules_of(doc, "terminus@m/one")[RULES_TB]
    # By hand: run accuracies 1/4, 3/4, 1/4 (run-c's resolved trial after an agent timeout counts, as in its
    # results.json); their mean 5/12; stderr = SD(ddof=1) / sqrt(3) = sqrt(1/12) / sqrt(3) = 1/6.
    assert [r["accuracy"] for r in res["per_run"]] == [run["accuracy"] for run in runs] == [0.25, 0.75, 0.25]
    assert res["estimate"] == pytest.approx(5 / 12, abs=1e-15)
    assert res["stderr"] == pytest.approx(1 / 6, abs=1e-15)
    assert res["stderr"] == pytest.approx(np.std([0.25, 0.75, 0.25], ddof=1) / math.sqrt(3), abs=1e-15)
    for r, run in zip(res["per_run"], runs):  # pass@2 within each run, as its results.json has it
        assert r["pass_at_k"] == pytest.approx(run["pass_at_k"], abs=1e-15)
    assert [r["pass_at_k"]["2"] for r in res["per_run"]] == [0.5, 1.0, 0.5]  # by hand: t1 n=2 c=1 -> 1; t2 c=0 -> 0
    # headroom's reading beside it: 4 passes of 12, and the trial that moves, by reason.
    assert rules_of(doc, "terminus@m/one")["headroom:infra-as-failure"]["estimate"] == pytest.approx(4 / 12)
    assert doc["headline_rule"] == RULES_TB
    assert doc["statistics"]["scoring_rules"]["moves"]["terminus@m/one"][RULES_TB] == [
        {"reason": "resolved after agent timeout", "effect": "success under the rule, not under headroom", "trials": 1}
    ]
    # Run-to-run spread is over the three source runs (headroom's passes per run: 1/4, 3/4, 0).
    [config] = doc["configurations"]
    assert config["spread"]["basis"] == "source runs"
    assert config["spread"]["run_scores"] == [0.25, 0.75, 0.0]
    assert config["spread"]["sd"] == pytest.approx(np.std([0.25, 0.75, 0.0], ddof=1))


def test_three_submissions_with_the_same_trial_names_lose_nothing(tmp_path: Path, import_json) -> None:
    """Three one-run submissions named alike inside (task.1-of-2 ...): three configurations, every trial kept."""
    paths = []
    for i, model in enumerate(("m/a", "m/b", "m/a")):
        run = write_tb_run(
            tmp_path / f"sub{i}",
            [T("t1", i == 0), T("t1", True), T("t2", False)],
            model=model,
            names_with_run=False,
            per_trial_copies=False,
        )
        paths.append(str(run["dir"]))
    [done] = import_json(tmp_path / "s.db", *paths)
    labels = [c["label"] for c in done["summary"]["configurations"]]
    assert labels == ["terminus@m/a (sub0)", "terminus@m/b", "terminus@m/a (sub2)"]
    assert done["summary"]["totals"]["trials_imported"] == 9 and done["summary"]["totals"]["trials_duplicate"] == 0


def test_nested_submission_folders_and_timestamp_prefixed_files(tmp_path: Path, import_json, cli, report) -> None:
    """Submissions at different depths, one of them as <timestamp>_results.json files, one a run on its own."""
    root = tmp_path / "lb"
    f1 = write_tb_file(
        root / "core" / "20260301_goose_opus" / "2026-03-01__10-00-00_results.json",
        [T("t1", True), T("t2", False)],
        run_id="2026-03-01__10-00-00",
    )
    f2 = write_tb_file(
        root / "core" / "20260301_goose_opus" / "2026-03-02__10-00-00__results.json",
        [T("t1", True), T("t2", True)],
        run_id="2026-03-02__10-00-00",
    )
    deep = root / "core" / "more" / "deeper" / "20260302_droid"
    write_tb_run(deep / "rc_1", [T("t1", False), T("t2", False)], agent="droid", model=None)
    write_tb_run(deep / "rc_2", [T("t1", True), T("t2", False)], agent="droid", model=None)
    write_tb_run(
        root / "core" / "20260303_solo",
        [T("t1", True), T("t1", False), T("t2", True), T("t2", True)],
        agent="solo",
        model="m/s",
    )
    (root / "core" / "notes_results.json").write_text('{"comment": "not a run"}')
    store = tmp_path / "lb.db"
    refused = cli("results", "import", str(root), "--store", str(store))
    assert refused.returncode == 1 and "nothing imported" in refused.stderr and "Traceback" not in refused.stderr
    assert "not a Terminal-Bench results file" in refused.stdout and not store.exists()
    [done] = import_json(store, str(root), "--allow-partial")
    s = done["summary"]
    assert s["partial"] is True
    assert s["skipped"] == [
        {
            "file": "lb/core/notes_results.json",
            "reason": "not a Terminal-Bench results file (no 'results' list)",
            "trials": None,
        }
    ]
    # In path order; the goose runs hold no metadata: the submission's folder names them. The droid runs name no
    # model: the agent's name alone cannot tell its submissions apart, so the label carries the folder's name.
    assert [c["label"] for c in s["configurations"]] == ["20260301_goose_opus", "solo@m/s", "droid (20260302_droid)"]
    assert [len(c["sources"]) for c in s["configurations"]] == [2, 1, 2]
    assert s["totals"]["trials_imported"] == 2 + 2 + 2 + 2 + 4
    doc = report(store)
    goose = rules_of(doc, "20260301_goose_opus")[RULES_TB]
    assert [r["accuracy"] for r in goose["per_run"]] == [f1["accuracy"], f2["accuracy"]] == [0.5, 1.0]
    assert goose["estimate"] == pytest.approx(0.75)
    solo = rules_of(doc, "solo@m/s")[RULES_TB]
    assert solo["estimate"] == 0.75 and solo["stderr"] is None and solo["n_runs"] == 1
    # A folder that holds no run at all: one line, exit 2.
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("results", "import", str(empty), "--store", str(tmp_path / "e.db"))
    assert res.returncode == 2 and "neither a Harbor job" in res.stderr and "Traceback" not in res.stderr


def test_missing_times_are_null_and_drift_leaves_those_trials_out(tmp_path: Path, import_json, report) -> None:
    trials = [
        T(f"t{i % 5}", i % 3 == 0, started=None if i % 4 == 0 else f"2026-03-01T10:{i:02d}:00+00:00") for i in range(60)
    ]
    trials[1].started = ""  # an empty string is no time either
    run = write_tb_run(tmp_path / "runs" / "2026-03-01__10-00-00", trials, per_trial_copies=False)
    store = tmp_path / "m.db"
    import_json(store, str(run["dir"]))
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(*) FROM executions WHERE started_at = '' OR finished_at = ''").fetchone()[0] == 0
    missing = sum(1 for t in trials if not t.started)
    assert missing == 16
    assert db.execute("SELECT COUNT(*) FROM executions WHERE started_at IS NULL").fetchone()[0] == missing
    drift = report(store)["checks"]["drift"]
    assert drift["n_without_time"] == missing and drift["n_trials"] == 60
    assert sum(b["n"] for b in drift["blocks"]) == 60 - missing
    md_store_line = next(line for line in report_markdown(store) if "drift" in line.lower() and "block" in line)
    assert f"{missing} trial(s) without a recorded start time were left out" in md_store_line


def report_markdown(store: Path) -> list[str]:
    from orchestrator.report import document, markdown
    from orchestrator.store.sqlite import Store

    s = Store.open_existing(store)
    try:
        return markdown.render(document.build(s)).splitlines()
    finally:
        s.close()


def test_harbor_job_with_exceptions_under_every_rule(tmp_path: Path, import_json, report) -> None:
    """By hand. Task a: reward 1; AgentTimeoutError with reward 1; VerifierTimeoutError (no reward).
    Task b: reward 0; AgentTimeoutError without reward; EnvironmentStartTimeoutError; ContextLengthExceededError
    with reward 1 (the agent's own failure: the reward decides for headroom)."""
    job = write_harbor_job(
        tmp_path / "jobs" / "2026-04-01__10-00-00",
        [
            H("a", 1.0),
            H("a", 1.0, "AgentTimeoutError"),
            H("a", None, "VerifierTimeoutError"),
            H("b", 0.0),
            H("b", None, "AgentTimeoutError"),
            H("b", None, "EnvironmentStartTimeoutError"),
            H("b", 1.0, "ContextLengthExceededError"),
        ],
    )
    store = tmp_path / "h.db"
    [done] = import_json(store, str(job["dir"]))
    assert all(c["agrees"] for c in done["summary"]["sources"][0]["accuracy_checks"])
    doc = report(store, "--rules", "all")
    by = rules_of(doc, job["label"])
    # Harbor's job mean: rewards 1, 1, 0, 0, 0, 0, 1 over 7 trials; pass@2 (min 3 trials per task):
    # a: n=3, c=2 -> 1; b: n=4, c=1 -> 1 - (3/4)(2/3) = 1/2; mean 3/4.
    assert by["harbor:job-mean"]["estimate"] == pytest.approx(3 / 7) == job["mean"]
    assert by["harbor:job-mean"]["pass_at_k"] == {"2": pytest.approx(0.75)} and job["pass_at_k"] == {2: 0.75}
    # Terminal-Bench 2: a keeps all three (1, 1, 0) -> 2/3; b keeps its plain and agent-timeout trials (0, 0) -> 0;
    # score (2/3 + 0) / 2 = 1/3; stderr = sqrt((2/3)(1/3)/2 + 0/1) / 2 = 1/6.
    tb2 = by["terminal-bench-2:official"]
    assert tb2["estimate"] == pytest.approx(1 / 3) and tb2["stderr"] == pytest.approx(1 / 6)
    assert tb2["ci95"] == pytest.approx(1.96 / 6) and tb2["n_trials"] == 5 and tb2["n_tasks"] == 2
    assert tb2["excluded_by"] == {"ContextLengthExceededError": 1, "EnvironmentStartTimeoutError": 1}
    # headroom: passed a1, timeout a2, harness a3; failed b1, timeout b2, infra b3, passed b4 (reward decides).
    assert by["headroom:infra-as-failure"]["estimate"] == pytest.approx(2 / 7)
    assert by["headroom:infra-excluded"]["estimate"] == pytest.approx(2 / 5)
    moves = {
        (m["reason"], m["trials"])
        for m in doc["statistics"]["scoring_rules"]["moves"][job["label"]]["terminal-bench-2:official"]
    }
    assert moves == {
        ("rewarded after agent timeout", 1),
        ("left out by the rule: ContextLengthExceededError", 1),
        ("left out by the rule: EnvironmentStartTimeoutError", 1),
    }
    intervals = {i["kind"]: i["generalises_to"] for r in by.values() for i in r.get("intervals", [])}
    assert "new tasks" in intervals["clustered_se"] and "these tasks" in intervals["wilson95"]
    assert "these tasks" in intervals["stderr"]


def test_a_harbor_job_whose_trials_disagree_on_a_task_checksum_warns(tmp_path: Path, import_json) -> None:
    job = write_harbor_job(
        tmp_path / "job",
        [H("a", 1.0, checksum="sha256:" + "a" * 64), H("a", 0.0, checksum="sha256:" + "b" * 64), H("b", 1.0)],
    )
    store = tmp_path / "c.db"
    [done] = import_json(store, str(job["dir"]))
    [warning] = [p for p in done["summary"]["problems"] if "disagree on the task checksum" in p]
    assert "task a" in warning and "a" * 64 in warning and "b" * 64 in warning
    db = sqlite3.connect(store)
    digest, spec = db.execute("SELECT digest, spec_json FROM tasks WHERE task_id = 'a'").fetchone()
    assert digest == "unrecorded" and json.loads(spec)["digests_seen"] == ["sha256:" + "a" * 64, "sha256:" + "b" * 64]
    assert json.loads(spec)["digest_conflict"] is True


def test_leaderboard_accuracy_equals_each_submissions_own_metadata(tmp_path: Path, import_json, report, cli) -> None:
    """Leaderboard-style results: under the leaderboard rule each configuration is the accuracy its run reported."""
    subs = [
        write_submission(tmp_path / "lb", agent=agent, model=model, skill=skill, n_tasks=20, n_attempts=5, seed=seed)
        for agent, model, skill, seed in (("zeta", "m/z", 0.8, 1), ("alpha", "m/a", 0.5, 2), ("mid", "m/m", 0.3, 3))
    ]
    store = tmp_path / "lb.db"
    import_json(store, *(str(s["dir"]) for s in subs))
    doc = report(store)
    configs = {c["label"]: c for c in doc["configurations"]}
    assert [c["label"] for c in doc["configurations"]] == [
        s["label"] for s in subs
    ]  # the order given, not alphabetical
    for s in subs:
        c = configs[s["label"]]
        assert c["n"] == 100
        tb = rules_of(doc, s["label"])[RULES_TB]
        assert tb["estimate"] == pytest.approx(s["accuracy"], abs=1e-15)
        for k, expected in s["pass_at_k"].items():
            assert tb["per_run"][0]["pass_at_k"][str(k)] == pytest.approx(expected, abs=1e-15)
            assert c["pass_at_k"][k - 1] == pytest.approx(expected, abs=1e-12)
    stats = doc["statistics"]
    assert stats["axis"] == "labels" and stats["trends"] is None and stats["calibration"] is None
    assert stats["reference"] == "zeta@m/z"
    assert {(it["a"], it["b"]) for it in stats["comparisons"]["items"]} == {
        ("zeta@m/z", "alpha@m/a"),
        ("zeta@m/z", "mid@m/m"),
    }
    again = report(store, "--reference", "mid@m/m")
    assert again["statistics"]["reference"] == "mid@m/m"
    bad = cli("report", "--store", str(store), "--reference", "nobody@x")
    assert bad.returncode == 2 and "zeta@m/z" in bad.stderr
    bad_rule = cli("report", "--store", str(store), "--rules", "nope")
    assert bad_rule.returncode == 2 and "unknown scoring rule 'nope'" in bad_rule.stderr


def test_import_errors_are_one_line(tmp_path: Path, cli) -> None:
    res = cli("results", "import", str(tmp_path), "--store", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "neither a Harbor job" in res.stderr and "Traceback" not in res.stderr
    bad = tmp_path / "job"
    bad.mkdir()
    (bad / "result.json").write_text("{not json")
    res = cli("results", "import", str(bad), "--store", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "malformed JSON" in res.stderr and "Traceback" not in res.stderr
    res = cli("results", "import", str(tmp_path / "nowhere"), "--store", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "no such file" in res.stderr


def test_a_malformed_trial_file_is_skipped_with_its_reason(tmp_path: Path, import_json, cli) -> None:
    job = write_harbor_job(tmp_path / "job", [H("a", 1.0), H("a", 0.0), H("b", 1.0)])
    broken = next(p for p in sorted(job["dir"].iterdir()) if p.is_dir())
    (broken / "result.json").write_text('{"trial_name": "x", "task_name": ')
    res = cli("results", "import", str(job["dir"]), "--store", str(tmp_path / "x.db"))
    assert res.returncode == 1 and "malformed JSON" in res.stdout and "nothing imported" in res.stderr
    [done] = import_json(tmp_path / "y.db", str(job["dir"]), "--allow-partial")
    assert done["summary"]["totals"]["files_skipped"] == 1 and done["summary"]["totals"]["trials_imported"] == 2


def test_imported_runs_compare_like_swept_ones(tmp_path: Path, import_json, cli) -> None:
    a = write_submission(tmp_path / "lb", agent="one", model="m", skill=0.9, n_tasks=15, n_attempts=3, seed=11)
    b = write_submission(tmp_path / "lb", agent="two", model="m", skill=0.3, n_tasks=15, n_attempts=3, seed=12)
    store = tmp_path / "c.db"
    runs = import_json(store, str(a["dir"]), str(b["dir"]), "--separate")
    assert len(runs) == 2
    res = cli("runs", "compare", runs[0]["run_id"], runs[1]["run_id"], "--store", str(store), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    [it] = doc["statistics"]["comparisons"]["items"]
    assert (it["a"], it["b"]) == ("A:one@m", "B:two@m")
    assert it["score"]["diff"] == pytest.approx(b["accuracy"] - a["accuracy"], abs=1e-12)
    assert it["score"]["paired"]["n_tasks"] == 15 and it["score"]["paired"]["t_p"] is not None
    sr = doc["statistics"]["scoring_rules"]
    assert sr["A"]["configs"]["one@m"][RULES_TB]["estimate"] == pytest.approx(a["accuracy"])
    assert sr["B"]["configs"]["two@m"][RULES_TB]["estimate"] == pytest.approx(b["accuracy"])
    md = cli("runs", "compare", runs[0]["run_id"], runs[1]["run_id"], "--store", str(store), "--format", "markdown")
    assert "paired t over tasks" in md.stdout and "for independent samples of new tasks" in md.stdout
    assert "## Scores under named rules" in md.stdout and "Terminal-Bench leaderboard" in md.stdout


def test_an_imported_run_says_unknown_for_what_headroom_cannot_know(tmp_path: Path, import_json) -> None:
    import_json(tmp_path / "u.db", str(TB_RUN))
    text = "\n".join(report_markdown(tmp_path / "u.db"))
    assert "**unknown (imported)**" in text and "Enforcement canary: unknown (imported)" in text
    assert "not sandboxed" not in text.lower().replace("not known", "") and "before the canary existed" not in text
    from orchestrator.store.sqlite import Store
    from orchestrator.view.data import isolation_of

    s = Store.open_existing(tmp_path / "u.db")
    try:
        assert isolation_of(s.provenance(s.run().run_id)) == "unknown (imported)"
    finally:
        s.close()


def test_bundle_and_verify_carry_the_rules_and_count_unrecorded_digests_apart(tmp_path: Path, import_json, cli) -> None:
    store = tmp_path / "b.db"
    import_json(store, str(TB_RUN))  # a Terminal-Bench run records no task digests
    out = tmp_path / "bundles"
    out.mkdir()
    made = cli("runs", "bundle", "--store", str(store), "--rules", "all", "--out-dir", str(out))
    assert made.returncode == 0, made.stderr
    [path] = list(out.iterdir())
    published = json.loads(path.read_text())["body"]["published"]["statistics"]["scoring_rules"]
    assert published["requested"] == [
        "headroom:infra-as-failure",
        "headroom:infra-excluded",
        RULES_TB,
        "harbor:job-mean",
        "terminal-bench-2:official",
    ]
    res = cli("runs", "verify", str(path), "--format", "json")
    assert res.returncode == 0, res.stdout
    checks = json.loads(res.stdout)["checks"]
    assert not any("task digests well-formed" in c for c in checks)  # none was recorded: none is called well-formed
    assert any("4 task digest(s) unrecorded" in c for c in checks)
    # A forged trial is still caught: the published rule scores no longer follow from the trials.
    bundle = json.loads(path.read_text())
    first = next(t for t in bundle["body"]["trials"] if t["executions"][0]["evidence"]["is_resolved"] is False)
    first["executions"][0]["evidence"]["is_resolved"] = True
    from orchestrator.report import bundle as bundle_mod

    bundle["content_sha256"] = bundle_mod.content_digest(bundle["body"])
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(bundle))
    res = cli("runs", "verify", str(forged), "--format", "json")
    assert res.returncode == 1 and any("scoring_rules" in p for p in json.loads(res.stdout)["problems"])


def test_the_summary_of_a_folder_of_submissions_reads_as_tables(tmp_path: Path, cli) -> None:
    """Per source a row (grouped by configuration), a total row, the skipped files by reason, and per
    configuration its own rule beside headroom's with the trials that move."""
    root = tmp_path / "results"
    for s in range(4):
        for r in range(3):
            write_tb_run(
                root / f"2026030{s}_agent{s}_m" / f"run{r}",
                [T(f"t{i}", (i + r + s) % 3 == 0, "agent_timeout" if i == 1 else "unset") for i in range(10)],
                agent=f"agent{s}",
                model="m",
                per_trial_copies=r == 0,
            )
    (root / "broken_results.json").write_text("{")
    res = cli("results", "import", str(root), "--store", str(tmp_path / "s.db"), "--allow-partial")
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "12 source(s) in 4 configuration(s)" in text
    assert text.count("agent0@m") >= 2 and "total" in text and "12 sources" in text
    assert "Skipped (not imported), by reason" in text and "malformed JSON" in text and "broken_results.json" in text
    assert "repeat a trial of their own source" in text  # run0's per-trial copies, counted once
    assert "resolved after agent timeout" in text and "terminal-bench:leaderboard" in text
    assert max(len(line) for line in text.splitlines()) <= 160


def test_the_viewer_shows_the_rules_side_by_side(tmp_path: Path, import_json) -> None:
    from starlette.testclient import TestClient

    from orchestrator.view.app import create_app

    store = tmp_path / "v.db"
    [done] = import_json(store, str(TB_RUN))
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    page = client.get(f"/runs/{done['run_id']}")
    assert page.status_code == 200
    assert "Scores under named rules" in page.text and "Terminal-Bench leaderboard" in page.text
    assert "unknown (imported)" in page.text and "Terminal-Bench 2 official" not in page.text
    everything = client.get(f"/runs/{done['run_id']}?rules=all")
    assert "Terminal-Bench 2 official" in everything.text and "Harbor job mean" in everything.text
    bad = client.get(f"/runs/{done['run_id']}?rules=bogus")
    assert bad.status_code == 400 and "unknown scoring rule" in bad.text


def test_one_label_per_configuration_gives_one_configuration_per_label(tmp_path: Path, import_json, cli) -> None:
    root = tmp_path / "lb"
    for s in range(3):
        for r in range(2):
            write_tb_run(
                root / f"sub{s}" / f"run{r}",
                [T("t1", True), T("t2", r == 1)],
                names_with_run=False,
                per_trial_copies=False,
            )
    [done] = import_json(tmp_path / "l.db", str(root), "--label", "A", "--label", "B", "--label", "C")
    assert [(c["label"], c["trials"], len(c["sources"])) for c in done["summary"]["configurations"]] == [
        ("A", 4, 2),
        ("B", 4, 2),
        ("C", 4, 2),
    ]
    bad = cli("results", "import", str(root), "--store", str(tmp_path / "x.db"), "--label", "A")
    assert bad.returncode == 2 and "--label given 1 times for 3 configurations" in bad.stderr
    assert "terminus@m/one (sub0)" in bad.stderr and "Traceback" not in bad.stderr


def test_odd_but_valid_json_never_crashes_the_import(tmp_path: Path, import_json) -> None:
    """Fields of the wrong type, in files that parse: each trial is read as far as it can be, or skipped with why."""
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "results.json").write_text(
        json.dumps(
            {
                "results": [
                    "not an object",
                    {"task_id": 3, "trial_name": "x"},
                    {
                        "task_id": "t",
                        "trial_name": "t.1",
                        "is_resolved": "yes",
                        "failure_mode": 7,
                        "trial_started_at": 12,
                        "total_input_tokens": "many",
                        "agent_started_at": [1],
                        "agent_ended_at": {"a": 1},
                    },
                ],
                "accuracy": "high",
            }
        )
    )
    (run / "run_metadata.json").write_text(json.dumps({"agent_name": ["a"], "model_name": 5, "commit_hash": None}))
    job = tmp_path / "jobs" / "j1" / "trial_a"
    job.mkdir(parents=True)
    (job / "result.json").write_text(
        json.dumps(
            {
                "trial_name": "trial_a",
                "task_name": "a",
                "id": 5,
                "config": {"agent": "x", "environment": {"env": 3}},
                "agent_info": "terminus",
                "verifier_result": "1.0",
                "exception_info": {"exception_type": 9},
                "agent_result": [1],
                "started_at": 1,
                "environment_setup": "x",
                "task_checksum": 4,
            }
        )
    )
    [done] = import_json(tmp_path / "o.db", str(tmp_path / "runs"), str(tmp_path / "jobs"), "--allow-partial")
    s = done["summary"]
    assert s["totals"]["trials_read"] == 4 and s["totals"]["trials_imported"] == 2
    assert s["skip_reasons"] == {"a result without task_id or trial_name": 2}
