"""Which backend the controller drives: the Kubernetes Pod backend, loaded by name (lazily)."""

from __future__ import annotations

from typing import Any

from orchestrator import backends
from orchestrator.controller.engine import Backend
from orchestrator.controller.manager import BackendFactory


def backend_factory(*, keep_pods: bool = False, node_provenance: bool = False) -> BackendFactory:
    def make(api: Any, namespace: str) -> Backend:
        return backends.load("kubernetes", namespace=namespace, api_client=api, keep_pods=keep_pods,
                             node_provenance=node_provenance)

    return make
