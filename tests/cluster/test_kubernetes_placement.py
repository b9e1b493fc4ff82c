"""Limit-aware placement in a cluster, on the kwok test plane: the real kube-scheduler places trial
pods by the extended resource ``headroom.dev/memory-limit-mib`` that ``headroom cluster nodes advertise``
puts on nodes.

kwok nodes run no containers (a pod's end is its ``headroom.test/outcome`` annotation), but the
API server, the scheduler's fit on the extended resource, the node status patches and the
backend's per-node overcommit records are all real. kwok keeps a node's status capacity and
allocatable as they are written (its node Stages template only the conditions, or copy the
existing values), so an advertised amount stays until it is removed.

The node of this module has its own pool label (not ``type=kwok``), so the other cluster tests
never schedule onto it, and it is deleted at the end.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.backends.kubernetes.limit_resource import RESOURCE
from orchestrator.engine import sweep
from orchestrator.engine.plan import plan
from orchestrator.errors import UserError
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task

from .controller_support import crds  # noqa: F401  (the fixture)
from .plane import FAKE_NODE_ANNOTATION, FAKE_NODE_TAINT, FAKE_NODE_TOLERATION, FAKE_NODE_VALUE, REPO, Cluster, wait_for
from .simulate import Sim, hook, report

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
POOL_LABEL = "headroom.test/pool"
IMAGE = "python:3.11-slim"  # never pulled: kwok runs no containers
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
NODE_MIB = 3072  # the node's allocatable memory
POD_MIB = 2048 + 16  # a 512 MiB task at 1x/4x, and the warden's 16 MiB: two of them do not fit the node


@pytest.fixture(scope="module")
def node(cluster: Cluster) -> Iterator[str]:
    """One kwok node with 3 GiB allocatable, in a pool of its own; deleted at the end."""
    name = f"place-{uuid.uuid4().hex[:6]}"
    capacity = {"cpu": "8", "memory": f"{NODE_MIB}Mi", "pods": "110", "ephemeral-storage": "200Gi"}
    cluster.core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE},
                "labels": {POOL_LABEL: name, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            },
            "spec": {"taints": [FAKE_NODE_TAINT]},
            "status": {"capacity": capacity, "allocatable": capacity},
        }
    )
    try:

        def ready() -> bool:
            n = cluster.core.read_node(name)
            return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) and not any(
                t.key in NOT_READY_TAINTS for t in n.spec.taints or []
            )

        wait_for(ready, 90, f"node {name} Ready and untainted")
        yield name
    finally:
        cluster.core.delete_node(name)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=REPO, timeout=240)


def _advertise(cluster: Cluster, *args: str) -> str:
    """`headroom cluster nodes advertise ARGS` in this process (a subprocess costs seconds of imports); its stdout."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    res = CliRunner().invoke(cli, ["cluster", "nodes", "advertise", *args, "--kubeconfig", str(cluster.kubeconfig)])
    assert res.exit_code == 0 and res.exception is None, (res.output, res.exception)
    return res.stdout


def _advertised(cluster: Cluster, name: str) -> tuple[str | None, str | None]:
    status = cluster.core.read_node_status(name).status
    return (status.capacity or {}).get(RESOURCE), (status.allocatable or {}).get(RESOURCE)


def _tasks(tmp_path: Path, memory_mb: int = 512) -> Path:
    tasks = tmp_path / "tasks"
    write_task(tasks, "t", solve="true\n", memory_mb=memory_mb)
    toml = tasks / "t" / "task.toml"
    toml.write_text(
        toml.read_text().replace(f"memory_mb = {memory_mb}", f'memory_mb = {memory_mb}\ndocker_image = "{IMAGE}"')
    )
    return tasks


def _options(cluster: Cluster, namespace: str, node: str) -> KubernetesOptions:
    return KubernetesOptions(
        namespace=namespace,
        kubeconfig=str(cluster.kubeconfig),
        node_selector={POOL_LABEL: node},
        tolerations=[dict(FAKE_NODE_TOLERATION)],
    )


def _sweep(
    cluster: Cluster, namespace: str, node: str, tmp_path: Path, placement: str, configurations: list[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Three attempts per configuration, all submitted at once, each pod "running" 4 s; the records and the
    run's overcommit provenance."""
    opts = _options(cluster, namespace, node)
    backend = KubernetesBackend(options=opts, pod_hook=hook(lambda launch: Sim("succeed", report("1"), after="4s")))
    exp = Experiment(
        tasks_dir=str(_tasks(tmp_path)),
        configurations=configurations,
        attempts=3,
        backend="kubernetes",
        concurrency=8,
        kubernetes=opts,
        placement=placement,
    )  # type: ignore[arg-type]
    store = Store(tmp_path / f"{placement}.db")
    try:
        run_id, task_map = sweep.start(exp, sweep.prepare(exp), store, backend)
        sweep.run(store, run_id, exp, task_map, backend)
    finally:
        backend.close()
    rows = store.db.execute(
        "SELECT x.outcome, e.json FROM executions x JOIN evidence e USING (run_id, trial_id, try) "
        "WHERE x.run_id=? AND x.final=1",
        (run_id,),
    ).fetchall()
    assert len(rows) == 3 * len(configurations)
    assert all(outcome == "passed" for outcome, _ in rows), rows  # every trial still finishes
    return [json.loads(ev)["extra"]["overcommit"] for _, ev in rows], store.provenance(run_id).to_stored()["overcommit"]


def test_nothing_advertised_refuses_a_limit_aware_sweep_in_one_line(
    cluster: Cluster, namespace: str, node: str, tmp_path: Path
) -> None:
    assert _advertised(cluster, node) == (None, None)
    exp = {
        "tasks_dir": str(_tasks(tmp_path)),
        "configurations": ["1x/4x"],
        "attempts": 1,
        "backend": "kubernetes",
        "placement": "limit-aware",
        "kubernetes": _options(cluster, namespace, node).model_dump(mode="json"),
    }
    spec = tmp_path / "exp.yaml"
    spec.write_text(yaml.safe_dump(exp))
    res = _cli("sweep", "--experiment", str(spec), "--store", str(tmp_path / "h.db"), "--format", "none", "--no-canary")
    assert res.returncode == 2, res.stdout + res.stderr
    errors = [line for line in res.stderr.splitlines() if "error" in line.lower()]
    assert "Traceback" not in res.stderr and len(errors) == 1, res.stderr  # one line (after the backend's banner)
    assert errors[0].startswith(
        f"error: resources: placement limit-aware: no node matching {POOL_LABEL}={node} advertises {RESOURCE}"
    )
    assert "headroom cluster nodes advertise" in errors[0]
    assert not cluster.core.list_namespaced_pod(namespace).items  # refused before any pod


def test_an_unbounded_try_with_nothing_advertised_ends_as_a_spawn_failure_naming_the_command(
    cluster: Cluster, namespace: str, node: str, tmp_path: Path
) -> None:
    """What a controller run (no pre-flight fit check) gets: no pod, and the reason in the try's facts."""
    from orchestrator.engine.launch import build_launch
    from orchestrator.spec.outcome import InfraReason

    exp = Experiment(
        tasks_dir=str(_tasks(tmp_path)),
        configurations=["unbounded"],
        attempts=1,
        backend="kubernetes",
        placement="limit-aware",
        kubernetes=_options(cluster, namespace, node),
    )
    tasks = sweep.prepare(exp)
    launch = build_launch("run-unadvertised", plan(exp, tasks)[0], 0, tasks[0], exp)
    backend = KubernetesBackend(options=exp.kubernetes)
    try:
        facts = backend.observe(backend.submit(launch))
    finally:
        backend.close()
    assert facts is not None and facts.infra_hint == InfraReason.SPAWN_FAILED
    assert f"no candidate node advertises {RESOURCE}" in (facts.infra_detail or "")
    assert "headroom cluster nodes advertise" in (facts.infra_detail or "")
    assert not cluster.core.list_namespaced_pod(namespace).items


def test_advertise_then_remove_round_trip(cluster: Cluster, node: str) -> None:
    pool = f"{POOL_LABEL}={node}"
    try:
        assert (
            _advertise(cluster, "--selector", pool).strip()
            == f"{node}: {RESOURCE}={NODE_MIB} (allocatable memory {NODE_MIB} MiB)"
        )
        assert _advertised(cluster, node) == (str(NODE_MIB), str(NODE_MIB))
        _advertise(cluster, "-l", pool)  # again: the same amount, no error
        assert _advertised(cluster, node) == (str(NODE_MIB), str(NODE_MIB))
        assert all(_advertised(cluster, n) == (None, None) for n in cluster.nodes)  # the session's nodes untouched
    finally:
        removed = _advertise(cluster, "--remove", "--selector", pool)
    assert removed.strip() == f"{node}: removed {RESOURCE}"
    assert _advertised(cluster, node) == (None, None)
    assert _advertise(cluster, "--remove", "--selector", pool).strip() == f"{node}: had no {RESOURCE}"
    res = _cli(
        "cluster",
        "nodes",
        "advertise",
        "--selector",
        f"{POOL_LABEL}=no-such-pool",
        "--kubeconfig",
        str(cluster.kubeconfig),
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == f"error: --selector: no node matches {POOL_LABEL}=no-such-pool", res.stderr


def test_limit_aware_keeps_every_node_s_limits_within_its_memory_where_default_placement_does_not(
    cluster: Cluster, namespace: str, node: str, tmp_path: Path
) -> None:
    # default placement: the scheduler places by request (512 MiB), so the 4x limits pile up on the node
    free, before = _sweep(cluster, namespace, node, tmp_path / "default", "default", ["1x/4x"])
    # warned before the run: three 512 MiB requests fit the 3 GiB node, and their 4x limits then do not
    assert before["worst_node"]["1x/4x"] == {
        "node": node,
        "capacity_bytes": NODE_MIB * 2**20,
        "trials": 3,
        "limit_bytes": 3 * 2048 * 2**20,
    }
    assert before["warnings"] == [
        f"1x/4x: 3 trials fit node {node} ({NODE_MIB} MiB allocatable) by their requests, "
        "and their limits then add up to 6144 MiB; use --placement limit-aware (after "
        "`headroom cluster nodes advertise`) or lower --concurrency"
    ]
    print(
        f"default: ratio_max per trial {sorted(round(r['ratio_max'], 3) for r in free)}, "
        f"tries together {sorted(r['concurrent_tries_max'] for r in free)}"
    )
    assert all(r["placement"] == "default" and r["node"] == node for r in free)
    assert max(r["ratio_max"] for r in free) > 1.0  # the limits on the node went beyond its memory
    assert max(r["concurrent_tries_max"] for r in free) >= 2
    _advertise(cluster, "--selector", f"{POOL_LABEL}={node}")
    try:
        # limit-aware: each pod holds its limit of the resource; an unbounded one holds all the node advertises
        held, before = _sweep(cluster, namespace, node, tmp_path / "limit-aware", "limit-aware", ["1x/4x", "unbounded"])
        assert not any(w.startswith("1x/4x") for w in before["warnings"])  # the scheduler now places by limit
        print(
            f"limit-aware: ratio_max per trial {sorted(round(r['ratio_max'], 3) for r in held)}, "
            f"tries together {sorted(r['concurrent_tries_max'] for r in held)}"
        )
        for r in held:
            assert r["placement"] == "limit-aware" and r["node"] == node and r["capacity_bytes"] == NODE_MIB * 2**20
            assert r["ratio_max"] <= 1.0, r
            assert r["concurrent_tries_max"] == 1 and r["unbounded_in_flight"] is False, r  # two never fit together
        bounded = [r for r in held if r["concurrent_limit_bytes_max"] > 0]
        assert len(bounded) == 3 and all(r["concurrent_limit_bytes_max"] == POD_MIB * 2**20 for r in bounded)

        # a limit larger than anything advertised is refused before the run
        big = Experiment(
            tasks_dir=str(_tasks(tmp_path / "big", memory_mb=1024)),
            configurations=["1x/4x"],
            attempts=1,
            backend="kubernetes",
            placement="limit-aware",
            kubernetes=_options(cluster, namespace, node),
        )
        backend = KubernetesBackend(options=big.kubernetes)
        try:
            tasks = sweep.prepare(big)
            with pytest.raises(
                UserError,
                match=f"pod memory limit of {4096 + 16} MiB but the largest {RESOURCE} "
                f"advertised \\({node}\\) is {NODE_MIB}",
            ):
                sweep.check_fit(backend, tasks, plan(big, tasks), "limit-aware")
        finally:
            backend.close()
    finally:
        _advertise(cluster, "--remove", "--selector", f"{POOL_LABEL}={node}")


def test_the_controller_places_an_experiment_by_limit_too(
    cluster: Cluster, crds: None, node: str, tmp_path: Path
) -> None:
    """The controller builds its launches from the same Experiment: its trial pods hold the resource.

    Real controller process as the chart's ServiceAccount (with nodeProvenance on, so it may read
    the nodes: an unbounded trial needs the largest advertised amount)."""
    from .controller_support import ControllerProcess, helm_install, service_account_kubeconfig
    from .test_controller_sweep import experiment, wait_complete

    ns = cluster.create_namespace(prefix="place", labels={"pod-security.kubernetes.io/enforce": "restricted"})
    r = helm_install(
        cluster, ns, "--set", "replicaCount=1", "--set", "nodeProvenance.enabled=true", "--skip-crds", wait=False
    )
    assert r.returncode == 0, r.stderr
    kc = service_account_kubeconfig(cluster, ns, "headroom", tmp_path / "sa.kubeconfig")
    spec = tmp_path / "placed.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "placed",
                "tasks_dir": str(_tasks(tmp_path)),
                "configurations": ["1x/4x", "unbounded"],
                "attempts": 3,
                "concurrency": 8,
                "agent": {"kind": "oracle"},
                "placement": "limit-aware",
                "kubernetes": {"node_selector": {POOL_LABEL: node}, "tolerations": [dict(FAKE_NODE_TOLERATION)]},
            }
        )
    )
    admin = str(cluster.kubeconfig)
    _advertise(cluster, "--selector", f"{POOL_LABEL}={node}")
    ctl = ControllerProcess(kc, ns, tmp_path / "controller.log", "--resync-seconds", "5", simulated=True)
    try:
        r = _cli("cluster", "submit", str(spec), "-n", ns, "--kubeconfig", admin)
        assert r.returncode == 0, r.stderr
        ctl.start()
        wait_complete(cluster, ns, "placed", ctl, 240)
        assert experiment(cluster, ns, "placed")["status"]["progress"] == "6/6"
        store = tmp_path / "placed.db"
        r = _cli("cluster", "export", "placed", "-n", ns, "--store", str(store), "--kubeconfig", admin)
        assert r.returncode == 0, r.stderr
        db = Store(store)
        rows = db.db.execute(
            "SELECT x.outcome, e.json FROM executions x JOIN evidence e USING (run_id, trial_id, try) WHERE x.final=1"
        ).fetchall()
        assert len(rows) == 6 and all(o == "passed" for o, _ in rows), rows
        records = [json.loads(ev)["extra"]["overcommit"] for _, ev in rows]
        print(f"controller, limit-aware: ratio_max per trial {sorted(round(r['ratio_max'], 3) for r in records)}")
        for rec in records:
            assert rec["placement"] == "limit-aware" and rec["node"] == node and rec["ratio_max"] <= 1.0, rec
            assert rec["concurrent_tries_max"] == 1, rec
        # the pre-run check of a CLI sweep, from the nodes the controller recorded: limit-aware, so no 1x/4x warning
        before = db.provenance(db.run().run_id).to_stored()["overcommit"]
        assert before["nodes_checked"] == 1 and before["worst_node"]["1x/4x"]["node"] == node, before
        assert not any(w.startswith("1x/4x") for w in before["warnings"]), before
    finally:
        ctl.stop()
        _advertise(cluster, "--remove", "--selector", f"{POOL_LABEL}={node}")
