"""Typed views of a backend's optional methods, and the flags it honours, read from its one declaration.

A backend sets ``abilities = BackendAbilities(...)`` on its class (:mod:`orchestrator.spec.backend`); the
engine asks the declaration, then uses the typed view of the method (:func:`fit_checker`, :func:`run_holder`,
...), never ``getattr``. ``tests/backends/test_abilities.py`` holds every backend to its declaration: an
ability declared has its method, one not declared has none.

The ``flags`` a backend honours are checked before a sweep (:func:`refuse_flags`): a flag the backend
would ignore is refused in one line, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from orchestrator.errors import UserError
from orchestrator.spec.backend import BackendAbilities

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend, Handle
    from orchestrator.spec.resources import ResourceAmounts


#: Every backend-specific flag, and what honours it; the message a refusal names.
BACKEND_FLAGS = {
    "--namespace": "kubernetes",
    "--kube-context": "kubernetes",
    "--queue": "kubernetes",
    "--keep-pods": "kubernetes",
    "--force": "kubernetes",
    "--build": "docker",
    "--enforcement": "local",
    "--run-on-host": "local",
}


def refuse_flags(backend_name: str, abilities: BackendAbilities, given: Sequence[str]) -> None:
    """Refuse, in one line, the flags this backend would ignore (exit 2 through UserError)."""
    ignored = [f for f in given if f not in abilities.flags]
    if not ignored:
        return
    owners = sorted({BACKEND_FLAGS.get(f, "another backend") for f in ignored})
    verb = "applies" if len(ignored) == 1 else "apply"
    raise UserError(
        f"{', '.join(ignored)} {verb} to --backend {' or '.join(owners)} (this run uses {backend_name}, "
        f"which would ignore {'it' if len(ignored) == 1 else 'them'})",
        field=ignored[0],
    )


class FitChecker(Protocol):
    def check_fit(self, needs: Sequence[tuple[str, str, ResourceAmounts]], placement: str = "default") -> None: ...


class RunHolder(Protocol):
    def hold_run(self, run_id: str) -> None: ...


class ResultReleaser(Protocol):
    def recorded(self, handle: Handle) -> None: ...


class CanaryTargets(Protocol):
    def canary_targets(self) -> list[str]: ...

    def canary_skipped(self) -> list[dict[str, str]]: ...


class PodInformer(Protocol):
    def informer(self, run_id: str) -> Any: ...


class ArchitectureReader(Protocol):
    def node_architectures(self) -> list[str]: ...


def fit_checker(backend: Backend) -> FitChecker | None:
    return cast("FitChecker", backend) if backend.abilities.check_fit else None


def run_holder(backend: Backend) -> RunHolder | None:
    return cast("RunHolder", backend) if backend.abilities.hold_run else None


def result_releaser(backend: Backend) -> ResultReleaser | None:
    return cast("ResultReleaser", backend) if backend.abilities.recorded else None


def canary_targets(backend: Backend) -> CanaryTargets | None:
    return cast("CanaryTargets", backend) if backend.abilities.canary_targets else None


def pod_informer(backend: Backend) -> PodInformer | None:
    return cast("PodInformer", backend) if backend.abilities.informer else None


def architecture_reader(backend: Backend) -> ArchitectureReader | None:
    return cast("ArchitectureReader", backend) if backend.abilities.node_architectures else None


#: The method each declared ability promises (a test checks every backend class against it).
METHODS = {
    "check_fit": ("check_fit",),
    "hold_run": ("hold_run",),
    "recorded": ("recorded",),
    "canary_targets": ("canary_targets", "canary_skipped"),
    "informer": ("informer",),
    "node_architectures": ("node_architectures",),
}
