"""The controller's compact plan is engine.plan's plan: the same trials, names, seeds, configurations and order."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.controller.planned import CompactPlan
from orchestrator.engine.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import Task
from tests.controller.test_progress import _tasks

MANY = ["1x-strict", "1.5x-strict", "2x/2x", "1x/3x", "2x/4x", "unbounded", "2x/unbounded", "task-band", "1x/10x"]


def _named(ids: list[str]) -> list[Task]:
    base = _tasks(1)[0]
    return [base.model_copy(update={"id": i, "path": f"/x/{i}"}) for i in ids]


CASES: list[tuple[str, dict[str, Any], list[Task]]] = [
    ("one attempt, one task, one configuration", {"configurations": ["1x-strict"], "attempts": 1}, _tasks(1)),
    ("the default sweep", {"configurations": ["1x-strict", "3x", "unbounded"], "attempts": 3}, _tasks(4)),
    ("many configurations", {"configurations": MANY, "attempts": 4, "seed": 11}, _tasks(6)),
    ("unbounded limits only", {"configurations": ["unbounded", "2x/unbounded"], "attempts": 5, "seed": -7}, _tasks(3)),
    (
        "many attempts, a large seed",
        {"configurations": ["1x-strict", "1x/2x"], "attempts": 300, "seed": 2**40},
        _tasks(2),
    ),
    (
        "task ids with colons and dots",
        {"configurations": ["3x", "unbounded"], "attempts": 2},
        _named(["a:b", "a", "x:1x-strict:0", "v1.2"]),
    ),
]


@pytest.mark.parametrize(("case", "fields", "tasks"), CASES, ids=[c[0] for c in CASES])
def test_the_compact_plan_yields_exactly_the_engine_plan(case: str, fields: dict[str, Any], tasks: list[Task]) -> None:
    experiment = Experiment(tasks_dir="/x", **fields)
    want = plan(experiment, tasks)
    got = CompactPlan.of(experiment, tasks)
    assert len(got) == len(want) == len(tasks) * len(experiment.configurations) * experiment.attempts
    assert list(got) == want  # every field of every Trial, in order: id, task, configuration, attempt, seed, order
    assert got[-1] == want[-1] and got[2:5] == want[2:5]
    for i, t in enumerate(want):
        assert (got.trial_id(i), got.task_id(i), got.label(i), got.attempt(i)) == (
            t.trial_id,
            t.task_id,
            t.config.label,
            t.attempt,
        )
        assert got.order_of(t.trial_id) == i and got.get(t.trial_id) == t
    labels = [t.config.label for t in want]
    assert got.planned_by_label() == {lab: labels.count(lab) for lab in dict.fromkeys(labels)}


def test_ids_outside_the_plan_are_not_found() -> None:
    experiment = Experiment(tasks_dir="/x", configurations=["1x-strict", "unbounded"], attempts=2)
    tasks = _named(["a:b", "c"])
    got = CompactPlan.of(experiment, tasks)
    assert got.order_of("a:b:unbounded:1") is not None and got.order_of("c:1x-strict:0") is not None
    for tid in [
        "c:1x-strict:2",  # an attempt past the plan
        "c:3x:0",  # a configuration it does not sweep
        "d:1x-strict:0",  # a task it does not hold
        "b:unbounded:0",  # a task id's tail is not a task id
        "c:1x-strict:01",
        "c:1x-strict:-1",
        "c:1x-strict:+1",
        "c:1x-strict:١",  # a digit, but not one trial_id writes
        "c:1x-strict",
        "c",
        "",
    ]:
        assert got.order_of(tid) is None, tid
        assert got.get(tid) is None
    with pytest.raises(IndexError):
        got[len(got)]


def test_it_keeps_indices_not_trials() -> None:
    """What makes 100,000 planned trials cheap: per trial only narrow integers are held."""
    experiment = Experiment(tasks_dir="/x", configurations=[ResourceConfig.parse(c) for c in MANY], attempts=200)
    got = CompactPlan.of(experiment, _tasks(10))
    assert len(got) == 18_000
    arrays = [getattr(got, s) for s in ("_task", "_config", "_order")]
    assert [a.itemsize for a in arrays] == [1, 1, 2] and all(len(a) == len(got) for a in arrays)
