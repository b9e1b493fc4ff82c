"""``headroom tasks push``: a task set into a cluster, as content-addressed ConfigMaps."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.commands.console import err
from orchestrator.commands.kube import Kube, kube_options


@click.command("push")
@click.argument("tasks_dir", type=click.Path(path_type=Path))
@kube_options
def tasks_push(tasks_dir: Path, kubeconfig: Path | None, context: str | None, namespace: str | None) -> None:
    """Store the tasks of TASKS_DIR as content-addressed ConfigMaps; prints the task set's name."""
    from orchestrator.controller import tasksets

    kube = Kube(kubeconfig, context, namespace)
    result = kube.call("push tasks", tasksets.push, kube.core, kube.namespace, tasks_dir)
    err.print(
        f"{result.tasks} tasks -> {result.created} ConfigMaps created, {result.existing} already there "
        f"(namespace {kube.namespace})"
    )
    click.echo(result.name)
