"""Which backend the controller drives: the Kubernetes Pod backend, loaded lazily."""

from __future__ import annotations

from typing import Any

from orchestrator.controller.engine import Backend as TrialBackend
from orchestrator.controller.manager import BackendFactory


def backend_factory(*, keep_pods: bool = False, node_provenance: bool = False) -> BackendFactory:
    def make(api: Any, namespace: str) -> TrialBackend:
        try:
            from orchestrator.backends import kubernetes as k8s_backend  # noqa: F401
        except ImportError as exc:
            raise RuntimeError(f"the Kubernetes Pod backend is not available ({exc})") from None
        raise RuntimeError("the Kubernetes Pod backend is not wired to the controller yet")

    return make
