"""The real test node: real Pods, real cgroup limits, real kernel OOM kills.

Every pod here runs as real processes on the kubelet + containerd node of
``tests/cluster/realnode.py`` (local plane) or on a node labelled
``headroom.test/real-node=true`` of the cluster in ``HEADROOM_TEST_KUBECONFIG``.
Nothing is simulated: an OOMKilled status here comes from the kernel's memory cgroup
via containerd and the kubelet.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import RealNodeHandle
from .plane import FAKE_NODE_LABELS, Cluster, wait_for
from .realnode import (
    OOM_SCORE_ANNOTATION,
    REAL_NODE_LABEL,
    REAL_NODE_TAINT,
    SYSCTL_ANNOTATION,
    RealNode,
    delete_pods_on_node,
    find_node_assets,
)

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
# Reads the container's own memory cgroup: v1 memory.max_usage_in_bytes, v2 memory.peak.
PEAK_SH = "cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.peak"
MiB = 1024 * 1024


def finished(pod: Any) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def terminated(pod: Any) -> Any:
    (status,) = pod.status.container_statuses
    assert status.state.terminated is not None, status.state
    return status.state.terminated


def run_to_end(cluster: Cluster, ns: str, body: dict[str, Any], timeout: float = 120) -> Any:
    cluster.core.create_namespaced_pod(ns, body)
    return cluster.wait_pod(ns, body["metadata"]["name"], finished, timeout=timeout, what="Succeeded or Failed")


def test_node_registered_with_label_taint_and_provenance(cluster: Cluster, real_node: RealNodeHandle) -> None:
    node = cluster.core.read_node(real_node.name)
    assert node.metadata.labels[REAL_NODE_LABEL] == "true"
    assert "type" not in node.metadata.labels  # kwok pods select type=kwok
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints or []]
    assert REAL_NODE_TAINT in taints
    info = node.status.node_info
    assert info.container_runtime_version.startswith("containerd://")
    assert info.kubelet_version.startswith("v1.")
    if real_node.node is not None:  # what this node changes is on record for provenance
        assert node.metadata.annotations[OOM_SCORE_ANNOTATION] == "negative-clamped-to-0"
        assert SYSCTL_ANNOTATION in node.metadata.annotations
        for fake in cluster.core.list_node(label_selector="type=kwok").items:
            assert REAL_NODE_LABEL not in fake.metadata.labels


def test_real_and_fake_pods_stay_apart(cluster: Cluster, real_node: RealNodeHandle, namespace: str) -> None:
    if not cluster.nodes:
        pytest.skip("no kwok nodes in this session (HEADROOM_TEST_NODES=0)")
    real = real_node.pod("real", ["true"])
    fake = cluster.fake_pod("fake", outcome="succeed")
    for body in (real, fake):
        cluster.core.create_namespaced_pod(namespace, body)
    real_done = cluster.wait_pod(namespace, "real", finished, what="done")
    fake_done = cluster.wait_pod(namespace, "fake", finished, what="done")
    assert real_done.spec.node_name == real_node.name
    assert fake_done.spec.node_name in cluster.nodes
    fake_node = cluster.core.read_node(fake_done.spec.node_name)
    assert fake_node.metadata.labels.items() >= FAKE_NODE_LABELS.items()

    # a pod that selects neither kind tolerates neither taint: it fits nowhere
    stray = real_node.pod("stray", ["true"])
    stray["spec"].pop("nodeSelector")
    stray["spec"].pop("tolerations")
    cluster.core.create_namespaced_pod(namespace, stray)
    pod = cluster.wait_pod(
        namespace,
        "stray",
        lambda p: any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in p.status.conditions or []),
        what="Unschedulable",
    )
    assert pod.spec.node_name is None


def test_memory_hog_over_32Mi_limit_is_oom_killed(cluster: Cluster, real_node: RealNodeHandle, namespace: str) -> None:
    def hog(name: str) -> Any:
        body = real_node.pod(
            name,
            ["dd", "if=/dev/zero", "of=/dev/null", "bs=100M", "count=1"],
            requests={"cpu": "100m", "memory": "32Mi"},
            limits={"cpu": "100m", "memory": "32Mi"},
        )
        return run_to_end(cluster, namespace, body)

    pod = hog("hog")
    t = terminated(pod)
    if (pod.status.phase, t.reason, t.exit_code) == ("Failed", "Error", 137):
        # containerd 1.6 on cgroup v1 names the reason from its OOM event, which can come after the exit it
        # reports (once in a suite run on a busy machine): the kill is seen, its name is not. Once more.
        pod = hog("hog-again")
        t = terminated(pod)
    assert (pod.status.phase, t.reason, t.exit_code) == ("Failed", "OOMKilled", 137)
    assert pod.status.qos_class == "Guaranteed"


def test_same_hog_without_limit_completes(cluster: Cluster, real_node: RealNodeHandle, namespace: str) -> None:
    body = real_node.pod(
        "hog", ["dd", "if=/dev/zero", "of=/dev/null", "bs=100M", "count=1"], requests={"cpu": "100m", "memory": "32Mi"}
    )
    pod = run_to_end(cluster, namespace, body)
    t = terminated(pod)
    assert (pod.status.phase, t.reason, t.exit_code) == ("Succeeded", "Completed", 0)
    assert pod.status.qos_class == "Burstable"


def test_guaranteed_pod_runs_under_restricted_pod_security(cluster: Cluster, real_node: RealNodeHandle) -> None:
    ns = cluster.create_namespace(prefix="restricted", labels=RESTRICTED)
    script = (
        "id -u; cat /proc/self/oom_score_adj; "
        "python3 -c 'import json, csv, gzip, hashlib, random; print(\"python ok\")'"
    )
    body = real_node.pod(
        "guaranteed",
        ["sh", "-c", script],
        requests={"cpu": "200m", "memory": "64Mi"},
        limits={"cpu": "200m", "memory": "64Mi"},
    )
    pod = run_to_end(cluster, ns, body)
    assert pod.status.qos_class == "Guaranteed"
    t = terminated(pod)
    assert (t.reason, t.exit_code) == ("Completed", 0)
    # kubectl logs path: apiserver -> kubelet -> the container's log file
    uid, oom_adj, py = _three_lines(cluster.core.read_namespaced_pod_log("guaranteed", ns))
    assert uid == "65534" and py == "python ok"
    if real_node.node is not None:
        # the kubelet asked -997 for a Guaranteed container; this host cannot lower it
        assert oom_adj == real_node.node.oom_score_adj == "0"

    # the same pod without the restricted settings is refused by admission
    privileged = real_node.pod("loose", ["true"], restricted=False)
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as err:
        cluster.core.create_namespaced_pod(ns, privileged)
    assert err.value.status == 403 and "restricted" in str(err.value.body)


def _three_lines(text: str) -> tuple[str, str, str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert len(lines) == 3, text
    return lines[0], lines[1], lines[2]


def test_peak_memory_from_inside_the_container_cgroup(
    cluster: Cluster, real_node: RealNodeHandle, namespace: str
) -> None:
    """The trial reads its own cgroup's high-water mark as its last act (any cluster)."""
    script = f"python3 -c 'b = bytearray(48 * 1024 * 1024); b[::4096] = b\"x\" * len(b[::4096])' && {PEAK_SH}"
    body = real_node.pod(
        "peak",
        ["sh", "-c", script],
        requests={"cpu": "100m", "memory": "128Mi"},
        limits={"cpu": "500m", "memory": "128Mi"},
    )
    pod = run_to_end(cluster, namespace, body)
    assert terminated(pod).exit_code == 0
    peak = int(cluster.core.read_namespaced_pod_log("peak", namespace).split()[-1])
    assert 48 * MiB <= peak <= 128 * MiB


def test_peak_memory_from_the_node_side_cgroup(cluster: Cluster, real_node: RealNodeHandle, namespace: str) -> None:
    """From the host: <cgroup root>/kubepods/<qos>/pod<uid>/<container id>/ while it runs."""
    node = real_node.node
    if node is None:
        pytest.skip("needs the local real node (host access to its cgroups)")
    script = (
        "python3 -c 'import time; b = bytearray(40 * 1024 * 1024); "
        'b[::4096] = b"x" * len(b[::4096]); print("ready", flush=True); time.sleep(300)\''
    )
    body = real_node.pod(
        "holder",
        ["sh", "-c", script],
        requests={"cpu": "100m", "memory": "96Mi"},
        limits={"cpu": "500m", "memory": "96Mi"},
    )
    cluster.core.create_namespaced_pod(namespace, body)
    pod = cluster.wait_pod(namespace, "holder", lambda p: p.status.phase == "Running", what="Running")
    wait_for(lambda: "ready" in cluster.core.read_namespaced_pod_log("holder", namespace), 60, "the allocation")
    (status,) = pod.status.container_statuses
    cg = node.container_cgroup(pod.metadata.uid, status.container_id)
    assert f"/{node.cgroup_name}/kubepods/" in str(cg)
    peak = int((cg / "memory.max_usage_in_bytes").read_text())
    limit = int((cg / "memory.limit_in_bytes").read_text())
    assert 40 * MiB <= peak <= limit == 96 * MiB
    cluster.core.delete_namespaced_pod("holder", namespace, grace_period_seconds=0)


def test_teardown_leaves_no_process_mount_namespace_or_cgroup(
    cluster: Cluster, real_node: RealNodeHandle, namespace: str
) -> None:
    """A second node, started, given a running pod (mounts, netns, shim), then stopped."""
    if real_node.node is None or cluster.plane is None or cluster.plane.pki is None:
        pytest.skip("needs the local plane")
    node = RealNode(find_node_assets(cluster.plane.bin), cluster.kubeconfig, cluster.plane.pki.ca_crt)
    try:
        node.start()
        node.register(cluster.core)
        body = real_node.pod("sleeper", ["sleep", "300"])
        body["spec"]["nodeName"] = node.name  # bypass the scheduler: only this node
        cluster.core.create_namespaced_pod(namespace, body)
        cluster.wait_pod(namespace, "sleeper", lambda p: p.status.phase == "Running", what="Running")
        assert node.leftovers(), "a running node must show up as processes/mounts/cgroups"
    finally:
        delete_pods_on_node(cluster.core, node.name, timeout=10)
        node.stop()
        cluster.core.delete_node(node.name)
    assert node.leftovers() == []


def test_oom_killed_child_marks_the_container_oomkilled_with_exit_0(
    cluster: Cluster, real_node: RealNodeHandle, namespace: str
) -> None:
    """A multi-step trial: the child is OOM-killed, the shell survives and reports it.

    Without this, a trial whose agent spawns a memory hog would look like a plain
    failure; the container's cgroup counts the kill (v1 memory.oom_control oom_kill).
    cgroup v1 only: on v2 the kubelet sets memory.oom.group and the whole container dies.
    """
    if real_node.node is None:
        pytest.skip("cgroup v1 behaviour, checked on the local real node")
    script = (
        'dd if=/dev/zero of=/dev/null bs=100M count=1; echo "child exit $?"; '
        "grep oom_kill /sys/fs/cgroup/memory/memory.oom_control "
        "|| grep oom_kill /sys/fs/cgroup/memory.events"
    )
    body = real_node.pod(
        "child",
        ["sh", "-c", script],
        requests={"cpu": "100m", "memory": "32Mi"},
        limits={"cpu": "500m", "memory": "32Mi"},
    )
    pod = run_to_end(cluster, namespace, body)
    log = cluster.core.read_namespaced_pod_log("child", namespace)
    assert "child exit 137" in log
    kills = re.search(r"oom_kill (\d+)", log)
    assert kills and int(kills.group(1)) >= 1, log
    t = terminated(pod)
    # containerd marks the container OOMKilled when its cgroup saw an OOM kill, even though
    # the main process survived and exited 0: a backend must not read reason OOMKilled as
    # "the trial died" without looking at the exit code.
    assert (pod.status.phase, t.reason, t.exit_code) == ("Succeeded", "OOMKilled", 0)
