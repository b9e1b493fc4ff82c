"""What the engine needs from a store: a small protocol over typed records.

SQLite (:mod:`orchestrator.store.sqlite`) is the embedded implementation; a
controller keeps the same records as Trial custom resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.trial import Trial, Verdict

TryStatus = Literal["running", "finished", "abandoned"]
RunStatus = Literal["planned", "running", "interrupted", "failed", "finished"]


@dataclass(frozen=True)
class TryRecord:
    """One try of a trial as the store holds it."""

    trial_id: str
    try_index: int
    status: TryStatus
    final: bool
    outcome: str | None = None
    reason: str | None = None


class RunStore(Protocol):
    def claim(self, run_id: str) -> None:
        """Take the run for execution; refuse while another live process executes it."""

    def release(self, run_id: str) -> None: ...

    def set_status(self, run_id: str, status: RunStatus) -> None: ...

    def planned(self, run_id: str) -> list[Trial]:
        """The run's trials in plan order."""

    def tries(self, run_id: str) -> dict[str, list[TryRecord]]:
        """Every try so far, by trial id, in try order."""

    def start_try(self, run_id: str, trial_id: str, try_index: int) -> None: ...

    def finish_try(
        self, run_id: str, trial_id: str, try_index: int, facts: TrialFacts, verdict: Verdict, final: bool
    ) -> bool:
        """Record a result; False (nothing written) if the try is no longer running."""

    def abandon_try(self, run_id: str, trial_id: str, try_index: int) -> bool: ...

    def abandon_running(self, run_id: str) -> int: ...
