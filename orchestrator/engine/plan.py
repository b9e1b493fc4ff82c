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
from collections.abc import Iterator

from orchestrator.spec.experiment import Experiment
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial

__all__ = ["Trial", "plan", "plan_order", "trial_id", "trial_seed"]


def trial_id(task_id: str, config: ResourceConfig, attempt: int) -> str:
    return f"{task_id}:{config.label}:{attempt}"


def trial_seed(experiment_seed: int, task_id: str, attempt: int) -> int:
    h = hashlib.sha256(f"{experiment_seed}\0{task_id}\0{attempt}".encode()).digest()
    return int.from_bytes(h[:4], "big")


def plan_order(seed: int, n_tasks: int, n_configs: int, attempts: int) -> Iterator[tuple[int, int, int]]:
    """Each planned trial as (attempt, task index, configuration index), in plan order.

    The one place the order is drawn: ``plan`` builds its Trials from it, and the controller keeps
    these indices instead of Trials (orchestrator/controller/planned.py). A shuffle's permutation
    depends only on the list's length, so shuffling indices draws exactly what shuffling the items did.
    """
    rng = random.Random(seed)
    for attempt in range(attempts):
        round_tasks = list(range(n_tasks))
        rng.shuffle(round_tasks)
        for task in round_tasks:
            configs = list(range(n_configs))
            rng.shuffle(configs)
            for config in configs:
                yield attempt, task, config


def plan(experiment: Experiment, tasks: list[Task]) -> list[Trial]:
    trials: list[Trial] = []
    configs = list(experiment.configurations)
    for attempt, t, c in plan_order(experiment.seed, len(tasks), len(configs), experiment.attempts):
        task_id, config = tasks[t].id, configs[c]
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
