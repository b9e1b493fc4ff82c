"""The Pod backend names the tries that changed, so the engine observes those and not every try in flight.

``RunCache.take_changed`` (the run's informer) gives the pods whose pod or Events changed since it was last
asked; ``engine.execute.to_observe`` observes only those between its sweeps of every try. Here against the
real API server: a pod the informer sees is named once, then not again until the pod changes.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from orchestrator.backends.kubernetes.run_cache import RunCache

from .plane import Cluster, wait_for

pytestmark = pytest.mark.cluster

SELECTOR = "app.kubernetes.io/managed-by=headroom"


def settled(pod: dict[str, Any] | None) -> bool:
    """kwok's last step for a pod without an outcome: Running, with its Ready condition true."""
    status = (pod or {}).get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return status.get("phase") == "Running" and bool(ready) and ready[0].get("status") == "True"


def quiet_for(informer: RunCache, seconds: float) -> bool:
    """Nothing named for ``seconds`` on end (False at the first pod named)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if informer.take_changed():
            return False
        time.sleep(0.05)
    return True


def test_the_run_cache_names_a_pod_once_per_change(cluster: Cluster, namespace: str) -> None:
    informer = RunCache(cluster.core, namespace, SELECTOR, lambda: None)
    informer.start()
    try:
        for name in ("a", "b"):
            body = cluster.fake_pod(name)
            body["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "headroom"}
            cluster.core.create_namespaced_pod(namespace, body)
        wait_for(lambda: informer.pod("a") is not None and informer.pod("b") is not None, 30, "the informer sees both")
        seen: set[str] = set()
        wait_for(lambda: bool(seen.update(informer.take_changed())) or seen == {"a", "b"}, 30, "both named")
        # kwok moves each pod on (scheduled, running, ready): wait until both are there and a second passes with
        # nothing named (two empty reads in a row were not enough on a loaded machine: kwok's last step came later)
        wait_for(lambda: all(settled(informer.pod(n)) for n in ("a", "b")), 60, "both pods running and ready")
        wait_for(lambda: quiet_for(informer, 1.0), 60, "quiet")
        cluster.core.patch_namespaced_pod("b", namespace, {"metadata": {"annotations": {"touched": "yes"}}})
        named: set[str] = set()
        wait_for(lambda: bool(named.update(informer.take_changed())) or "b" in named, 30, "the change named")
        assert named == {"b"}
        assert informer.take_changed() == set()
    finally:
        informer.stop()
