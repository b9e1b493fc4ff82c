"""The engine seams the controller drives, in one place: naming, launches, settling.

The controller is the engine's plan / launch / settle code under a reconcile loop; this
module is the only place it touches those seams, so the loop stays independent of how
a backend is built.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.classify import Verdict, classify
from orchestrator.plan import Trial as PlannedTrial
from orchestrator.redact import redact, secret_values
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.outcome import Outcome
from orchestrator.spec.task import Task

_DNS = re.compile(r"[^a-z0-9-]+")


def trial_name(run_id: str, trial_id: str, try_index: int) -> str:
    """A DNS-1123 name for one try, unique per run, trial and try (also the pod's name)."""
    digest = hashlib.sha256(f"{run_id}\0{trial_id}\0{try_index}".encode()).hexdigest()[:10]
    readable = _DNS.sub("-", trial_id.lower()).strip("-")[:40].strip("-")
    return f"{_DNS.sub('-', run_id.lower())[:20].strip('-')}-{readable}-t{try_index}-{digest}"


class TrialBackend(Protocol):
    """What the controller needs from a backend (see orchestrator.backends.base)."""

    def submit(self, launch: Any) -> Any: ...

    def observe(self, handle: Any) -> TrialFacts | None: ...

    def cancel(self, handle: Any) -> None: ...

    def cleanup(self, run_id: str) -> None: ...


@dataclass(frozen=True)
class Settled:
    facts: TrialFacts
    verdict: Verdict
    retry: bool


def settle(facts: TrialFacts, experiment: Experiment, finished_tries: int) -> Settled:
    """Classify, redact and decide on a retry, as execute() does for a local run.

    ``finished_tries`` counts this try too.
    """
    verdict = classify(facts, experiment.reward_threshold)
    clean = TrialFacts.model_validate(
        redact(facts.model_dump(mode="json"), secret_values(experiment.agent.env_passthrough))
    )
    retry = (
        verdict.outcome is Outcome.INFRA_ERROR
        and verdict.reason in experiment.retry.reasons
        and finished_tries <= experiment.retry.max_retries
    )
    return Settled(clean, verdict, retry)


def build_launch(experiment: Experiment, task: Task, trial: PlannedTrial, try_index: int, run_id: str,
                 name: str, labels: dict[str, str], owner: dict[str, Any]) -> Any:
    """The launch description of one try (the engine's, not the backend's)."""
    raise NotImplementedError("waiting for the engine's Launch seam (orchestrator/spec/launch.py)")
