"""`headroom calibrate` on a real SQLite store: bands.json, summary, patches, patched task copies, refusals."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.commands.runs.calibrate import calibrate, calibration_document, write_outputs
from orchestrator.engine.plan import plan
from orchestrator.engine.sweep import prepare
from orchestrator.errors import UserError
from orchestrator.spec.evidence import CpuThrottling
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.spec.provenance import Provenance
from orchestrator.spec.trial import Verdict
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import load_task
from tests.taskfactory import write_task

MIB = 2**20


def recorded_run(
    root: Path, store: Store, canary: dict, cpu: bool = False, huge: bool = False, oracle: dict | None = None
) -> str:
    """A run written through the store's own API: 'heavy' is OOM-killed on every other attempt below 3x, 'plain'
    never (every finished trial passes).

    With ``cpu`` the trials carry what the local and Docker backends record: CPU time, the steps' wall
    time and cgroup v2 throttling counters; 'heavy' keeps about 0.8 cpu busy, 'plain' about 0.2.
    Without it they carry no CPU time, as on the Kubernetes backend.
    """
    write_task(root, "heavy", solve="true\n", memory_mb=32)
    write_task(root, "plain", solve="true\n", memory_mb=32)
    if huge:  # OOM-killed on every trial at every bounded limit
        write_task(root, "huge", solve="true\n", memory_mb=32)
    exp = Experiment(tasks_dir=str(root), configurations=["1", "3", "unbounded"], attempts=12)
    tasks = prepare(exp)
    trials = plan(exp, tasks)
    run_id = store.create_run(
        name="t",
        backend="local",
        enforcement="cgroup-v2",
        spec=exp.model_dump(mode="json"),
        provenance=Provenance.model_validate(
            {"canary": canary, **({"oracle_check": oracle} if oracle is not None else {})}
        ),
        tasks=tasks,
        trials=trials,
    )
    for t in trials:
        lim = t.config.limit_multiplier
        oom = (t.task_id == "heavy" and lim is not None and lim < 3 and t.attempt % 2 == 0) or (
            t.task_id == "huge" and lim is not None
        )
        peak = (70 if t.task_id == "heavy" else 10) * MIB + t.attempt * MIB
        facts = TrialFacts(
            enforcement="cgroup-v2",
            request_cpus=1,
            request_memory_bytes=32 * MIB,
            limit_cpus=lim,
            limit_memory_bytes=None if lim is None else int(32 * MIB * lim),
            qos_class="Burstable",
            agent=StepFacts(name="agent", exit_code=0),
            peak_memory_bytes=32 * MIB if oom else peak,
        )
        if cpu:
            # 8 s of agent and 2 s of verifier; CPU time 7.0..8.1 s (heavy) or 1.5..2.6 s (plain) over those 10 s.
            facts.agent.duration_s = 8.0
            facts.verifier = StepFacts(name="verifier", exit_code=0, duration_s=2.0)
            facts.duration_s = 30.0  # with set-up outside the cgroup: not the span the CPU time is read against
            facts.cpu_time_s = (7.0 if t.task_id == "heavy" else 1.5) + t.attempt * 0.1
            facts.extra.cpu_throttling = CpuThrottling(
                nr_periods=100, nr_throttled=0 if lim is None else 20, throttled_usec=0 if lim is None else 400_000
            )
        verdict = Verdict(Outcome.INFRA_ERROR, InfraReason.OOM_KILLED) if oom else Verdict(Outcome.PASSED)
        store.start_try(run_id, t.trial_id, 0)
        assert store.finish_try(run_id, t.trial_id, 0, facts, verdict, final=True)
    return run_id


def test_calibrate_writes_bands_patches_and_banded_tasks(tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    run_id = recorded_run(tmp_path / "tasks", store, {"status": "enforced"})
    doc = calibration_document(store, run_id, margin=0.4)  # 12 attempts settle ±40 points, not the default ±4
    bands = {b["task_id"]: b for b in doc["bands"]}
    assert bands["heavy"]["ceiling_label"] == "1x/3x" and bands["plain"]["ceiling_label"] == "1x-strict"
    assert bands["heavy"]["floor_memory_mb"] == 81  # p95 of 70..81 MiB, rounded up
    assert doc["canary_status"] == "enforced"
    # No CPU time in this run (as on the Kubernetes backend): the CPU floor stays the spec's, and says so.
    assert bands["heavy"]["floor_cpus"] == 1 and bands["heavy"]["cpu"]["not_measured"] == 12
    assert bands["heavy"]["cpu_floor_source"] == "spec x request multiplier (no CPU time measured)"
    write_outputs(doc, tmp_path / "out", tmp_path / "banded")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| heavy | published | 81 MiB, 1 cpu | 96 MiB, 3 cpu (1x/3x) |" in summary
    assert "not calibrated: no CPU time measured; floor = spec x request multiplier" in summary
    assert "CPU floor measured for 0 of 2 published tasks" in summary
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


def test_calibrate_measures_the_cpu_floor_from_the_recorded_cpu_time(tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    run_id = recorded_run(tmp_path / "tasks", store, {"status": "enforced"}, cpu=True)
    doc = calibration_document(store, run_id, margin=0.4)
    bands = {b["task_id"]: b for b in doc["bands"]}
    heavy, plain = bands["heavy"], bands["plain"]
    # Per trial: CPU time over the agent's and verifier's 10 s (not the 30 s trial): heavy 0.70..0.81 cpu.
    assert heavy["cpu"]["n"] == 12 and heavy["cpu"]["median_cpus"] == pytest.approx(0.755)
    assert heavy["cpu"]["max_cpus"] == pytest.approx(0.81) and heavy["cpu"]["enforcement"] == {"cgroup-v2": 12}
    assert heavy["cpu_floor_source"].startswith("measured: p95 of per-trial CPU use at unbounded (n=12)")
    assert heavy["floor_cpus"] == 0.85  # p95 0.8045 rounded up to the 0.05 step, under the 3-cpu ceiling
    assert plain["floor_cpus"] == 0.3 and plain["ceiling_cpus"] == 1  # p95 0.2545; plain's ceiling is 1x
    strict = next(lt for lt in plain["limits"] if lt["label"] == "1x-strict")["cpu"]
    assert (strict["throttled_trials"], strict["n_throttling"], strict["median_throttled_share"]) == (12, 12, 0.2)
    assert strict["median_throttled_s"] == 0.4
    write_outputs(doc, tmp_path / "out", tmp_path / "banded")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| heavy | published | 81 MiB, 0.85 cpu | 96 MiB, 3 cpu (1x/3x) |" in summary
    assert "0.76 / 0.80 / 0.81 / 0.81 cpu (12)" in summary
    assert "throttled in 12/12 trials, median 20% of periods" in summary
    assert "CPU floor measured for 2 of 2 published tasks" in summary
    env = load_task(tmp_path / "banded" / "heavy").spec.environment
    assert (env.cpus, env.cpus_limit) == (0.85, 3.0)
    assert "+cpus = 0.85" in (tmp_path / "out" / "patches" / "heavy.patch").read_text()


def test_calibrate_names_the_tasks_whose_spec_is_too_low(tmp_path: Path) -> None:
    """'huge' is OOM-killed at 1x and 3x on every trial and finishes unbounded: it needs more than the largest
    limit tested. Where the oracle check ran and the oracle of 'heavy' passed only from 3x, its spec is too low
    too, whatever its trials show; without that check 'heavy' is published at 3x."""
    store = Store(tmp_path / "h.db")
    oracle = {"tasks": {"heavy": {"passes_from": 3}, "plain": {"passes_from": 1}}}
    run_id = recorded_run(tmp_path / "tasks", store, {"status": "enforced"}, huge=True, oracle=oracle)
    bands = {b["task_id"]: b for b in calibration_document(store, run_id, margin=0.4)["bands"]}
    assert bands["huge"]["status"] == "refused"
    assert bands["huge"]["spec_too_low"].startswith("needs more than the largest limit tested: infra errors 12/12")
    assert bands["heavy"]["spec_too_low"] == "its oracle fails below 3x" and bands["heavy"]["status"] == "refused"
    assert bands["plain"]["status"] == "recommended" and bands["plain"]["spec_too_low"] is None
    res = CliRunner().invoke(
        calibrate, [f"{tmp_path / 'h.db'}:{run_id}", "--out-dir", str(tmp_path / "out"), "--margin", "0.4"]
    )
    assert res.exit_code == 0, res.output
    assert "huge                 spec too low: needs more than the largest limit tested" in res.output
    assert "heavy                spec too low: its oracle fails below 3x" in res.output
    assert "| huge | **spec too low** |" in (tmp_path / "out" / "summary.md").read_text()
    # No oracle check recorded: only the trials speak, and they let 'heavy' be published at 3x.
    plain_doc = calibration_document(store, run_id, margin=0.4, oracle={})
    assert {b["task_id"]: b["ceiling_label"] for b in plain_doc["bands"]}["heavy"] == "1x/3x"
