"""The enforcement canary per node on a cluster with a real node beside a kwok node.

Both nodes get one pool label for the test, so the run's ``node_selector`` matches exactly
them. On the real kubelet + containerd node the kernel must OOM-kill the hog above each
limit (the verdict is ``enforced``); on the kwok node, which runs no containers and so
enforces nothing, the hog "finishes" (its outcome annotation says succeed, as a node
ignoring limits would end it) and the verdict is ``not_enforced``. One canary, two nodes,
two verdicts: the run is flagged because of the kwok node only. On the real node the
CPU-quota check is measured too (a spin under the kubelet's CFS quota of 0.25 cpu).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.engine.canary import CPU_SLACK, run_canary
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.resources import ResourceConfig

from .conftest import RealNodeHandle
from .plane import FAKE_NODE_TOLERATION, Cluster
from .realnode import REAL_NODE_TOLERATION
from .simulate import Sim, hook, report

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]
POOL_LABEL = "headroom.test/canary-mix"


@pytest.fixture
def mixed_pool(cluster: Cluster, real_node: RealNodeHandle) -> Iterator[tuple[str, str, str]]:
    pool = uuid.uuid4().hex[:8]
    kwok = cluster.nodes[0]
    for n in (real_node.name, kwok):
        cluster.core.patch_node(n, {"metadata": {"labels": {POOL_LABEL: pool}}})
    try:
        yield pool, real_node.name, kwok
    finally:
        for n in (real_node.name, kwok):
            cluster.core.patch_node(n, {"metadata": {"labels": {POOL_LABEL: None}}})


def test_the_canary_reports_enforcement_per_node_real_node_enforced_kwok_node_not(
    cluster: Cluster, real_node: RealNodeHandle, namespace: str, mixed_pool: tuple[str, str, str]
) -> None:
    pool, real, kwok = mixed_pool
    options = KubernetesOptions(
        namespace=namespace,
        kubeconfig=str(cluster.kubeconfig),
        node_selector={POOL_LABEL: pool},
        tolerations=[dict(FAKE_NODE_TOLERATION), dict(REAL_NODE_TOLERATION)],
        image_pull_policy=real_node.pull_policy,  # type: ignore[arg-type]
        workdir="/tmp",  # the base image has no WORKDIR; / is not writable for uid 1000
    )
    # The annotations only steer kwok; the real kubelet ignores them and runs the hog for real.
    backend = KubernetesBackend(options=options, pod_hook=hook(lambda launch: Sim("succeed", report("1"))))
    try:
        got = run_canary(
            backend,
            [ResourceConfig.parse(x) for x in ("1x-strict", "1x/2x", "unbounded")],
            image=real_node.image,
            deadline_s=240,
        )
    finally:
        backend.close()
    got = got.model_dump(mode="json")  # the record as the store keeps it
    print(got["by_target"], got["cpu"].get(real))
    assert got["targets"] == sorted([real, kwok]), got.get("skipped_targets")
    assert got["by_target"][kwok] == "not_enforced"
    assert got["by_target"][real] == "enforced", got["problems"]
    # The CPU check is measured on a pod: the spin's account comes back in the runner's termination
    # message (the agent's self-report), though a passing pod's log is never read. The kubelet's CFS
    # quota bites on a real node; only a host too busy to give an unlimited spin more than the quota
    # leaves it unjudged (as in tests/engine/test_canary.py), never "not limited".
    cpu = got["cpu"][real]
    assert cpu["cpu_share"] is not None and cpu["unlimited_cpu_share"] is not None, cpu
    assert cpu["limited"] is True or any("too busy" in n for n in cpu["notes"]), cpu
    assert cpu["cpu_share"] <= 0.25 * CPU_SLACK, cpu
    arms = {(a["target"], a["config"]): a for a in got["arms"]}
    for label, mib in (("1x-strict", 64), ("1x/2x", 128)):
        arm = arms[(real, label)]
        # memory: the kernel killed the hog, the one below passed
        assert arm["status"] == got["by_target"][real], arm["problems"]
        assert arm["limit_memory_bytes"] == mib * 2**20
        assert arm["above"]["verdict"] == "infra_error(oom_killed)" and arm["below"]["verdict"] == "passed"
        assert arms[(kwok, label)]["status"] == "not_enforced"
    assert got["status"] == "flagged"
    assert all(f"on {kwok}:" in p for p in got["problems"])  # the real node is not blamed
