"""The controller refuses an Experiment whose agent needs a host beside the trial (an external agent, a host
agent.path): one SpecInvalid condition and one Warning event, terminal, never retried or crash-looped.

The Experiment is created straight through the API (as kubectl would), past `headroom submit`'s own check; the
reconciler is the real one, against the real API server, with real informers.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from orchestrator.controller.resources import API_VERSION, EXPERIMENT_PLURAL, GROUP, TRIAL_PLURAL, VERSION

from .controller_support import crds, reconciler  # noqa: F401  (crds: the fixture)
from .plane import Cluster

pytestmark = [pytest.mark.cluster]

AGENTS = {
    "external": {"kind": "external", "command": "python3 my_agent.py"},
    "host-path": {"kind": "command", "command": "bash /agent/run.sh", "path": "/home/me/agent"},
}


def _no_backend(name: str, spec: Any) -> Any:
    raise AssertionError(f"{name}: a refused Experiment must never get a backend (pods)")


def test_an_agent_a_pod_cannot_run_is_refused_once(cluster: Cluster, crds: None) -> None:
    ns = cluster.create_namespace(prefix="agentref")
    custom = client.CustomObjectsApi(cluster.api_client)
    for name, agent in AGENTS.items():
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            EXPERIMENT_PLURAL,
            {
                "apiVersion": API_VERSION,
                "kind": "Experiment",
                "metadata": {"name": name},
                "spec": {"name": name, "task_source": {"bundle": "never-read"}, "agent": agent},
            },
        )
    with reconciler(cluster, ns, _no_backend) as rec:
        for name in AGENTS:
            assert rec.reconcile(name) is None  # terminal: no requeue
            assert rec.reconcile(name) is None  # and a second look changes nothing
        for name, words in (
            ("external", "an external agent runs on a host"),
            ("host-path", "agent.path '/home/me/agent' is a directory on a host"),
        ):
            exp = custom.get_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, name)
            assert exp["status"]["phase"] == "Failed"
            (cond,) = [c for c in exp["status"]["conditions"] if c["type"] == "Planned"]
            assert cond["status"] == "False" and cond["reason"] == "SpecInvalid"
            assert cond["message"].startswith("spec.agent: ") and words in cond["message"]
            events = [
                e
                for e in cluster.core.list_namespaced_event(ns).items
                if e.involved_object.name == name and e.reason == "SpecInvalid"
            ]
            assert len(events) == 1 and events[0].type == "Warning" and words in events[0].message
            assert (events[0].count or 1) == 1
        assert custom.list_namespaced_custom_object(GROUP, VERSION, ns, TRIAL_PLURAL)["items"] == []
        assert cluster.core.list_namespaced_pod(ns).items == []
