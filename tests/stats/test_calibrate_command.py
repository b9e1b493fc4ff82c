"""`headroom calibrate` on a real SQLite store: bands.json, summary, patches, patched task copies, refusals."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from orchestrator.commands.calibrate import calibration_document, write_outputs
from orchestrator.errors import UserError
from orchestrator.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.spec.trial import Verdict
from orchestrator.store.sqlite import Store
from orchestrator.sweep import prepare
from orchestrator.tasks.loader import load_task
from tests.taskfactory import write_task

MIB = 2**20


def recorded_run(root: Path, store: Store, canary: dict) -> str:
    """A run written through the store's own API: 'heavy' is OOM-killed below 3x, 'plain' never."""
    write_task(root, "heavy", solve="true\n", memory_mb=32)
    write_task(root, "plain", solve="true\n", memory_mb=32)
    exp = Experiment(tasks_dir=str(root), configurations=["1", "3", "unbounded"], attempts=12)
    tasks = prepare(exp)
    trials = plan(exp, tasks)
    run_id = store.create_run(name="t", backend="local", enforcement="cgroup-v2", spec=exp.model_dump(mode="json"),
                              provenance={"canary": canary}, tasks=tasks, trials=trials)
    for t in trials:
        lim = t.config.limit_multiplier
        oom = t.task_id == "heavy" and lim is not None and lim < 3
        peak = (70 if t.task_id == "heavy" else 10) * MIB + t.attempt * MIB
        facts = TrialFacts(enforcement="cgroup-v2", request_cpus=1, request_memory_bytes=32 * MIB, limit_cpus=lim,
                           limit_memory_bytes=None if lim is None else int(32 * MIB * lim), qos_class="Burstable",
                           agent=StepFacts(name="agent", exit_code=0), peak_memory_bytes=32 * MIB if oom else peak)
        verdict = Verdict(Outcome.INFRA_ERROR, InfraReason.OOM_KILLED) if oom else Verdict(Outcome.PASSED)
        store.start_try(run_id, t.trial_id, 0)
        assert store.finish_try(run_id, t.trial_id, 0, facts, verdict, final=True)
    return run_id


def test_calibrate_writes_bands_patches_and_banded_tasks(tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    run_id = recorded_run(tmp_path / "tasks", store, {"status": "enforced"})
    doc = calibration_document(store, run_id, margin=0.3)
    bands = {b["task_id"]: b for b in doc["bands"]}
    assert bands["heavy"]["ceiling_label"] == "1x/3x" and bands["plain"]["ceiling_label"] == "1x-strict"
    assert bands["heavy"]["floor_memory_mb"] == 81  # p95 of 70..81 MiB, rounded up
    assert doc["canary_status"] == "enforced"
    write_outputs(doc, tmp_path / "out", tmp_path / "banded")
    assert "| heavy | published | 81 MiB, 1 cpu | 96 MiB, 3 cpu (1x/3x) |" in (tmp_path / "out" / "summary.md").read_text()
    assert (tmp_path / "out" / "patches" / "plain.patch").is_file()
    env = tomllib.loads((tmp_path / "banded" / "heavy" / "task.toml").read_text())["environment"]
    assert (env["memory_mb"], env["memory_limit_mb"], env["cpus_limit"]) == (81, 96, 3.0)
    assert load_task(tmp_path / "banded" / "heavy").spec.environment.memory_limit_mb == 96
    with pytest.raises(UserError, match="choose an empty --tasks-out"):
        write_outputs(doc, tmp_path / "out", tmp_path / "banded")


def test_calibrate_refuses_a_run_whose_limits_did_not_bite(tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    run_id = recorded_run(tmp_path / "tasks", store, {"status": "flagged", "problems": ["1x-strict on local: ignored"]})
    with pytest.raises(UserError, match="not a resource sweep"):
        calibration_document(store, run_id)
