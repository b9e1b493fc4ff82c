"""What the engine needs from a backend, in a shape both a CLI loop and a reconcile loop can drive.

* ``submit(launch)`` starts a try and returns a :class:`Handle`. It is idempotent
  on ``launch.name``: submitting the same try twice starts it once.
* ``observe(handle)`` never blocks: the try's raw :class:`TrialFacts` once it has
  ended, else ``None``.
* ``adopt(launch)``: on resume, the handle of a try a previous process left
  running if it is still alive (a pod outlives the CLI), else ``None`` (the try
  is abandoned and run again).
* ``cancel(handle)`` stops a try; its result is not recorded.
* ``wait(handles, timeout)`` blocks until something may have changed, so the
  engine need not spin; a backend with nothing better may simply sleep.
* ``cleanup(run_id)`` removes what a crash left behind (cgroups, work dirs,
  containers, pods); ``None`` means every run of this backend.

Optional methods, called when the backend declares them in its ``abilities``
(:class:`orchestrator.spec.backend.BackendAbilities`, never found with ``getattr``):

* ``check_fit([(task_id, config_label, amounts), ...], placement=...)`` raises ``UserError``
  before the run when a try's request could never be placed (kubernetes: larger than every
  candidate node's allocatable; under limit-aware placement also no node advertising the
  extended resource, or a limit larger than every node advertises);
* ``hold_run(run_id)`` keeps a liveness signal for the run while this process executes
  it (kubernetes: a Lease), so a ``cleanup`` elsewhere leaves the run alone;
* ``recorded(handle)``, called through :func:`recorded` by every caller of ``observe``
  once the try's result is durable (the store row, the Trial status): only then may
  the backend let the try's remains go (kubernetes: drop the pod's finalizer and delete
  it). A crash between ``observe`` and the write must find the try still adoptable, or
  it is abandoned and run again, and its result is lost.

Each backend declares what it can do once, in ``abilities`` (:class:`BackendAbilities`: what it enforces,
isolates and runs, its optional methods and flags). The refusals read it (a run that needs what a backend
cannot give is refused before it starts: :func:`check_capabilities`, ``engine/faithful.py``), and so do
the provenance (``facts()``, a :class:`BackendFacts`, holds it) and the reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.backends.abilities import result_releaser
from orchestrator.errors import SpecError
from orchestrator.spec.backend import BackendAbilities, BackendFacts
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch


class Handle(BaseModel):
    """A submitted try. Serializable, so a controller can keep it in the API."""

    model_config = ConfigDict(frozen=True)

    name: str
    run_id: str
    trial_id: str
    try_index: int
    backend: str
    data: dict[str, Any] = Field(default_factory=dict)


class CleanupReport(BaseModel):
    removed: list[str] = Field(default_factory=list)
    kept: list[str] = Field(default_factory=list, description="left alone, with why (e.g. still running)")


@runtime_checkable
class Backend(Protocol):
    #: "local", "kubernetes", "docker"
    name: str
    #: what it can do, its enforcement mechanism included: declared once on the class, narrowed by an instance
    abilities: BackendAbilities

    def submit(self, launch: Launch) -> Handle: ...

    def observe(self, handle: Handle) -> TrialFacts | None: ...

    def adopt(self, launch: Launch) -> Handle | None: ...

    def cancel(self, handle: Handle) -> None: ...

    def wait(self, handles: Sequence[Handle], timeout: float) -> None: ...

    def cleanup(self, run_id: str | None = None, *, force: bool = False) -> CleanupReport:
        """What dead runs left behind (``run_id``: that run's, live or not); ``force`` only where
        ``abilities.force_cleanup``: also runs that still look alive."""
        ...

    def facts(self) -> BackendFacts:
        """Host or cluster facts for provenance (its abilities included)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Backend: ...

    def __exit__(self, *exc: object) -> None: ...


class ClosesOnExit:
    """``with backend:`` closes it however the block ends (every backend is one)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refuse_force(backend: Backend, force: bool) -> None:
    """A backend without ``force_cleanup`` told to force: it has no live run it could force out."""
    if force and not backend.abilities.force_cleanup:
        raise ValueError(f"the {backend.name} backend cannot force a cleanup (abilities.force_cleanup)")


def recorded(backend: Backend, handle: Handle) -> None:
    """Tell the backend the try's result is durable, so what holds it (a pod) may be released."""
    releaser = result_releaser(backend)
    if releaser is not None:
        releaser.recorded(handle)


def check_capabilities(backend: Backend, launches_need: dict[str, Any]) -> None:
    """Refuse a run that needs what the backend cannot give, before anything starts.

    ``launches_need`` summarises the run: ``gpus`` (max over tasks), ``network_off``
    (some try must run without network), ``without_tests`` (ids of golden tasks without tests/).
    """
    caps = backend.abilities
    if (bare := launches_need.get("without_tests")) and not caps.skips_verifier:
        raise SpecError(
            f"golden task(s) without tests/ ({', '.join(sorted(bare)[:5])}{', ...' if len(bare) > 5 else ''}) run on the "
            f"local backend only; the {backend.name} backend needs tests/test.sh (it may be `exit 0`)",
            field="tests/test.sh",
        )
    if launches_need.get("gpus", 0) > 0 and not caps.gpus:
        raise SpecError(
            f"tasks need {launches_need['gpus']} GPU(s) but the {backend.name} backend cannot give GPUs",
            field="environment.gpus",
        )
