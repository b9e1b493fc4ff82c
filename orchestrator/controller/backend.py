"""The backend the controller drives: the Kubernetes Pod backend, loaded by name (lazily)."""

from __future__ import annotations

from typing import Any

from orchestrator import backends
from orchestrator.controller.engine import Backend
from orchestrator.controller.manager import BackendFactory, PodHook
from orchestrator.spec.kubernetes import KubernetesOptions


def backend_factory(extra_hook: PodHook | None = None) -> BackendFactory:
    """Builds a Pod backend per Experiment; ``extra_hook`` edits pod bodies after the controller's hook."""

    def make(api: Any, options: KubernetesOptions, hook: PodHook) -> Backend:
        def both(launch: Any, body: dict[str, Any]) -> dict[str, Any]:
            body = hook(launch, body)
            return extra_hook(launch, body) if extra_hook else body

        return backends.load("kubernetes", options=options, api_client=api, pod_hook=both)

    return make
