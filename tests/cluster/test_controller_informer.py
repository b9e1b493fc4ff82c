"""The informer against the real API server: list, watch with bookmarks, resume after a watch ends.

The relist after 410 Gone is tested in tests/controller/test_informer_gone.py: a fresh test plane
replays old revisions instead of answering 410, so it cannot be made to send one on demand.
"""

from __future__ import annotations

import time

import pytest

from orchestrator.controller.metrics import Metrics
from orchestrator.kube.watch import Informer

from .plane import Cluster, wait_for

pytestmark = [pytest.mark.cluster]


def _cm(name: str, value: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"inf": "yes"}},
        "data": {"v": value},
    }


def test_watch_follows_changes_and_resumes(cluster: Cluster, namespace: str) -> None:
    core = cluster.core
    core.create_namespaced_config_map(namespace, _cm("a", "1"))
    events: list[tuple[str, str]] = []
    metrics = Metrics()
    inf = Informer(
        "configmap",
        lambda **kw: core.list_namespaced_config_map(namespace, **kw),
        label_selector="inf=yes",
        handler=lambda kind, o: events.append((kind, o["metadata"]["name"])),
        metrics=metrics,
        watch_timeout=3,
    )
    inf.start()
    try:
        assert inf.synced.wait(20)
        assert [o["metadata"]["name"] for o in inf.items()] == ["a"]
        core.create_namespaced_config_map(namespace, _cm("b", "1"))
        core.patch_namespaced_config_map("a", namespace, {"data": {"v": "2"}})
        core.delete_namespaced_config_map("b", namespace)
        wait_for(lambda: ("DELETED", "b") in events, 20, "the delete")
        assert inf.get("a")["data"]["v"] == "2" and inf.get("b") is None
        # Watches end (timeoutSeconds=3) and resume from the last resourceVersion: no relist.
        relists = inf.relists
        time.sleep(8)
        core.patch_namespaced_config_map("a", namespace, {"data": {"v": "3"}})
        wait_for(lambda: inf.get("a")["data"]["v"] == "3", 20, "change after a resumed watch")
        assert inf.relists == relists
        assert metrics.watch_restarts.labels("configmap", "timeout")._value.get() >= 2
        core.create_namespaced_config_map(namespace, _cm("c", "1"))
        wait_for(lambda: inf.get("c") is not None, 20, "a later change")
        assert sorted(o["metadata"]["name"] for o in inf.items()) == ["a", "c"]
        print(f"\nrelists={inf.relists} bookmarks={inf.bookmarks} (bookmarks come at the server's discretion)")
    finally:
        inf.stop()
