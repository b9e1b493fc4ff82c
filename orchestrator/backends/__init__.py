"""Backends by name, imported lazily: the local path never imports a Kubernetes or Docker client."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from orchestrator.errors import UserError

if TYPE_CHECKING:  # the CLI lists the names without loading the interface and its models
    from orchestrator.backends.base import Backend
    from orchestrator.spec.backend import BackendAbilities

_REGISTRY = {
    "local": ("orchestrator.backends.local.backend", "LocalBackend"),
    "kubernetes": ("orchestrator.backends.kubernetes.backend", "KubernetesBackend"),
    "docker": ("orchestrator.backends.docker.backend", "DockerBackend"),
}


def names() -> list[str]:
    return list(_REGISTRY)


def backend_class(name: str) -> Any:
    """The class of the backend called ``name`` (imports its module, constructs nothing)."""
    try:
        module_name, cls_name = _REGISTRY[name]
    except KeyError:
        raise UserError(f"unknown backend {name!r} (have: {', '.join(_REGISTRY)})", field="--backend") from None
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("orchestrator.backends"):
            raise UserError(f"the {name} backend is not available in this version", field="--backend") from None
        from orchestrator.extras import missing_extra

        if (needs_extra := missing_extra(exc)) is not None:
            raise needs_extra from None
        raise UserError(f"the {name} backend needs the Python package {exc.name!r}", field="--backend") from None
    return getattr(module, cls_name)


def declared_abilities(name: str) -> BackendAbilities:
    """What the backend called ``name`` declares it can do, before one is constructed (flags are checked first)."""
    declared: BackendAbilities = backend_class(name).abilities
    return declared


def load(name: str, **options: Any) -> Backend:
    """Construct the backend called ``name`` with its options."""
    backend: Backend = backend_class(name)(**options)
    return backend
