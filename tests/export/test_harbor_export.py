"""``headroom runs export --format harbor``: a job folder the pinned Harbor's own models load, that imports back
with the same figures, whose OOM and infra verdicts stay infra, and whose file names no task or agent can steer.

The run is written into a real SQLite store through the store's own import path (its trials' verdicts are set
by the test, so every outcome and reason of the taxonomy is present at once, which no single real sweep gives),
its artifacts through the real artifact sink. Harbor 0.25.0 runs in its own interpreter
(``scripts/harbor/install.sh``; headroom never imports it): without that venv these tests skip, and under CI
a skip is a failure (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchestrator.artifacts.sink import StoreSink, TryKey
from orchestrator.export.harbor_job import exception_type
from orchestrator.importers.outcomes import harbor_verdict
from orchestrator.report import document
from orchestrator.spec.outcome import HarnessReason, InfraReason, Outcome
from orchestrator.spec.provenance import Provenance
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord
from orchestrator.store.sqlite import Store
from tests.conftest import REPO
from tests.inprocess import Headroom, in_process

CHECK = Path(__file__).with_name("harbor_check.py")
HOSTILE_TASKS = ["../../escaped", "..", "a/b/../../c", "/etc/passwd", "x\x1b[31m\n`$(id)`", "ok-task"]


def harbor_python() -> Path:
    venv = Path(os.environ.get("HEADROOM_HARBOR_VENV") or REPO / ".cache" / "harbor" / "venv")
    python = venv / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"Harbor's venv is missing ({python}); run scripts/harbor/install.sh")
    return python


def harbor_load(job_dir: Path) -> dict[str, Any]:
    """The job folder as the pinned Harbor package loads it (tests/export/harbor_check.py, in Harbor's interpreter)."""
    res = subprocess.run(
        [str(harbor_python()), str(CHECK), str(job_dir)], capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(res.stdout)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Headroom:
    return in_process(capsys, monkeypatch)


#: (outcome, reason, reward) per trial of each configuration: every verdict the export must carry.
VERDICTS: list[tuple[str, str | None, float | None]] = [
    ("passed", None, 1.0),
    ("passed", None, 1.0),
    ("failed", None, 0.0),
    ("failed", "unjudged_state", None),  # the verifier never ran: no reward
    ("timeout", None, 1.0),  # passed the tests after its budget: still a timeout
    ("infra_error", "oom_killed", 0.0),
    ("infra_error", "evicted", None),
    ("harness_error", "verifier_crashed", None),
    ("abstained", None, 0.0),
]


def _execution(
    i: int, outcome: str, reason: str | None, reward: float | None, *, final: bool = True
) -> ExecutionRecord:
    return ExecutionRecord(
        try_index=0 if final else 1,
        status="finished",
        final=final,
        started_at=f"2026-01-01T00:00:{i:02d}+00:00",
        finished_at=f"2026-01-01T00:01:{i:02d}+00:00",
        outcome=outcome,
        reason=reason,
        reward=reward,
        limit_cpus=1.0,
        limit_memory_bytes=512 * 1024 * 1024,
        peak_memory_bytes=512 * 1024 * 1024 if reason == "oom_killed" else 100,
        duration_s=60.0,
        tokens_in=1000.0 + i,
        tokens_out=100.0,
        cost_usd=0.01 * (i + 1),
        usage_source="gateway",
        evidence={"note": "headroom evidence"},
    )


def make_run(path: Path, task_ids: list[str] | None = None) -> tuple[Store, str]:
    """Two configurations, each trial of VERDICTS once; one trial has an earlier (non-final) try."""
    trials: list[TrialRecord] = []
    tasks: dict[str, TaskRecord] = {}
    for c, label in enumerate(["agent-a", "agent-b@model"]):
        for i, (outcome, reason, reward) in enumerate(VERDICTS):
            if c == 1 and i == 0:  # agent-b fails its first passed trial: the two configurations differ
                outcome, reward = "failed", 0.0
            task_id = (task_ids or [])[i] if task_ids and i < len(task_ids) else f"task-{i}"
            tasks[task_id] = TaskRecord(task_id, f"{i:064x}", task_id)
            executions = [_execution(i, outcome, reason, reward)]
            if i == 1:
                executions = [_execution(i, "infra_error", "node_lost", None, final=False), *executions]
            trials.append(TrialRecord(f"{task_id}:{label}:0", task_id, label, 1.0, 1.0, 0, i, len(trials), executions))
    store = Store(path)
    run_id = store.import_run(
        RunRecord("export-me", "local", "cgroup-v2", "labels", {"reward_threshold": 1.0}, Provenance()),
        list(tasks.values()),
        trials,
    )
    sink = StoreSink(path)
    try:
        for t in trials:
            key = TryKey(run_id, t.trial_id, 0)
            sink.add_bytes(key, "verifier/stdout", b"1 passed\n")
            sink.add_bytes(key, "logs/trajectory.json", b'{"steps": []}')
            sink.add_bytes(key, "logs/../../../escaped.txt", b"must stay inside the trial folder")
            sink.add_bytes(key, "logs/..", b"a name of dots")
            sink.add_bytes(key, "gateway/calls.jsonl", b"{}\n")
            sink.add_bytes(key, "manifest.json", b"[]")  # a name like the export's own files: kept apart from them
            # what Harbor's importer reads as SIGKILL signs, written by the agent itself
            sink.add_bytes(key, "logs/exit-code.txt", b"137\n")
            sink.add_bytes(key, "agent/stdout", b"agent said hello\nKilled\n")
            sink.finish(key)
    finally:
        sink.close()
    return store, run_id


def export(cli: Headroom, store: Path, run_id: str, out: Path) -> str:
    res = cli("runs", "export", f"{store}:{run_id}", "--format", "harbor", "--out", str(out))
    assert res.returncode == 0, res.stderr
    return res.stdout


def figures(store: Store, run_id: str) -> dict[str, tuple[int, int, int, dict[str, int], dict[str, int]]]:
    doc = document.build(store, run_id)
    return {
        c.label: (c.n, c.pass_rate.k, c.pass_rate.n, {k: v for k, v in c.counts.items() if v}, c.infra_reasons)
        for c in doc.configurations
    }


def test_every_exported_file_loads_in_harbor_and_its_stats_are_harbors(tmp_path: Path, cli: Headroom) -> None:
    store, run_id = make_run(tmp_path / "s.db")
    store.close()
    said = export(cli, tmp_path / "s.db", run_id, tmp_path / "jobs" / "job")
    assert f"{2 * len(VERDICTS)} trials of 2 configuration(s), 2 earlier tries as retries" in " ".join(said.split())
    loaded = harbor_load(tmp_path / "jobs" / "job")
    # `harbor view`'s own app lists the job, its tasks and every trial, with the verifier's output
    assert loaded["viewer"]["jobs"] == ["job"] and loaded["viewer"]["tasks"] == 2 * len(VERDICTS)
    assert set(loaded["viewer"]["verifier_stdout"].values()) == {"1 passed\n"}
    assert loaded["agents"] == ["agent-a", "agent-b@model"]
    assert loaded["n_total_trials"] == len(loaded["trials"]) == loaded["lock_trials"] == 2 * len(VERDICTS)
    written, recomputed = loaded["stats_written"], loaded["stats_recomputed"]
    for key in ("n_completed_trials", "n_errored_trials", "n_input_tokens", "n_output_tokens", "evals"):
        assert written[key] == recomputed[key], key
    assert written["cost_usd"] == pytest.approx(recomputed["cost_usd"]) and written["n_retries"] == 2
    assert written["metrics"] == recomputed["metrics"]  # Harbor's own Mean over the rewards
    assert written["metrics"]["agent-a__adhoc"] == [
        {"mean": pytest.approx(3 / 9)}
    ]  # two passes and the late timeout, of 9
    one = next(t for t in loaded["trials"].values() if t["agent"] == "agent-a" and t["task_name"] == "task-0")
    assert {"agent/stdout.txt", "agent/trajectory.json", "verifier/test-stdout.txt"} <= set(one["files"])
    assert {"config.json", "result.json", "lock.json", "artifacts/headroom/manifest.json"} <= set(one["files"])
    assert {"artifacts/headroom/files/manifest.json", "artifacts/headroom/files/gateway/calls.jsonl"} <= set(
        one["files"]
    )
    manifest = json.loads(
        (tmp_path / "jobs" / "job" / one["trial_name"] / "artifacts/headroom/manifest.json").read_text()
    )
    assert {m["name"] for m in manifest} >= {"manifest.json", "agent/stdout", "logs/trajectory.json"}


def test_oom_and_infra_verdicts_are_harbor_exceptions_and_import_back_as_infra(tmp_path: Path, cli: Headroom) -> None:
    store, run_id = make_run(tmp_path / "s.db")
    store.close()
    export(cli, tmp_path / "s.db", run_id, tmp_path / "jobs" / "job")
    trials = harbor_load(tmp_path / "jobs" / "job")["trials"].values()
    by_task = {t["task_name"]: t for t in trials if t["agent"] == "agent-a"}
    oom = by_task["task-5"]
    assert oom["exception_type"] == "MemoryLimitExceededError"
    assert "infra_error(oom_killed)" in oom["exception_message"] and "536870912" in oom["exception_message"]
    assert oom["failure_cause"] == "sandbox_failed" and not oom["reward_valid"]  # Harbor files it as its sandbox's
    evicted = by_task["task-6"]
    assert (
        evicted["exception_type"] == "HeadroomInfraEvictedError"
        and "infra_error(evicted)" in evicted["exception_message"]
    )
    assert by_task["task-4"]["exception_type"] == "AgentTimeoutError"
    assert by_task["task-0"]["exception_type"] is None and by_task["task-2"]["exception_type"] is None

    res = cli("results", "import", str(tmp_path / "jobs"), "--store", str(tmp_path / "back.db"), "--format", "json")
    assert res.returncode == 0, res.stderr
    [done] = json.loads(res.stdout)
    assert done["summary"]["unmapped"] == {}
    back = Store.open_existing(tmp_path / "back.db")
    rows = {(tid, o, r) for tid, o, r, _ in back.final_results(done["run_id"])}
    assert any(o == "infra_error" and r == "oom_killed" for _, o, r in rows)
    assert any(o == "infra_error" and r == "evicted" for _, o, r in rows)
    assert not any(o == "failed" and r in ("oom_killed", "evicted") for _, o, r in rows)


def test_round_trip_reproduces_the_runs_figures(tmp_path: Path, cli: Headroom) -> None:
    store, run_id = make_run(tmp_path / "s.db")
    original = figures(store, run_id)
    store.close()
    export(cli, tmp_path / "s.db", run_id, tmp_path / "jobs" / "job")
    res = cli("results", "import", str(tmp_path / "jobs" / "job"), "--store", str(tmp_path / "back.db"), "--json")
    assert res.returncode == 0, res.stderr
    [done] = json.loads(res.stdout)
    back = Store.open_existing(tmp_path / "back.db")
    # a Harbor agent that names no model is labelled with its job folder's name on import, as for any Harbor job
    assert {k.removesuffix(" (job)"): v for k, v in figures(back, done["run_id"]).items()} == original
    assert original["agent-a"][1:3] == (2, 9) and original["agent-b@model"][1:3] == (1, 9)  # the figures differ
    # the source's own rule (Harbor's mean reward) agrees with the metric the export wrote
    checks = [c for s in done["summary"]["sources"] for c in s["accuracy_checks"]]
    assert checks and all(c["agrees"] for c in checks), checks


@pytest.mark.parametrize("outcome", [o.value for o in Outcome])
def test_every_verdict_maps_to_a_harbor_exception_that_imports_back_as_itself(outcome: str) -> None:
    reasons: list[str | None] = {
        "infra_error": [r.value for r in InfraReason],
        "harness_error": [r.value for r in HarnessReason],
    }.get(outcome, [None])
    for reason in reasons:
        for reward in (None, 0.0, 1.0):
            if outcome == "passed" and reward != 1.0:
                continue  # a pass always has its reward
            back = harbor_verdict(exception_type(outcome, reason, reward, 1.0), reward, 1.0, {})
            assert (back.outcome, back.reason) == (outcome, reason), (outcome, reason, reward, back)


def test_task_ids_and_artifact_names_cannot_leave_the_job_folder(tmp_path: Path, cli: Headroom) -> None:
    (tmp_path / "db").mkdir()
    store, run_id = make_run(tmp_path / "db" / "s.db", HOSTILE_TASKS)
    store.close()
    jobs = tmp_path / "jobs"
    export(cli, tmp_path / "db" / "s.db", run_id, jobs / "job")
    outside = sorted(p.name for p in tmp_path.iterdir())
    assert outside == ["db", "jobs"], outside  # nothing written beside the job folder (no ../../escaped)
    assert sorted(p.name for p in jobs.iterdir()) == ["job"]
    job = jobs / "job"
    for p in job.rglob("*"):
        rel = p.relative_to(job)
        assert ".." not in rel.parts and not p.is_symlink(), rel
        assert all(c.isprintable() and c not in "/\\`$" for part in rel.parts for c in part), rel
    loaded = harbor_load(job)
    manifests = [json.loads(p.read_text()) for p in job.glob("*/artifacts/headroom/manifest.json")]
    assert len(manifests) == 2 * len(VERDICTS)
    for manifest in manifests:  # every artifact accounted for: written inside, or listed with why not
        assert {m["name"] for m in manifest} >= {"logs/../../../escaped.txt", "logs/..", "agent/stdout"}
        for m in manifest:
            assert m["written_to"] is None or ".." not in Path(m["written_to"]).parts, m
    assert sorted({t["task_name"] for t in loaded["trials"].values()}) == sorted(
        HOSTILE_TASKS + ["task-6", "task-7", "task-8"]
    )
    for name, t in loaded["trials"].items():
        assert "/" not in name and t["trial_name"] == name
        # the hostile artifact names stay under the trial's agent/ folder, or are listed as not written
        assert not any(f.endswith("escaped.txt") and not f.startswith("agent/") for f in t["files"]), t["files"]


def test_a_non_empty_out_dir_is_refused_in_one_line(tmp_path: Path, cli: Headroom) -> None:
    store, run_id = make_run(tmp_path / "s.db")
    store.close()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    res = cli("runs", "export", f"{tmp_path / 's.db'}:{run_id}", "--format", "harbor", "--out", str(tmp_path / "full"))
    assert res.returncode == 2 and "not empty" in res.stderr and "Traceback" not in res.stderr
    assert os.listdir(tmp_path / "full") == ["mine.txt"]
