"""Expand an experiment into trials, in a seeded block-randomized order.

Trial ids are stable (``task:config:attempt``), so a resumed run recognises its
own trials. Order: attempt rounds run one after another; inside a round, tasks
come in a shuffled order and each task's configurations in a shuffled order.
Every consecutive block of ``len(configurations)`` trials therefore holds each
configuration once, so time-of-day drift (API latency, node load) lands on all
configurations alike instead of on whichever ran last.

A trial's seed depends on the task and the attempt but not on the configuration
(common random numbers): attempt 3 of a task sees the same seed under 1x-strict
and under unbounded, so a paired comparison isolates the configuration.
"""

from __future__ import annotations

import hashlib
import random

from orchestrator.spec.experiment import Experiment
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial

__all__ = ["Trial", "plan", "trial_id", "trial_seed"]


def trial_id(task_id: str, config: ResourceConfig, attempt: int) -> str:
    return f"{task_id}:{config.label}:{attempt}"


def trial_seed(experiment_seed: int, task_id: str, attempt: int) -> int:
    h = hashlib.sha256(f"{experiment_seed}\0{task_id}\0{attempt}".encode()).digest()
    return int.from_bytes(h[:4], "big")


def plan(experiment: Experiment, tasks: list[Task]) -> list[Trial]:
    rng = random.Random(experiment.seed)
    trials: list[Trial] = []
    task_ids = [t.id for t in tasks]
    for attempt in range(experiment.attempts):
        round_tasks = task_ids[:]
        rng.shuffle(round_tasks)
        for task_id in round_tasks:
            configs = list(experiment.configurations)
            rng.shuffle(configs)
            for config in configs:
                trials.append(
                    Trial(
                        trial_id=trial_id(task_id, config, attempt),
                        task_id=task_id,
                        config=config,
                        attempt=attempt,
                        seed=trial_seed(experiment.seed, task_id, attempt),
                        order=len(trials),
                    )
                )
    return trials
