"""``headroom demo``: sweep the bundled demo tasks with a scripted agent and print the report."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.commands.console import err
from orchestrator.commands.experiment_flags import build_experiment
from orchestrator.commands.options import (
    DEFAULT_STORE,
    attempts_option,
    concurrency_option,
    enforcement_option,
    seed_option,
    store_option,
)
from orchestrator.commands.sweep_console import run_and_show

BUNDLED_TASKS = Path(__file__).resolve().parent.parent.parent / "tasks"


#: The demo's sweep: 1.5x dropped and two attempts added, so the same ~500 trials show the spike OOMs removed at
#: 2x significantly (one-sided exact test) -- the limit the calibration should publish -- before 3x, where the
#: headroom-dependent tasks switch strategy and the score moves (docs/resource-specs.md).
DEMO_MULTIPLIERS, DEMO_ATTEMPTS = ("1", "2", "3", "unbounded"), 12


#: The demo's first line: its agent is a script and the dollar figures its tasks write are made up, so no one reads
#: the report as a measurement of a model (tasks/README.md).
DEMO_NOTICE = (
    "demo: the agent is scripted (the bundled tasks' own solutions, no model is called); its tokens and dollar "
    "costs are synthetic numbers from a scripted model, not real spend"
)


@click.command()
@store_option()
@attempts_option(default=DEMO_ATTEMPTS, most=1000)
@concurrency_option(most=64)
@seed_option()
@enforcement_option()
@click.pass_context
def demo(ctx: click.Context, store_path: Path, attempts: int, concurrency: int, seed: int, enforcement: str) -> None:
    """Sweep the bundled demo tasks (480 trials: 2 to 6 minutes on 2 cores) and print the report.

    Its agent is scripted and its costs are synthetic. The run goes to the default store, so `headroom runs` lists it.
    """
    from orchestrator.spec.experiment import ExperimentOverrides

    err.print(DEMO_NOTICE, soft_wrap=True, markup=False)

    experiment = build_experiment(
        ExperimentOverrides(attempts=attempts, concurrency=concurrency, seed=seed),
        {
            "name": "demo",
            "tasks_dir": str(BUNDLED_TASKS),
            "configurations": list(DEMO_MULTIPLIERS),
            "agent": {"kind": "oracle"},
            "model": {"name": "oracle"},
        },
        None,
    )
    store, rid, interrupted = run_and_show(experiment, store_path, enforcement=enforcement)
    from orchestrator.commands.report import print_report

    print_report(store, rid, "table")
    listing = "headroom runs" if store_path == DEFAULT_STORE else f"headroom runs --store {store_path}"
    err.print(
        f"store: {store_path}   list: {listing}   more: headroom report {store_path}:{rid} -o report.html (or .md, .json)",
        soft_wrap=True,
        markup=False,
    )
    if interrupted:
        ctx.exit(130)
