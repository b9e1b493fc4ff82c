"""Overcommit: every trial records what it ran beside; limit-aware placement keeps limits within capacity."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine.execute import execute
from orchestrator.engine.overcommit import Placement, observed_by_config, warnings_for
from orchestrator.engine.sweep import prepare, start
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.launch import Launch, StepLaunch, TaskSource
from orchestrator.spec.resources import MIB, ResourceAmounts
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task


def _launch(limit_mib: int | None) -> Launch:
    step = StepLaunch(name="agent", shell="true", timeout_s=1)
    return Launch(
        run_id="r",
        trial_id="t",
        try_index=0,
        name=f"n{limit_mib}",
        task_id="t",
        config_label="c",
        attempt=0,
        seed=0,
        agent_kind="command",
        task=TaskSource(task_id="t", path=".", digest="d", include_solution=False),
        agent=step,
        verifier=step.model_copy(update={"name": "verifier"}),
        amounts=ResourceAmounts(
            request_cpus=1,
            request_memory_bytes=MIB,
            limit_cpus=None,
            limit_memory_bytes=None if limit_mib is None else limit_mib * MIB,
        ),
        request_storage_bytes=1,
        limit_storage_bytes=None,
        allow_internet=False,
        labels={},
        spec_digest="x",
    )


def test_limit_aware_admission_and_the_record_each_try_gets() -> None:
    p = Placement(100 * MIB, "limit-aware")
    assert p.admit(_launch(500))  # nothing running: a try larger than the machine runs alone, not never
    p.started("a", _launch(60))
    assert p.admit(_launch(40)) and not p.admit(_launch(41)) and not p.admit(_launch(None))
    p.started("b", _launch(40))
    rec = p.finished("a")
    assert rec is not None and rec.concurrent_limit_bytes_max == 100 * MIB and rec.ratio_max == 1.0
    assert rec.concurrent_tries_max == 2 and rec.unbounded_in_flight is False and rec.scope == "host"
    assert Placement(100 * MIB, "default").admit(_launch(10_000))
    q = Placement(None)
    q.started("u", _launch(None))
    q.started("v", _launch(10))
    u, v = q.finished("u"), q.finished("v")
    assert u and v and u.unbounded_in_flight is False and v.unbounded_in_flight is True  # beside, not itself


def test_warnings_name_the_configurations_whose_limits_can_exceed_the_machine(tasks_root: Path) -> None:
    write_task(tasks_root, "big", solve="true\n", memory_mb=4096)
    write_task(tasks_root, "small", solve="true\n", memory_mb=64)
    exp = Experiment(tasks_dir=str(tasks_root), configurations=["1", "3", "unbounded"], concurrency=2)
    got = warnings_for(exp, prepare(exp), capacity=10 * 1024 * MIB)
    assert got.worst_concurrent_limit_bytes["1x-strict"] == (4096 + 64) * MIB
    assert [w.split(":")[0] for w in got.warnings] == ["1x/3x", "unbounded"]
    limit_aware = warnings_for(exp.model_copy(update={"placement": "limit-aware"}), prepare(exp), 10 * 1024 * MIB)
    assert [w.split(":")[0] for w in limit_aware.warnings] == ["unbounded"]


def test_in_a_cluster_the_warning_is_per_node_what_fits_by_request_and_the_limits_it_then_holds(
    tasks_root: Path,
) -> None:
    write_task(tasks_root, "big", solve="true\n", memory_mb=1024)
    write_task(tasks_root, "small", solve="true\n", memory_mb=64)
    exp = Experiment(tasks_dir=str(tasks_root), configurations=["1", "1x/4x", "unbounded"], concurrency=8, attempts=3)
    nodes = {"small-node": 3072 * MIB, "large-node": 8192 * MIB}
    got = warnings_for(exp, prepare(exp), None, nodes)
    # three attempts of "big" fill the small node by request (3 x 1024 MiB) and hold 4x that in limits
    assert got.worst_node is not None and got.worst_node["1x/4x"].model_dump() == {
        "node": "small-node",
        "capacity_bytes": 3072 * MIB,
        "trials": 3,
        "limit_bytes": 3 * 4096 * MIB,
    }
    assert got.worst_node["1x-strict"].limit_bytes <= 3072 * MIB  # limits = requests: never beyond the node
    assert got.nodes_checked == 2
    assert [w.split(":")[0] for w in got.warnings] == ["1x/4x", "unbounded"]
    assert "3 trials fit node small-node (3072 MiB allocatable)" in got.warnings[0]
    assert "12288 MiB" in got.warnings[0]
    limit_aware = warnings_for(exp.model_copy(update={"placement": "limit-aware"}), prepare(exp), None, nodes)
    assert [w.split(":")[0] for w in limit_aware.warnings] == ["unbounded"]
    unread = warnings_for(exp, prepare(exp), None, "not readable (403 Forbidden)")
    assert unread.nodes_checked == "nodes not readable (403 Forbidden): not checked per node"
    assert [w.split(":")[0] for w in unread.warnings] == ["unbounded"]
    host = warnings_for(exp, prepare(exp), 10 * 1024 * MIB)
    assert host.worst_node is None and "worst_node" not in host.model_dump()  # a host has no nodes


def _sweep(root: Path, store_path: Path, placement: Placement) -> list[dict]:
    exp = Experiment(tasks_dir=str(root), configurations=["1"], attempts=3, concurrency=4, agent={"kind": "oracle"})
    backend = LocalBackend("auto")
    store = Store(store_path)
    try:
        run_id, tasks = start(exp, prepare(exp), store, backend)
        execute(store, run_id, exp, tasks, backend, placement=placement)
    finally:
        backend.close()
    rows = [json.loads(r[0])["extra"]["overcommit"] for r in store.db.execute("SELECT json FROM evidence")]
    store.close()
    return rows


def test_limit_aware_placement_caps_concurrent_limits_on_a_real_backend(tasks_root: Path, tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_task(tasks_root, name, solve='sleep 0.3; touch "$HEADROOM_WORKDIR/out"\n', memory_mb=64)
    capacity = 128 * MIB  # room for two 64 MiB limits, so four slots of concurrency must not all fill
    capped = _sweep(tasks_root, tmp_path / "capped.db", Placement(capacity, "limit-aware"))
    free = _sweep(tasks_root, tmp_path / "free.db", Placement(capacity, "default"))
    assert len(capped) == len(free) == 6
    assert max(r["concurrent_limit_bytes_max"] for r in capped) <= capacity
    assert all(r["ratio_max"] <= 1.0 and r["placement"] == "limit-aware" for r in capped)
    assert max(r["ratio_max"] for r in free) > 1.0  # the same sweep without the cap overcommits


def test_the_cli_records_limit_aware_placement_in_the_spec_and_on_every_trial(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "a", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store_path = tmp_path / "h.db"
    res = run_cli(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "2",
        "--placement",
        "limit-aware",
        "--no-canary",
        "--store",
        str(store_path),
        "--format",
        "none",
    )
    assert res.returncode == 0, res.stderr
    store = Store.open_existing(store_path)
    run = store.run()
    assert run.spec["placement"] == "limit-aware"
    assert store.provenance(run.run_id).overcommit.placement == "limit-aware"
    observed = observed_by_config(store.trial_frame(run.run_id))
    assert observed["1x-strict"]["trials_recorded"] == 2
    # An unbounded trial runs alone under limit-aware placement, so nothing ran beside one.
    assert observed["1x-strict"]["trials_beside_unbounded"] == observed["unbounded"]["trials_beside_unbounded"] == 0
