"""``headroom runs cleanup``: remove what a crashed headroom left behind, on any backend."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.commands.console import err
from orchestrator.commands.experiment_flags import build_experiment, refuse_ignored_flags
from orchestrator.commands.options import (
    RunName,
    backend_option,
    kube_context_option,
    namespace_option,
    run_argument,
    store_option,
)


@click.command("cleanup")
@run_argument()
@store_option(help="the results store a RUN given as a store file or FILE:RUN_ID is read from")
@backend_option()
@namespace_option("--backend kubernetes: namespace of the trial pods (default: 'default')")
@kube_context_option("--backend kubernetes: kubeconfig context")
@click.option(
    "--force", is_flag=True, help="--backend kubernetes: also remove runs whose Lease says they are still executing"
)
def cleanup(
    run: RunName,
    store_path: Path,
    backend_name: str,
    namespace: str | None,
    kube_context: str | None,
    force: bool,
) -> None:
    """Remove what a crashed headroom left behind: trial cgroups, work dirs, containers, pods.

    RUN: only what that run left behind, live or not (a run id, taken as written even when no local store
    holds it; a store file for its latest run; or FILE:RUN_ID). Default: every run whose process is gone.
    """
    from orchestrator.spec.experiment import ExperimentOverrides

    overrides = ExperimentOverrides(backend_name=backend_name, namespace=namespace, kube_context=kube_context)
    refuse_ignored_flags(backend_name, [*overrides.flags(), *(["--force"] if force else [])])
    from orchestrator.engine.entry import cleanup as clean

    experiment = build_experiment(overrides, {"tasks_dir": "."}, None)
    run_id = None if run.text is None else run.run_id(store_path)
    report = clean(experiment, run_id, force=force)
    for item in report.removed:
        click.echo(f"removed {item}")
    for item in report.kept:
        click.echo(f"kept    {item}")
    err.print(f"{len(report.removed)} removed, {len(report.kept)} kept")
