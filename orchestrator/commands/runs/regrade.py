"""``headroom runs regrade``: re-grade a run's stored answers with another grader, as a new run."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.commands.console import out
from orchestrator.commands.options import RunName, format_option, run_argument, store_option


@click.command("regrade")
@run_argument()
@store_option()
@click.option(
    "--grader",
    "grader_file",
    required=True,
    type=click.Path(path_type=Path),
    help="TOML with a [grader] table for every task and/or [graders.<task_id>] tables",
)
@format_option(("table", "json"))
def regrade_cmd(run: RunName, store_path: Path, grader_file: Path, fmt: str) -> None:
    """Re-grade RUN's stored answers with another golden grader (no agent runs); show every flip.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """
    from rich.table import Table

    from orchestrator.engine.regrade import load_graders, regrade, source_run
    from orchestrator.report import comparison, document
    from orchestrator.store.sqlite import Store

    default, per_task = load_graders(grader_file)
    # The read checks first: a missing or foreign store is refused. No RUN: source_run picks the latest sweep
    # (not a regrade of it), so it is left to choose.
    if run.text is None:
        peek, run_id = Store.open_existing(store_path), None
    else:
        peek, run_id = run.open(store_path)
    path = peek.path
    peek.close()
    store = Store(path)
    source = source_run(store, run_id)
    result = regrade(store, source, default, per_task, str(grader_file))
    doc = document.comparison_document(store, source, store, result.run_id)
    if fmt == "json":
        click.echo(json.dumps({"regrade": result.summary(), "comparison": doc.to_dict()}, indent=2, allow_nan=False))
        return
    s = result.summary()
    out.print(
        f"re-graded {s['regraded_trials']} trials into run {result.run_id}; flips: "
        + (", ".join(f"{k}: {v}" for k, v in s["flips"].items()) or "none")
    )
    if result.flips:
        t = Table("task", "trial", "before", "after", title="flips, item by item")
        for f in result.flips:
            t.add_row(f.task_id, f.trial_id, f.before, f.after)
        out.print(t)
    comparison.print_table(doc, out)
