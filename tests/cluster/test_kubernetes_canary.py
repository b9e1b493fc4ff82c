"""The enforcement canary per node, and overcommit per node, on the kwok test plane.

kwok nodes run no containers, so they enforce no limit: a pod's end is what its
``headroom.test/outcome`` annotation says. The canary's pods here carry "succeed" with
the report a runner writes for a step that finished -- exactly how a node that ignores
limits ends a hog above its limit. The canary must therefore find every kwok node
``not_enforced``, and the report must refuse to call the run a resource sweep. The
API server, scheduler (the pin to each node is a required node affinity it enforces),
watches and the canary's judgement are real; the real-node counterpart, where the
kernel does kill the hog, is tests/cluster/test_realnode_canary.py.

The nodes of this module carry their own pool label (not ``type=kwok``), so the other
cluster tests never schedule onto them, and are deleted at the end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.backends.kubernetes import message
from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.engine import sweep
from orchestrator.engine.canary import NODE_LABEL, run_canary
from orchestrator.engine.overcommit import observed_by_config
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import Launch
from orchestrator.spec.resources import ResourceConfig
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task

from .plane import (
    FAKE_NODE_ANNOTATION,
    FAKE_NODE_TAINT,
    FAKE_NODE_TOLERATION,
    FAKE_NODE_VALUE,
    OUTCOME_AFTER_ANNOTATION,
    OUTCOME_ANNOTATION,
    OUTCOME_CONTAINER_ANNOTATION,
    OUTCOME_MESSAGE_ANNOTATION,
    REPO,
    Cluster,
    wait_for,
)
from .simulate import Sim, hook, report

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
POOL_LABEL = "headroom.test/pool"
IMAGE = "python:3.11-slim"  # never pulled: kwok runs no containers
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
PRESSURE_TOLERATION = {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}


def _node(
    name: str,
    pool: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "200Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE},
            "labels": {POOL_LABEL: pool, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "spec": {"taints": [FAKE_NODE_TAINT, *(taints or [])], "unschedulable": unschedulable},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _ready(cluster: Cluster, names: list[str]) -> None:
    """Ready, and without the node lifecycle controller's not-ready taint (removed a few seconds later on a
    fresh plane): until then the scheduler, and so the canary, rightly leaves the node out."""

    def ok(n: str) -> bool:
        node = cluster.core.read_node(n)
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []) and not any(
            t.key in NOT_READY_TAINTS for t in node.spec.taints or []
        )

    wait_for(lambda: all(ok(n) for n in names), 90, f"nodes Ready and untainted: {names}")


@pytest.fixture(scope="module")
def pool(cluster: Cluster) -> Iterator[tuple[str, list[str]]]:
    """Five kwok nodes: a, b, c usable (one setup), d cordoned, e tainted with a taint the runs do not tolerate."""
    pool = f"canary-{uuid.uuid4().hex[:6]}"
    names = [f"{pool}-{x}" for x in "abcde"]
    bodies = [
        _node(names[0], pool),
        _node(names[1], pool),
        _node(names[2], pool),
        _node(names[3], pool, unschedulable=True),
        _node(names[4], pool, taints=[{"key": "headroom.test/reserved", "value": "gpu", "effect": "NoSchedule"}]),
    ]
    try:
        for b in bodies:
            cluster.core.create_node(b)
        _ready(cluster, names)
        yield pool, names
    finally:
        for n in names:
            try:
                cluster.core.delete_node(n)
            except Exception:
                pass


def options(cluster: Cluster, namespace: str, pool: str, **kw: Any) -> KubernetesOptions:
    return KubernetesOptions(
        namespace=namespace,
        kubeconfig=str(cluster.kubeconfig),
        node_selector={POOL_LABEL: pool},
        tolerations=[dict(FAKE_NODE_TOLERATION)],
        **kw,
    )


def test_the_canary_runs_pinned_on_each_candidate_node_and_finds_kwok_nodes_not_enforcing(
    cluster: Cluster, namespace: str, pool: tuple[str, list[str]]
) -> None:
    label, (a, b, c, d, e) = pool

    # kwok's stand-in for a node that runs the hog and ignores its limits: every container "finishes", and a
    # spin gets a whole CPU under its 0.25-cpu quota, as its self-report in the runner's message says
    def ignores_limits(launch: Launch) -> Sim:
        spin = json.dumps({"spin_wall_s": 0.3, "spin_cpu_s": 0.29}) if ":cpu-" in launch.trial_id else None
        return Sim("succeed", report("1", agent_result=spin))

    backend = KubernetesBackend(
        options=options(cluster, namespace, label, canary_max_nodes=2, keep_pods=True), pod_hook=hook(ignores_limits)
    )
    try:
        got = run_canary(
            backend, [ResourceConfig.parse(x) for x in ("1x-strict", "unbounded")], image=IMAGE, deadline_s=90
        )
    finally:
        backend.close()
    got = got.model_dump(mode="json")  # the record as the store keeps it
    assert got.get("targets") == [a, b], got
    skipped = {s["target"]: s["reason"] for s in got["skipped_targets"]}
    assert skipped[c].startswith("over canary_max_nodes=2 (same kernel")
    assert skipped[d].startswith("cordoned") and "headroom.test/reserved=gpu:NoSchedule not tolerated" in skipped[e]
    assert got["status"] == "flagged" and got["by_target"] == {a: "not_enforced", b: "not_enforced"}
    arms = {(x["target"], x["config"]): x for x in got["arms"]}
    for node in (a, b):
        assert arms[(node, "1x-strict")]["above"]["verdict"] == "passed"  # the hog above the limit survived
        assert arms[(node, "unbounded")]["status"] == "skipped"
        assert any(
            p.startswith(f"1x-strict on {node}: a hog above the 64 MiB limit was not OOM-killed")
            for p in got["problems"]
        )
        # the spin's account reached the canary through the termination message of a pod that passed
        assert got["cpu"][node]["cpu_share"] == pytest.approx(0.29 / 0.3) and got["cpu"][node]["limited"] is False
        assert (
            f"1x-strict on {node}: CPU not limited: a spinning thread got 0.97 cpu under a 0.25-cpu quota "
            "(without a quota: 0.97)" in got["problems"]
        )
    # every canary pod ran on the node it was pinned to (by the scheduler, through the required affinity)
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=NODE_LABEL).items
    assert len(pods) == 8  # above, below, CPU probe and its reference, on each of the two nodes
    assert all(p.spec.node_name == p.metadata.labels[NODE_LABEL] for p in pods)


def test_a_cli_sweep_on_kwok_nodes_is_not_reported_as_a_resource_sweep(
    cluster: Cluster, namespace: str, pool: tuple[str, list[str]], tmp_path: Path
) -> None:
    label, (a, b, c, _d, _e) = pool
    fields = message.render(report("1"))
    exp = {
        "tasks_dir": str(REPO / "tasks"),
        "tasks": ["csv-report"],
        "configurations": ["1x-strict", "unbounded"],
        "attempts": 1,
        "concurrency": 4,
        "backend": "kubernetes",
        "kubernetes": {
            **options(cluster, namespace, label, canary_max_nodes=3).model_dump(mode="json"),
            "pod_annotations": {
                OUTCOME_ANNOTATION: "succeed",
                OUTCOME_CONTAINER_ANNOTATION: "task",
                OUTCOME_MESSAGE_ANNOTATION: fields,
                OUTCOME_AFTER_ANNOTATION: "1s",
            },
        },
    }
    spec = tmp_path / "exp.yaml"
    spec.write_text(yaml.safe_dump(exp))
    res = run_cli(
        "sweep",
        "--experiment",
        str(spec),
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "markdown",
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr
    print("\n".join(line for line in res.stdout.splitlines() if "canary" in line or "resource sweep" in line))
    assert "limits do NOT bite" in res.stderr and f"per node: {a} not_enforced" in res.stderr
    assert "**Not a resource sweep: the limits did not bite.**" in res.stdout
    assert f"Per node: {a} not enforced, {b} not enforced, {c} not enforced." in res.stdout
    assert "cordoned (unschedulable)" in res.stdout  # the nodes left out are named with their reason
    canary = Store(tmp_path / "h.db").provenance(Store(tmp_path / "h.db").run().run_id).canary
    assert canary is not None and canary.by_target == {a: "not_enforced", b: "not_enforced", c: "not_enforced"}


def test_each_try_records_its_node_s_limits_at_scheduling_against_allocatable_and_memory_pressure(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    name = f"oc-{uuid.uuid4().hex[:6]}"
    cluster.core.create_node(_node(name, name, cpu="8", memory="3Gi"))
    try:
        _ready(cluster, [name])
        # MemoryPressure as the kubelet would report it (kwok's heartbeat leaves it for 10 minutes)
        status = cluster.core.read_node_status(name).status
        conditions = [
            c for c in cluster.api_client.sanitize_for_serialization(status.conditions) if c["type"] != "MemoryPressure"
        ]
        conditions.append(
            {
                "type": "MemoryPressure",
                "status": "True",
                "reason": "KubeletHasInsufficientMemory",
                "message": "test",
                "lastHeartbeatTime": conditions[0]["lastHeartbeatTime"],
                "lastTransitionTime": conditions[0]["lastTransitionTime"],
            }
        )
        cluster.core.patch_node_status(name, {"status": {"conditions": conditions}})
        # another team's workload on the node: a 256 MiB limit and a container without one
        other_ns = cluster.create_namespace(prefix="team")
        cluster.core.create_namespaced_pod(
            other_ns,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web"},
                "spec": {
                    "nodeName": name,
                    "containers": [
                        {"name": "app", "image": IMAGE, "resources": {"limits": {"memory": "256Mi"}}},
                        {"name": "sidecar", "image": IMAGE},
                    ],
                },
            },
        )
        tasks = tmp_path / "tasks"
        write_task(tasks, "t", solve="true\n", memory_mb=512)
        toml = tasks / "t" / "task.toml"
        toml.write_text(toml.read_text().replace("memory_mb = 512", f'memory_mb = 512\ndocker_image = "{IMAGE}"'))
        opts = KubernetesOptions(
            namespace=namespace,
            kubeconfig=str(cluster.kubeconfig),
            node_selector={POOL_LABEL: name},
            tolerations=[dict(FAKE_NODE_TOLERATION), PRESSURE_TOLERATION],
        )
        # the four pods overlap on the node: each "runs" 4 s
        backend = KubernetesBackend(options=opts, pod_hook=hook(lambda launch: Sim("succeed", report("1"), after="4s")))
        try:
            exp = Experiment(
                tasks_dir=str(tasks),
                configurations=["1x/4x"],
                attempts=4,
                backend="kubernetes",
                concurrency=4,
                kubernetes=opts,
            )
            task_list = sweep.prepare(exp)
            store = Store(tmp_path / "h.db")
            run_id, task_map = sweep.start(exp, task_list, store, backend)
            sweep.run(store, run_id, exp, task_map, backend)
        finally:
            backend.close()
        records = [
            json.loads(r[0])["extra"]["overcommit"]
            for r in store.db.execute("SELECT json FROM evidence WHERE run_id=?", (run_id,))
        ]
        assert len(records) == 4
        per_pod = (2048 + 16) * 2**20  # the task container's 4x limit and the warden's 16 MiB
        other = 256 * 2**20
        for rec in records:
            assert rec["scope"] == "node" and rec["node"] == name and rec["capacity_bytes"] == 3 * 2**30
            assert rec["node_memory_pressure"] is True and rec["unbounded_in_flight"] is False
            assert rec["limits_counted"].startswith("every pod on the node"), rec
            assert (rec["other_pods"], rec["other_limit_bytes"], rec["other_pods_without_limit"]) == (1, other, 1), rec
            assert rec["concurrent_limit_bytes_max"] == rec["concurrent_tries_max"] * per_pod + other
            assert rec["ratio_max"] == pytest.approx(rec["concurrent_limit_bytes_max"] / (3 * 2**30))
        # bound one after another while the earlier ones still ran: 1, 2, 3, 4 pods of limits on the node
        assert sorted(r["concurrent_tries_max"] for r in records) == [1, 2, 3, 4]
        observed = observed_by_config(store.trial_frame(run_id))["1x/4x"]
        assert observed["trials_recorded"] == 4 and observed["trials_under_memory_pressure"] == 4
        assert observed["ratio_max"] == pytest.approx((4 * per_pod + other) / (3 * 2**30))
        res = run_cli("report", "--store", str(tmp_path / "h.db"), "--format", "markdown", cwd=REPO, timeout=120)
        assert res.returncode == 0, res.stderr
        print("\n".join(line for line in res.stdout.splitlines() if "Overcommit" in line))
        assert (
            "of its node's allocatable memory in the limits of every pod on it, 4 under node memory pressure"
            in res.stdout
        )
    finally:
        cluster.core.delete_node(name)


def test_a_user_who_may_not_read_nodes_gets_a_canary_not_run_and_one_refused_list(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    # the namespace's default ServiceAccount, admin of its namespace only (the built-in ClusterRole "admin")
    from kubernetes import client

    from .controller_support import service_account_kubeconfig

    client.RbacAuthorizationV1Api(cluster.api_client).create_namespaced_role_binding(
        namespace,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "default-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        },
    )
    kubeconfig = service_account_kubeconfig(cluster, namespace, "default", tmp_path / "sa.kubeconfig")
    backend = KubernetesBackend(options=KubernetesOptions(namespace=namespace, kubeconfig=str(kubeconfig)))
    try:
        got = run_canary(backend, [ResourceConfig.parse("1x-strict")], image=IMAGE).model_dump(mode="json")
        assert got["status"] == "not run" and got["reason"].startswith("no node to check: *: nodes not readable (403")
        assert backend.nodes.forbidden is not None and backend.nodes.forbidden.startswith("403")
        assert backend.request_report()["by_kind"].get("list nodes") == 1  # refused once, not retried in a loop
        # nor may it list other namespaces' pods: overcommit records then count the run's own pods, and say so
        assert backend.facts().kubernetes.other_workloads.startswith("not readable (403")
    finally:
        backend.close()
