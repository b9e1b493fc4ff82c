"""The engine seams the controller drives, in one place: names, launches, settling.

The controller is the engine's plan / launch / settle code under a reconcile loop; this
module is where it meets those seams (orchestrator.engine.launch, orchestrator.engine.settle and the
backend protocol of orchestrator.backends.base).
"""

from __future__ import annotations

from orchestrator.agentio.redact import secret_values
from orchestrator.backends.base import Backend, Handle
from orchestrator.engine.launch import build_launch, spec_digest
from orchestrator.engine.settle import Settlement, settle
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch
from orchestrator.spec.names import launch_name
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial

__all__ = ["Backend", "Handle", "Launch", "Settlement", "launch_for", "settle_try", "trial_name"]


def trial_name(run_id: str, trial_id: str, try_index: int) -> str:
    """A try's name: its Trial resource's and its pod's (DNS-1123, deterministic)."""
    return launch_name(run_id, trial_id, try_index)


def launch_for(
    experiment: Experiment, task: Task, trial: Trial, try_index: int, run_id: str, digest: str, labels: dict[str, str]
) -> Launch:
    """The engine's launch of one try, with the controller's selector labels added."""
    launch = build_launch(run_id, trial, try_index, task, experiment, digest)
    return launch.model_copy(update={"labels": {**launch.labels, **labels}})


def experiment_digest(experiment: Experiment) -> str:
    return spec_digest(experiment)


def settle_try(facts: TrialFacts, experiment: Experiment, task: Task, finished_before: int) -> Settlement:
    """Classify (or grade a golden task), redact and decide on a retry, by the rules a local run uses."""
    return settle(
        facts,
        reward_threshold=experiment.reward_threshold,
        retry=experiment.retry,
        finished_before=finished_before,
        secrets=secret_values(experiment.agent.env_passthrough),
        grader=task.spec.grader,
    )
