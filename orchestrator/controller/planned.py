"""An Experiment's plan as the controller holds it: a few bytes per planned trial.

``engine.plan`` returns one pydantic ``Trial`` per planned trial, about 1.2 KB each with its
``__dict__`` and fields-set; a controller reconciling a 100,000-trial Experiment would hold
120 MB of them for as long as the Experiment lives. :class:`CompactPlan` holds the same plan as
two arrays of small integers (which task, which configuration, by plan order) plus their
inverse, and spells a trial's id, seed or whole ``Trial`` only when asked. The order is drawn
by ``engine.plan.plan_order``, which ``engine.plan`` itself builds on, and ids and seeds come from
its ``trial_id`` and ``trial_seed``: the same trials, names and order as the CLI plans.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import overload

from orchestrator.engine.plan import plan_order, trial_id, trial_seed
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial


def _index_array(largest: int) -> array[int]:
    """The narrowest unsigned array type that holds 0..largest."""
    for code in ("B", "H", "I", "L", "Q"):
        if largest < 1 << (8 * array(code).itemsize):
            return array(code)
    raise OverflowError(largest)  # pragma: no cover - more planned trials than memory


class CompactPlan(Sequence[Trial]):
    """``engine.plan(experiment, tasks)`` without holding its Trials: indexing builds one.

    Reads by plan order (``trial_id(i)``, ``label(i)``, ``self[i]``) and by trial id
    (``order_of``, ``get``) cost a string format or parse; nothing per trial is kept but
    the indices.
    """

    __slots__ = (
        "seed",
        "task_ids",
        "configs",
        "labels",
        "_per_round",
        "_task",
        "_config",
        "_order",
        "_tasks",
        "_labels",
        "_planned",
    )

    def __init__(self, seed: int, task_ids: Sequence[str], configs: Sequence[ResourceConfig], attempts: int) -> None:
        self.seed = seed
        self.task_ids = tuple(task_ids)
        self.configs = tuple(configs)
        self.labels = tuple(c.label for c in self.configs)
        n_tasks, n_configs = len(self.task_ids), len(self.configs)
        self._per_round = n_tasks * n_configs  # each attempt round plans every (task, configuration) once
        total = self._per_round * attempts
        self._task = _index_array(max(0, n_tasks - 1))
        self._config = _index_array(max(0, n_configs - 1))
        self._order = _index_array(max(0, total - 1))  # (attempt, task, configuration) -> plan order
        self._order.frombytes(bytes(self._order.itemsize * total))
        planned: dict[str, int] = {}
        for order, (attempt, task, config) in enumerate(plan_order(seed, n_tasks, n_configs, attempts)):
            self._task.append(task)
            self._config.append(config)
            self._order[attempt * self._per_round + task * n_configs + config] = order
            planned[self.labels[config]] = planned.get(self.labels[config], 0) + 1
        self._planned = planned
        # Task ids are directory names (unique); labels are unique (the Experiment refuses a repeat).
        self._tasks = {t: i for i, t in enumerate(self.task_ids)}
        self._labels = {lab: i for i, lab in enumerate(self.labels)}

    @classmethod
    def of(cls, experiment: Experiment, tasks: Sequence[Task]) -> CompactPlan:
        return cls(experiment.seed, [t.id for t in tasks], experiment.configurations, experiment.attempts)

    # -- by plan order -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._task)

    def attempt(self, order: int) -> int:
        return order // self._per_round

    def task_id(self, order: int) -> str:
        return self.task_ids[self._task[order]]

    def config(self, order: int) -> ResourceConfig:
        return self.configs[self._config[order]]

    def label(self, order: int) -> str:
        return self.labels[self._config[order]]

    def trial_id(self, order: int) -> str:
        return trial_id(self.task_id(order), self.config(order), self.attempt(order))

    @overload
    def __getitem__(self, order: int) -> Trial: ...
    @overload
    def __getitem__(self, order: slice) -> list[Trial]: ...
    def __getitem__(self, order: int | slice) -> Trial | list[Trial]:
        if isinstance(order, slice):
            return [self[i] for i in range(*order.indices(len(self)))]
        if order < 0:
            order += len(self)
        if not 0 <= order < len(self):
            raise IndexError(order)
        task_id, attempt = self.task_id(order), self.attempt(order)
        return Trial(
            trial_id=self.trial_id(order),
            task_id=task_id,
            config=self.config(order),
            attempt=attempt,
            seed=trial_seed(self.seed, task_id, attempt),
            order=order,
        )

    def __iter__(self) -> Iterator[Trial]:
        return (self[i] for i in range(len(self)))

    # -- by trial id ---------------------------------------------------------------------------
    def order_of(self, tid: str) -> int | None:
        """The plan order of ``task:label:attempt``, or None when it is not a trial of this plan.

        A label holds no colon (``ResourceConfig.label``), so the last two colons split the id,
        whatever the task id holds; an attempt is spelt as ``trial_id`` spells an int.
        """
        parts = tid.rsplit(":", 2)
        if len(parts) != 3:
            return None
        task, label, attempt_text = parts
        t, c = self._tasks.get(task), self._labels.get(label)
        if t is None or c is None or not (attempt_text.isascii() and attempt_text.isdigit()):
            return None
        if len(attempt_text) > 1 and attempt_text[0] == "0":
            return None  # "01" is not how attempt 1 is spelt
        slot = int(attempt_text) * self._per_round + t * len(self.configs) + c
        return self._order[slot] if slot < len(self._order) else None

    def get(self, tid: str) -> Trial | None:
        order = self.order_of(tid)
        return None if order is None else self[order]

    def planned_by_label(self) -> dict[str, int]:
        """Planned trials per configuration label, in the order the labels first appear in the plan."""
        return dict(self._planned)
