"""What the engine needs from a backend: run one trial and report raw facts."""

from __future__ import annotations

from typing import Any, Protocol

from orchestrator.plan import Trial
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.task import Task


class Backend(Protocol):
    #: "kubernetes", "cgroup-v1", "cgroup-v2" or "rlimit"
    enforcement: str

    def run_trial(self, trial: Trial, task: Task, experiment: Experiment) -> TrialFacts: ...

    def facts(self) -> dict[str, Any]:
        """Host or cluster facts for provenance."""
        ...

    def close(self) -> None: ...
