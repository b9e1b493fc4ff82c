"""Optional backend abilities, declared by each backend class instead of found with ``getattr``.

A backend sets ``abilities = Abilities(...)`` on its class; the engine asks the declaration, then uses the
typed view of the method (:func:`fit_checker`, :func:`run_holder`, ...). ``tests/backends/test_abilities.py``
holds every backend to its declaration: an ability declared has its method, one not declared has none.

The ``flags`` a backend honours are checked before a sweep (:func:`refuse_flags`): a flag the backend
would ignore is refused in one line, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend, Handle
    from orchestrator.spec.resources import ResourceAmounts


class Abilities(BaseModel):
    """What a backend can do beyond the required interface (``orchestrator.backends.base.Backend``)."""

    model_config = ConfigDict(frozen=True)

    check_fit: bool = Field(
        default=False, description="check_fit(needs, placement=...): refuses a try no node could hold"
    )
    hold_run: bool = Field(
        default=False, description="hold_run(run_id): a liveness signal other processes' cleanup sees"
    )
    recorded: bool = Field(
        default=False, description="recorded(handle): told once a result is durable, to release its remains"
    )
    canary_targets: bool = Field(
        default=False, description="canary_targets() and canary_skipped(): the canary per node"
    )
    informer: bool = Field(
        default=False, description="informer(run_id): a cache of the run's pods (the controller reads it)"
    )
    exec_channel: bool = Field(default=False, description="an exec channel into a try, which external agents need")
    places_tries: bool = Field(
        default=False, description="places each try on a node itself and records overcommit per node"
    )
    canary_needs_image: bool = Field(
        default=False, description="the canary's try needs the experiment's (or a task's) image"
    )
    force_cleanup: bool = Field(
        default=False, description="cleanup(run_id, force=True): also runs that still look alive"
    )
    task_images: bool = Field(
        default=False,
        description="runs each task in its docker_image or the image its environment/Dockerfile builds; without it "
        "a task runs on the host, and one that names an image is refused unless run_on_host (engine/faithful.py)",
    )
    multi_container: bool = Field(
        default=False, description="starts a task's docker-compose services beside it (multi-container tasks)"
    )
    gpus: bool = Field(default=False, description="can give a try GPUs where its machine has them")
    node_architectures: bool = Field(
        default=False,
        description="node_architectures(): the CPU architectures of the machines its tries could land on, read "
        "when asked (a cluster's schedulable nodes); without it capabilities.architectures is what it runs on",
    )
    verifier_outputs: bool = Field(
        default=True,
        description="the verifier sees the folders a task declares in [verifier] outputs (the local backend's "
        "verifier shares the agent's files; Docker carries them into the verifier's container); without it such a "
        "task is refused (engine/faithful.py)",
    )
    flags: frozenset[str] = Field(default=frozenset(), description="backend-specific command-line flags it honours")


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


def refuse_flags(backend_name: str, abilities: Abilities, given: Sequence[str]) -> None:
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
