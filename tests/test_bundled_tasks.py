"""The bundled synthetic demo task set (tasks/): it loads, it is documented, and it behaves as advertised.

The trial-running tests pin (experiment seed, attempt) pairs whose HEADROOM_SEED
is known to hit a given branch of a task (a spike, the heavy strategy, a seeded
agent mistake), so each outcome is deterministic given real kernel enforcement.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from orchestrator.engine.classify import classify
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan, trial_seed
from orchestrator.spec.experiment import Experiment
from orchestrator.tasks.loader import load_tasks
from orchestrator.trust.provenance import FIELDS as REGISTRY_FIELDS
from tests.taskfactory import requires_cgroups

TASKS = Path(__file__).resolve().parent.parent / "tasks"


def _module(task: str, name: str):
    spec = importlib.util.spec_from_file_location(
        f"bundled_{task.replace('-', '_')}_{name}", TASKS / task / "environment" / f"{name}.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # keep tasks/ free of __pycache__
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.dont_write_bytecode = before
    return mod


def test_every_bundled_task_loads_with_provenance_filled() -> None:
    tasks = load_tasks(TASKS)
    assert len(tasks) >= 8
    for t in tasks:
        for field in REGISTRY_FIELDS:
            assert getattr(t.spec.provenance, field), f"{t.id}: provenance.{field} is empty"
        assert t.spec.provenance.item_id == f"headroom-demo/{t.id}"
        assert t.spec.metadata.get("category"), t.id
        assert (Path(t.path) / "solution" / "solve.sh").is_file(), t.id
        assert 32 <= t.spec.environment.memory_mb <= 256, t.id
    categories = {t.spec.metadata["category"] for t in tasks}
    assert {"memory-spike", "headroom-dependent", "cpu-bound", "plain"} <= categories
    # templated variants share a cluster
    clusters = [t.cluster_id for t in tasks]
    assert clusters.count("bundle-digest") == 2


def test_every_task_is_listed_in_the_readme() -> None:
    readme = (TASKS / "README.md").read_text()
    assert "SYNTHETIC" in readme
    for t in load_tasks(TASKS):
        assert f"`{t.id}`" in readme, t.id


def test_spike_rates_are_what_the_readme_promises() -> None:
    """~25% of seeds spike above spec, ~3% above 3x; the heavy strategy is chosen on ~half the seeds."""
    n = 4000
    bundle = _module("bundle-digest", "bundle")
    factors = [bundle.spike_factor(trial_seed(0, "bundle-digest", a)) for a in range(n)]
    assert 0.21 < sum(f is not None for f in factors) / n < 0.29
    assert 0.015 < sum(f is not None and f > 3 for f in factors) / n < 0.045
    heavy = sum(
        random.Random(f"dedup-index:{trial_seed(0, 'dedup-index', a)}:strategy").random() < 0.5 for a in range(n)
    )
    assert 0.45 < heavy / n < 0.55


def _run(task_id: str, config: str, experiment_seed: int, attempt: int):
    from orchestrator.backends.local.backend import LocalBackend

    tasks = {t.id: t for t in load_tasks(TASKS, [task_id])}
    e = Experiment(tasks_dir=str(TASKS), configurations=[config], attempts=attempt + 1, seed=experiment_seed)
    trial = next(t for t in plan(e, list(tasks.values())) if t.attempt == attempt)
    backend = LocalBackend("cgroup")
    try:
        facts = backend.run(build_launch("test", trial, 0, tasks[task_id], e))
    finally:
        backend.close()
    return classify(facts, e.reward_threshold), facts


@pytest.mark.cgroup
@requires_cgroups
def test_plain_task_passes_unbounded() -> None:
    verdict, facts = _run("csv-report", "unbounded", 0, 0)
    assert str(verdict) == "passed", facts


@pytest.mark.cgroup
@requires_cgroups
def test_seeded_agent_mistake_fails_whatever_the_resources() -> None:
    # experiment seed 0: unit-convert attempt 2 draws the Fahrenheit slip, attempt 0 does not
    verdict, facts = _run("unit-convert", "unbounded", 0, 2)
    assert str(verdict) == "failed", facts
    verdict, facts = _run("unit-convert", "1x-strict", 0, 0)
    assert str(verdict) == "passed", facts
    assert facts.agent_result.get("tokens_in", 0) > 0


@pytest.mark.cgroup
@requires_cgroups
def test_memory_spike_is_oom_killed_at_1x_strict_and_passes_unbounded() -> None:
    # experiment seed 0: bundle-digest attempt 11 spikes to ~1.57x the 64 MiB spec
    seed = trial_seed(0, "bundle-digest", 11)
    assert 1.4 < _module("bundle-digest", "bundle").spike_factor(seed) < 1.7
    verdict, facts = _run("bundle-digest", "1x-strict", 0, 11)
    assert str(verdict) == "infra_error(oom_killed)", facts
    verdict, facts = _run("bundle-digest", "unbounded", 0, 11)
    assert str(verdict) == "passed", facts
    assert facts.peak_memory_bytes > 64 * 2**20


@pytest.mark.cgroup
@requires_cgroups
def test_heavy_strategy_needs_headroom() -> None:
    # experiment seed 0: dedup-index attempt 0 takes the heavy strategy over 8 pages (~2.4x the 32 MiB spec)
    seed = trial_seed(0, "dedup-index", 0)
    assert random.Random(f"dedup-index:{seed}:strategy").random() < 0.5
    assert _module("dedup-index", "dataset").n_chunks(seed) == 8
    verdict, facts = _run("dedup-index", "1x-strict", 0, 0)
    assert str(verdict) == "infra_error(oom_killed)", facts
    verdict, facts = _run("dedup-index", "unbounded", 0, 0)
    assert str(verdict) == "passed", facts


@pytest.mark.cgroup
@requires_cgroups
def test_cpu_task_reports_cpu_time() -> None:
    verdict, facts = _run("prime-count", "1x-strict", 0, 0)
    assert str(verdict) == "passed", facts
    assert facts.cpu_time_s is not None and facts.cpu_time_s > 0.1
