"""``headroom results import``: Harbor jobs and Terminal-Bench runs become first-class runs.

The fixtures under fixtures/ are written for these tests in the shapes of Harbor's job and
trial ``result.json`` and terminal-bench's ``results.json`` / ``run_metadata.json``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.importers.leaderboard import write_submission

FIX = Path(__file__).parent / "fixtures"
HARBOR_JOB = FIX / "harbor_job"
HARBOR_RESUMED = FIX / "harbor_job_resumed"
TB_RUN = FIX / "tb_run"


def headroom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, timeout=300)


def import_json(store: Path, *args: str) -> list[dict]:
    res = headroom("results", "import", *args, "--store", str(store), "--format", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def outcomes(store: Path) -> dict[str, tuple[str, str | None]]:
    db = sqlite3.connect(store)
    return {t: (o, r) for t, o, r in db.execute("SELECT trial_id, outcome, reason FROM executions WHERE final = 1")}


def report(store: Path, *args: str) -> dict:
    res = headroom("report", "--store", str(store), "--format", "json", *args)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_harbor_job_maps_every_exception_type_and_lists_the_unmapped(tmp_path: Path) -> None:
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
    assert summary["timeouts_the_verifier_passed"] == 1
    [src] = summary["sources"]
    assert src["harness_version"] == "0.3.1" and src["files_read"] == 11  # result, config, lock and 8 trials
    # Harbor's own mean reward (0.375) is recomputed from the imported trials by Harbor's rule.
    assert src["accuracy_checks"] == [{"reported_as": "terminus-2__model-a__mini-bench", "reported": 0.375,
                                       "recomputed": 0.375, "agrees": True}]
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(*), SUM(final), SUM(status = 'finished') FROM executions").fetchone() == (8, 8, 8)
    assert db.execute("SELECT axis, backend FROM runs").fetchone() == ("labels", "import:harbor")
    tokens = db.execute("SELECT tokens_in, tokens_out, cost_usd, duration_s FROM executions "
                        "WHERE trial_id = 'fix-git__A1b2C3d'").fetchone()
    assert tokens == (1000.0, 200.0, 0.01, 300.0)
    evidence = json.loads(db.execute("SELECT json FROM evidence WHERE trial_id = 'fix-git__A1b2C3d'").fetchone()[0])
    assert evidence["phases_s"] == {"environment_setup": 30.0, "agent_setup": 30.0, "agent_execution": 180.0,
                                    "verifier": 60.0}
    assert evidence["config_overrides"]["override_memory_mb"] == 4096
    assert evidence["config_overrides"]["memory_enforcement_policy"] == "limit"
    assert evidence["env_names"] == ["EXAMPLE_API_KEY"]
    raw = store.read_bytes() + (tmp_path / "h.db-wal").read_bytes() if (tmp_path / "h.db-wal").exists() else store.read_bytes()
    assert b"sk-abcdefghijklmnopqrstuvwxyz" not in raw and b"sk-a****xyz" not in raw  # no secret reaches the store


def test_map_option_overrides_a_rule(tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    [done] = import_json(store, str(HARBOR_JOB), "--map", "SandboxQuotaExceededError=infra_error:api_error",
                         "--map", "AgentTimeoutError=failed")
    got = outcomes(store)
    assert got["train-model__Y9z0A1b"] == ("infra_error", "api_error")
    assert got["serve-api__M0n1O2p"] == ("passed", None)  # mapped to 'failed': the reward decides
    assert done["summary"]["unmapped"] == {}
    bad = headroom("results", "import", str(HARBOR_JOB), "--store", str(tmp_path / "x.db"), "--map", "X=infra_error")
    assert bad.returncode == 2 and "needs a reason" in bad.stderr and "Traceback" not in bad.stderr


def test_a_trial_seen_twice_is_reported_and_counted_once(tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    [done] = import_json(store, str(HARBOR_JOB), str(HARBOR_RESUMED))
    dups = done["summary"]["duplicates_skipped"]
    assert [d["trial_name"] for d in dups] == ["fix-git__A1b2C3d"]
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 9
    attempts = db.execute("SELECT trial_id, attempt FROM trials WHERE task_id = 'serve-api' ORDER BY attempt").fetchall()
    assert [a for _, a in attempts] == [0, 1, 2]  # in the order the trials started
    assert attempts[-1][0] == "serve-api__Z9y8X7w"


def test_terminal_bench_run_mapping_and_provenance(tmp_path: Path) -> None:
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
        assert src["files_sha256"][name] == hashlib.sha256((run_dir / name).read_bytes()).hexdigest()
    assert src["path"] == str(run_dir.resolve())
    assert doc["experiment"]["configurations"] == ["terminus@example/model-b"]
    checks = done["summary"]["sources"][0]["accuracy_checks"]
    assert {c["reported"] for c in checks} == {0.375} and all(c["agrees"] for c in checks)
    resumed = headroom("sweep", "--resume", "--store", str(store), "--format", "none")
    assert resumed.returncode == 2 and "nothing to resume" in resumed.stderr and "Traceback" not in resumed.stderr


def test_leaderboard_accuracy_equals_each_submissions_own_metadata(tmp_path: Path) -> None:
    """Imported leaderboard-style results: headroom's headline per agent is the accuracy each run reported."""
    subs = [write_submission(tmp_path / "lb", agent=agent, model=model, skill=skill, n_tasks=20, n_attempts=5, seed=seed)
            for agent, model, skill, seed in (("zeta", "m/z", 0.8, 1), ("alpha", "m/a", 0.5, 2), ("mid", "m/m", 0.3, 3))]
    store = tmp_path / "lb.db"
    import_json(store, *(str(s["dir"]) for s in subs))
    doc = report(store)
    configs = {c["label"]: c for c in doc["configurations"]}
    assert [c["label"] for c in doc["configurations"]] == [s["label"] for s in subs]  # the order given, not alphabetical
    for s in subs:
        c = configs[s["label"]]
        assert c["n"] == 100
        assert c["score_infra_as_failure"]["estimate"] == pytest.approx(s["accuracy"], abs=1e-12)
        for k, expected in s["pass_at_k"].items():
            assert c["pass_at_k"][k - 1] == pytest.approx(expected, abs=1e-12)
    stats = doc["statistics"]
    assert stats["axis"] == "labels" and stats["trends"] is None and stats["calibration"] is None
    assert stats["reference"] == "zeta@m/z"
    assert {(it["a"], it["b"]) for it in stats["comparisons"]["items"]} == {("zeta@m/z", "alpha@m/a"), ("zeta@m/z", "mid@m/m")}
    # --reference accepts any label in the store.
    again = report(store, "--reference", "mid@m/m")
    assert again["statistics"]["reference"] == "mid@m/m"
    bad = headroom("report", "--store", str(store), "--reference", "nobody@x")
    assert bad.returncode == 2 and "zeta@m/z" in bad.stderr


def test_import_errors_are_one_line(tmp_path: Path) -> None:
    res = headroom("results", "import", str(tmp_path), "--store", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "neither a Harbor job" in res.stderr and "Traceback" not in res.stderr
    bad = tmp_path / "job"
    bad.mkdir()
    (bad / "result.json").write_text("{not json")
    res = headroom("results", "import", str(bad), "--store", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_imported_runs_compare_like_swept_ones(tmp_path: Path) -> None:
    a = write_submission(tmp_path / "lb", agent="one", model="m", skill=0.9, n_tasks=15, n_attempts=3, seed=11)
    b = write_submission(tmp_path / "lb", agent="two", model="m", skill=0.3, n_tasks=15, n_attempts=3, seed=12)
    store = tmp_path / "c.db"
    runs = import_json(store, str(a["dir"]), str(b["dir"]), "--separate")
    assert len(runs) == 2
    res = headroom("compare", runs[0]["run_id"], runs[1]["run_id"], "--store", str(store), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    [it] = doc["statistics"]["comparisons"]["items"]
    assert (it["a"], it["b"]) == ("A:one@m", "B:two@m")
    assert it["score"]["diff"] == pytest.approx(b["accuracy"] - a["accuracy"], abs=1e-12)
    assert it["score"]["paired"]["n_tasks"] == 15 and it["score"]["paired"]["t_p"] is not None
    md = headroom("compare", runs[0]["run_id"], runs[1]["run_id"], "--store", str(store), "--format", "markdown")
    assert "paired t over tasks" in md.stdout and "with the task design effect" in md.stdout
