"""The Pod backend names the tries that changed, so the engine observes those and not every try in flight.

``RunCache.take_changed`` (the run's informer) gives the pods whose pod or Events changed since it was last
asked; ``engine.execute.to_observe`` observes only those between its sweeps of every try. Here against the
real API server: a pod the informer sees is named once, then not again until the pod changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.backends.kubernetes.run_cache import RunCache
from orchestrator.engine import sweep
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.spec.experiment import Experiment

from .plane import Cluster, wait_for
from .simulate import Sim, hook, kwok_options

pytestmark = pytest.mark.cluster

SELECTOR = "app.kubernetes.io/managed-by=headroom"
TASKS = Path(__file__).resolve().parents[2] / "tasks"


def settled(pod: dict[str, Any] | None) -> bool:
    """kwok's last step for a pod without an outcome: Running, with its Ready condition true."""
    status = (pod or {}).get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return status.get("phase") == "Running" and bool(ready) and ready[0].get("status") == "True"


def quiet_for(take: Callable[[], set[str]], seconds: float) -> bool:
    """Nothing named by ``take`` for ``seconds`` on end (False at the first pod named)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if take():
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
        wait_for(lambda: quiet_for(informer.take_changed, 1.0), 60, "quiet")
        cluster.core.patch_namespaced_pod("b", namespace, {"metadata": {"annotations": {"touched": "yes"}}})
        named: set[str] = set()
        wait_for(lambda: bool(named.update(informer.take_changed())) or "b" in named, 30, "the change named")
        assert named == {"b"}
        assert informer.take_changed() == set()
    finally:
        informer.stop()


def test_the_backend_names_a_try_until_its_pod_is_created_then_only_when_it_changes(
    cluster: Cluster, namespace: str
) -> None:
    """``changed()`` keeps the tries still waiting for their create apart from the others, instead of looking
    through every try in flight on each wake-up: a try is named from its submit until its create ended, then only
    when its pod changes. A try left out would wait for the engine's next sweep of all; one never let go would
    be observed on every wake-up."""
    options = kwok_options(namespace, kubeconfig=str(cluster.kubeconfig))
    exp = Experiment(
        tasks_dir=str(TASKS),
        tasks=["csv-report"],
        configurations=["1x-strict"],
        attempts=2,
        backend="kubernetes",
        kubernetes=options,
    )
    task = sweep.prepare(exp)[0]
    launches = [build_launch("changed-run", trial, 0, task, exp) for trial in plan(exp, [task])]
    backend = KubernetesBackend(options=options, pod_hook=hook(lambda launch: Sim("none")))  # pods keep running
    try:
        first, second = (backend.submit(launch) for launch in launches)
        assert {first.name, second.name} <= backend.changed()  # submitted: named until the create has ended
        informer = backend.informer("changed-run")
        wait_for(lambda: all(informer.pod(h.name) is not None for h in (first, second)), 30, "both pods created")
        wait_for(lambda: all(settled(informer.pod(h.name)) for h in (first, second)), 60, "both running and ready")
        for h in (first, second):
            assert backend.observe(h) is None  # running: nothing to harvest
        wait_for(lambda: quiet_for(backend.changed, 1.0), 60, "quiet")
        assert backend.changed() == set()  # both created, nothing new: neither is named
        cluster.core.patch_namespaced_pod(second.name, namespace, {"metadata": {"annotations": {"touched": "yes"}}})
        named: set[str] = set()
        wait_for(lambda: bool(named.update(backend.changed())) or second.name in named, 30, "the change named")
        assert named == {second.name}
        for h in (first, second):
            backend.cancel(h)
        assert backend.changed() <= {first.name, second.name}
    finally:
        backend.close()
