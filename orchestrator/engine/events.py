"""What a sweep tells the person running it, as values: the engine reports, a front end renders.

:func:`orchestrator.engine.entry.run_sweep` hands each event to its ``on_event`` callback in the order
things happen; it never prints. The CLI renders them on the terminal (orchestrator/commands/sweep_console.py);
a caller that wants silence passes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend
    from orchestrator.engine.execute import ExecutionSummary
    from orchestrator.spec.provenance import CanaryVerdict, OracleCheck, Provenance
    from orchestrator.spec.trial import Trial, Verdict


@dataclass(frozen=True)
class ShortSecret:
    """An --agent-env variable whose value is short enough to be wiped wherever it appears, as a secret."""

    name: str
    shorter_than: int


@dataclass(frozen=True)
class NothingToResume:
    """A resume found every planned trial finished: nothing ran, the run is unchanged."""

    run_id: str
    trials: int


@dataclass(frozen=True)
class Resuming:
    run_id: str
    store_path: Path


@dataclass(frozen=True)
class EnforcementChanged:
    """A resumed run continues under a different enforcement than it started under."""

    started_under: str
    now: str


@dataclass(frozen=True)
class BackendReady:
    """The run's backend is up: what it enforces, how it isolates, its notes."""

    backend: Backend


@dataclass(frozen=True)
class OracleCheckStarting:
    tasks: int
    configurations: int


@dataclass(frozen=True)
class OracleCheckDone:
    """The oracle check's record (engine/oracle_check.py) and its lines, one per task whose oracle fails."""

    record: OracleCheck
    lines: list[str]


@dataclass(frozen=True)
class RunRecorded:
    """A new run is written: its provenance (the canary's verdict, overcommit warnings) and its size."""

    run_id: str
    provenance: Provenance
    tasks: int
    configurations: int
    attempts: int
    store_path: Path


@dataclass(frozen=True)
class CanaryRerun:
    """A resume's canary verdict (appended to the run's provenance as ``canary_resumed``)."""

    verdict: CanaryVerdict


@dataclass(frozen=True)
class TriesStarting:
    """The loop over tries begins; :class:`TriesEnded` follows, whatever happens."""


@dataclass(frozen=True)
class Pending:
    total: int
    done: int


@dataclass(frozen=True)
class TryDone:
    trial: Trial
    verdict: Verdict
    final: bool


@dataclass(frozen=True)
class TriesEnded:
    pass


@dataclass(frozen=True)
class SessionEnded:
    """This session is over (finished, interrupted or paused): what ran, and how to continue."""

    run_id: str
    store_path: Path
    summary: ExecutionSummary


Event = (
    ShortSecret
    | NothingToResume
    | Resuming
    | EnforcementChanged
    | BackendReady
    | OracleCheckStarting
    | OracleCheckDone
    | RunRecorded
    | CanaryRerun
    | TriesStarting
    | Pending
    | TryDone
    | TriesEnded
    | SessionEnded
)
EventSink = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """The default sink: a caller that does not listen."""
