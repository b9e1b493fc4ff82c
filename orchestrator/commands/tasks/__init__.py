"""``headroom tasks``: task sets. The group, and each of its commands from its own module."""

from __future__ import annotations

import click

from orchestrator.commands.tasks import image, push, taskset, trust


@click.group("tasks", short_help="task sets: validate, list, show, import, audit ...")
def tasks() -> None:
    """Task sets: validate, list, show and import them (Harbor task.toml, dataset.toml, legacy Terminal-Bench
    task.yaml); their provenance, duplicates and judges; push or build them for a cluster."""


for _command in (
    taskset.import_,
    taskset.list_,
    taskset.show,
    taskset.validate,
    trust.provenance_cmd,
    trust.audit_cmd,
    trust.judge_group,
    push.tasks_push,
    image.image,
):
    tasks.add_command(_command)
