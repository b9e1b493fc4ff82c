"""Leader election on a coordination.k8s.io Lease, through headroom's own (counted) API client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client


def lead_when_elected(
    api: Any,
    *,
    lease_name: str,
    namespace: str,
    identity: str,
    lease_duration: int,
    renew_deadline: int,
    retry_period: int,
    started: Callable[[], None],
    stopped: Callable[[], None],
) -> None:
    """Take the Lease, then call ``started``; ``stopped`` when the Lease is lost. Returns when the election ends."""
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    lock = LeaseLock(lease_name, namespace, identity)
    lock.api_instance = client.CoordinationV1Api(api)  # our client: counted, and the right credentials
    config = electionconfig.Config(lock, lease_duration, renew_deadline, retry_period, started, stopped)
    leaderelection.LeaderElection(config).run()
