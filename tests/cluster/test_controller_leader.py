"""Leader election through a coordination.k8s.io Lease: two controllers, one leads; kill -9 the
leader and the other takes over. Both run out of cluster as the chart's ServiceAccount."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from .controller_support import (  # noqa: F401  (crds: the fixture)
    ControllerProcess,
    crds,
    helm_install,
    service_account_kubeconfig,
)
from .plane import Cluster, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

LEASE = "headroom-controller"
ELECTION = ["--leader-elect", "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1"]


def _holder(cluster: Cluster, ns: str) -> str | None:
    try:
        lease = client.CoordinationV1Api(cluster.api_client).read_namespaced_lease(LEASE, ns)
    except client.exceptions.ApiException:
        return None
    return lease.spec.holder_identity


def test_one_leader_and_failover_after_kill_9(cluster: Cluster, crds: None, tmp_path: Path) -> None:
    ns = cluster.create_namespace(prefix="hle")
    r = helm_install(cluster, ns, "--set", "replicaCount=1", "--skip-crds", wait=False)
    assert r.returncode == 0, r.stderr
    kc = service_account_kubeconfig(cluster, ns, "headroom", tmp_path / "sa.kubeconfig")
    a = ControllerProcess(kc, ns, tmp_path / "a.log", *ELECTION, "--identity", "replica-a").start()
    b = ControllerProcess(kc, ns, tmp_path / "b.log", *ELECTION, "--identity", "replica-b").start()
    try:
        wait_for(lambda: _holder(cluster, ns) in ("replica-a", "replica-b"), 30, "a leader")
        wait_for(
            lambda: (a.metric("headroom_leader") or 0) + (b.metric("headroom_leader") or 0) == 1,
            15,
            "exactly one replica reports leading",
        )
        leader, standby = (a, b) if _holder(cluster, ns) == "replica-a" else (b, a)
        time.sleep(6)  # longer than the lease: the leader keeps renewing, nobody else takes it
        assert _holder(cluster, ns) == ("replica-a" if leader is a else "replica-b")
        assert standby.metric("headroom_leader") == 0
        t0 = time.monotonic()
        leader.kill9()
        new = "replica-b" if leader is a else "replica-a"
        wait_for(lambda: _holder(cluster, ns) == new, 30, "failover to the standby")
        wait_for(lambda: standby.metric("headroom_leader") == 1, 10, "the standby leads")
        took = time.monotonic() - t0
        print(f"\nfailover after kill -9 of the leader: {took:.1f}s (lease 4s, retry 1s)")
        # It leads as the ServiceAccount: its watches and Lease updates passed RBAC.
        assert (
            standby.metric("headroom_kube_api_requests_total", verb="update", resource="leases", code="200") or 0
        ) >= 1
        assert (standby.metric("headroom_kube_api_request_errors_total", resource="experiments") or 0) == 0
    finally:
        a.stop()
        b.stop()
