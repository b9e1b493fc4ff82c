"""Which nodes the canary checks, and what a pod ran beside on its node (pure parts of nodes.py).

The node and pod objects are written here in the API's JSON shape; the same code runs
against the real API server in tests/cluster/test_kubernetes_canary.py.
"""

from __future__ import annotations

from typing import Any

from orchestrator.backends.kubernetes.nodes import Nodes, choose, memory_limit, pin, tolerates
from orchestrator.spec.kubernetes import KubernetesOptions

FAKE = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}


def node(
    name: str,
    *,
    ready: bool = True,
    cordoned: bool = False,
    taints: list[dict[str, str]] | None = None,
    kernel: str = "6.1",
    memory: str = "4Gi",
    pressure: str = "False",
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {"unschedulable": cordoned, "taints": taints or []},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"},
                {"type": "MemoryPressure", "status": pressure},
            ],
            "allocatable": {"memory": memory},
            "nodeInfo": {
                "kernelVersion": kernel,
                "containerRuntimeVersion": "containerd://2",
                "kubeletVersion": "v1.34.4",
            },
        },
    }


def test_toleration_matching_follows_kubernetes() -> None:
    assert tolerates([{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}], FAKE)
    assert tolerates([{"key": "kwok.x-k8s.io/node", "value": "fake"}], FAKE)  # Equal, any effect
    assert not tolerates([{"key": "kwok.x-k8s.io/node", "value": "real"}], FAKE)
    assert not tolerates([{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoExecute"}], FAKE)
    assert tolerates([{"operator": "Exists"}], FAKE)  # empty key + Exists tolerates everything
    assert not tolerates([], FAKE)


def test_the_canary_checks_one_node_of_each_setup_first_and_says_why_others_were_left_out() -> None:
    nodes = [
        node("a"),
        node("b"),
        node("c", kernel="5.15"),
        node("d", cordoned=True),
        node("e", ready=False),
        node("f", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
        node("g", taints=[{"key": "soft", "effect": "PreferNoSchedule"}]),
    ]
    chosen, skipped = choose(nodes, [], cap=2)
    assert chosen == ["a", "c"]  # c's kernel differs from a's: it goes before b
    reasons = {s["target"]: s["reason"] for s in skipped}
    assert reasons["d"].startswith("cordoned") and reasons["e"] == "not Ready"
    assert reasons["f"] == "taint gpu=yes:NoSchedule not tolerated"
    assert reasons["b"].startswith("over canary_max_nodes=2 (same kernel")
    assert reasons["g"].startswith("over canary_max_nodes=2")  # a PreferNoSchedule taint does not keep pods off
    assert choose(nodes, [{"operator": "Exists"}], cap=10)[0] == ["a", "c", "b", "f", "g"]


def test_a_pinned_pod_requires_its_node_by_name() -> None:
    body = pin({"spec": {}}, "node-1")
    term = body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    ]


def pod(name: str, node_name: str | None, limit: str | None, phase: str = "Running") -> dict[str, Any]:
    task: dict[str, Any] = {"name": "task", "resources": {"limits": {"memory": limit}} if limit else {}}
    warden = {"name": "warden", "resources": {"limits": {"memory": "16Mi"}}}
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node_name, "containers": [task, warden]},
        "status": {"phase": phase},
    }


def test_the_overcommit_of_a_pod_is_the_run_s_limits_on_its_node_when_it_was_bound() -> None:
    assert memory_limit(pod("x", "n", "1Gi")) == 2**30 + 16 * 2**20
    assert memory_limit(pod("x", "n", None)) is None
    nodes = Nodes(core=None, options=KubernetesOptions())
    nodes._listed([node("n", memory="2Gi", pressure="True")])  # what the node watch delivers
    cache: dict[str, dict[str, Any]] = {
        "p1": pod("p1", "n", "1Gi"),
        "p2": pod("p2", "n", None),
        "p3": pod("p3", "n", "1Gi", phase="Succeeded"),
        "p4": pod("p4", "other", "1Gi"),
        "p5": pod("p5", None, "1Gi"),
    }
    for name, p in cache.items():
        nodes.pod_seen(name, p, cache)
    rec = nodes.overcommit("p1")
    assert rec is not None
    assert rec.scope == "node" and rec.node == "n" and rec.capacity_bytes == 2 * 2**30
    # p1 itself and p2 (no memory limit: it adds nothing to the sum and is flagged as unbounded);
    # p3 has ended, p4 is on another node, p5 is not bound yet
    assert rec.concurrent_limit_bytes_max == 2**30 + 16 * 2**20 and rec.concurrent_tries_max == 2
    assert rec.unbounded_in_flight is True and rec.node_memory_pressure is True
    assert rec.node_read_at == "scheduling"
    assert nodes.overcommit("p1") is None  # read once
    assert nodes.overcommit("p5") is None  # never bound
    # a later change of the pod does not move its record: it is taken at the first binding
    cache["p6"] = pod("p6", "n", "512Mi")
    nodes.pod_seen("p6", cache["p6"], cache)
    nodes.pod_seen("p6", {**cache["p6"], "status": {"phase": "Succeeded"}}, cache)
    p6 = nodes.overcommit("p6")
    assert p6 is not None and p6.concurrent_tries_max == 3  # p6, p2 and p1 (still in the cache)
    assert p6.concurrent_limit_bytes_max == (512 + 16) * 2**20 + 2**30 + 16 * 2**20


def test_a_pod_seen_only_after_it_ended_leaves_no_record() -> None:
    nodes = Nodes(core=None, options=KubernetesOptions())
    done = pod("p", "n", "1Gi", phase="Succeeded")
    nodes.pod_seen("p", done, {"p": done})  # a harvested pod's finalizer release, or a relist after the harvest
    assert nodes.overcommit("p") is None and not nodes._placements


def foreign(
    name: str,
    node_name: str | None,
    limits: list[str | None],
    *,
    namespace: str = "team-b",
    phase: str = "Running",
    init: str | None = None,
    run: str | None = None,
) -> dict[str, Any]:
    """A pod of another workload, as the cluster-wide watch delivers it."""
    containers = [
        {"name": f"c{i}", "resources": {"limits": {"memory": lim}} if lim else {}} for i, lim in enumerate(limits)
    ]
    spec: dict[str, Any] = {"nodeName": node_name, "containers": containers}
    if init:
        spec["initContainers"] = [{"name": "init", "resources": {"limits": {"memory": init}}}]
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {"headroom.dev/run": run} if run else {}},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_the_limits_of_other_workloads_on_the_node_are_counted_as_kubectl_counts_them() -> None:
    from orchestrator.backends.kubernetes.node_pods import held

    # containers summed, a container without a limit adds nothing but is flagged; a larger init container wins
    a = held(foreign("a", "n", ["1Gi", None]))
    assert a is not None and a.limit_bytes == 2**30 and a.without_limit is True
    b = held(foreign("b", "n", ["100Mi"], init="300Mi"))
    assert b is not None and b.limit_bytes == 300 * 2**20 and b.without_limit is False
    assert held(foreign("c", None, ["1Gi"])) is None  # not bound
    assert held(foreign("d", "n", ["1Gi"], phase="Succeeded")) is None  # ended

    nodes = Nodes(core=None, options=KubernetesOptions())
    nodes._listed([node("n", memory="4Gi")])
    nodes.pods._listed(
        [
            foreign("a", "n", ["1Gi", None]),
            foreign("b", "n", ["100Mi"], init="300Mi"),
            foreign("e", "other", ["2Gi"]),  # another node
            foreign("r", "n", ["512Mi"], namespace="ns", run="run-1"),  # the run's own: from its informer
            foreign("s", "n", ["256Mi"], namespace="ns", run="run-2"),
        ]
    )  # another headroom run: counted
    mine = pod("r", "n", "512Mi")
    mine["metadata"]["labels"] = {"headroom.dev/run": "run-1"}
    nodes.pod_seen("r", mine, {"r": mine})
    rec = nodes.overcommit("r")
    assert rec is not None and rec.limits_counted.startswith("every pod on the node")
    own = (512 + 16) * 2**20
    assert rec.other_pods == 3 and rec.other_pods_without_limit == 1
    assert rec.other_limit_bytes == 2**30 + 300 * 2**20 + 256 * 2**20
    assert rec.concurrent_limit_bytes_max == own + rec.other_limit_bytes
    assert rec.ratio_max == rec.concurrent_limit_bytes_max / (4 * 2**30)
    assert rec.concurrent_tries_max == 1 and rec.others_read_at == "scheduling"
    assert "_run" not in rec and "_run_limit_bytes" not in rec


def test_without_the_pod_list_the_record_counts_the_run_s_pods_and_says_why() -> None:
    nodes = Nodes(core=None, options=KubernetesOptions())
    nodes._listed([node("n", memory="4Gi")])
    nodes.pods.forbidden = "403 Forbidden"  # a namespace-scoped user
    p = pod("p", "n", "1Gi")
    nodes.pod_seen("p", p, {"p": p})
    rec = nodes.overcommit("p")
    assert rec is not None and rec.concurrent_limit_bytes_max == 2**30 + 16 * 2**20 and rec.other_pods is None
    assert rec.limits_counted == "this run's pods only: other workloads not readable (pods cluster-wide: 403 Forbidden)"

    # a watch that had not listed at binding time is read at the harvest instead
    late = Nodes(core=None, options=KubernetesOptions())
    late._listed([node("n", memory="4Gi")])
    late.pod_seen("p", p, {"p": p})
    late.pods._listed([foreign("x", "n", ["1Gi"])])
    rec = late.overcommit("p")
    assert rec is not None and rec.others_read_at == "harvest" and rec.other_limit_bytes == 2**30
    assert rec.concurrent_limit_bytes_max == 2 * 2**30 + 16 * 2**20
