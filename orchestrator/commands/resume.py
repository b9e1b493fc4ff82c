"""``headroom resume``: continue an interrupted run as it was recorded."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.commands.options import (
    RunName,
    enforcement_option,
    format_option,
    full_report_option,
    no_canary_option,
    run_argument,
    store_option,
)
from orchestrator.commands.sweep_console import REPORT_FORMATS, finish, run_and_show


def _resume(ctx: click.Context, run: RunName, store_path: Path, enforcement: str, fmt: str, no_canary: bool) -> None:
    from orchestrator.engine.entry import Resume

    store, run_id = run.open(store_path)
    with store:
        path = store.path
    finish(ctx, fmt, *run_and_show(Resume(run_id), path, enforcement=enforcement, canary=not no_canary))


@click.command()
@run_argument()
@store_option()
@enforcement_option("local backend: cgroup limits, or the rlimit fallback (each trial records its own)")
@format_option(REPORT_FORMATS, help="report printed when the run ends")
@full_report_option
@no_canary_option("skip re-checking enforcement before the rest runs")
@click.pass_context
def resume(ctx: click.Context, run: RunName, store_path: Path, enforcement: str, fmt: str, no_canary: bool) -> None:
    """Continue an interrupted run as it was recorded: finished trials are kept, the rest run.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """
    _resume(ctx, run, store_path, enforcement, fmt, no_canary)
