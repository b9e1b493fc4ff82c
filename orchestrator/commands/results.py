"""``headroom results import``: Harbor jobs and Terminal-Bench runs into the store, as first-class runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from orchestrator.commands.console import err, out
from orchestrator.errors import UserError
from orchestrator.importers import results as importer
from orchestrator.importers.outcomes import parse_overrides
from orchestrator.report.outcomes import OUTCOME_HEADERS, count_cells
from orchestrator.report.text import pct
from orchestrator.store.sqlite import Store

DEFAULT_STORE = Path("headroom-results/headroom.db")


def print_summary(summary: dict[str, Any], run_id: str, store: Path) -> None:
    for s in summary["sources"]:
        out.print(f"[bold]{escape(s['format'])}[/] {escape(s['path'])}: {s['trials_read']} trials read, "
                  f"{s['trials_imported']} imported; {s['harness']} {escape(s['harness_version'] or '(version unrecorded)')}; "
                  f"{s['files_read']} files digested")
        for prob in s["problems"]:
            out.print(f"  [yellow]note[/] {escape(prob)}", soft_wrap=True)
        for c in s["accuracy_checks"]:
            agrees = {True: "[green]agrees[/]", False: "[red]DISAGREES[/]", None: "—"}[c["agrees"]]
            rep, rec = pct(c["reported"]), pct(c["recomputed"])  # "agrees" is decided on the exact values
            out.print(f"  its own score {escape(c['reported_as'])}: {rep}; recomputed from the imported trials "
                      f"({escape(s['source_rule'])}): {rec} — {agrees}", soft_wrap=True)
    for d in summary["duplicates_skipped"]:
        out.print(f"[yellow]duplicate skipped[/]: {escape(d['trial_name'])} in {escape(d['file'])} "
                  f"(first seen in {escape(d['first_file'])})", soft_wrap=True)
    t = Table(title="Mapping rules applied (trials)", title_justify="left")
    t.add_column("rule", overflow="fold")
    t.add_column("trials", justify="right")
    for rule, n in summary["rules"].items():
        t.add_row(escape(rule), str(n))
    out.print(t)
    if summary["unmapped"]:
        out.print("[bold yellow]unmapped[/] (counted as harness_error(orchestrator_error); map with "
                  "--map TYPE=OUTCOME[:REASON]): " + ", ".join(f"{escape(k)} ×{v}" for k, v in summary["unmapped"].items()),
                  soft_wrap=True)
    if summary["timeouts_the_verifier_passed"]:
        out.print(f"{summary['timeouts_the_verifier_passed']} trial(s) timed out but the verifier passed them: "
                  "headroom counts them as timeout, the source as passed.", soft_wrap=True)
    t = Table(title="Configurations (in this order)", title_justify="left")
    for h in ("label", "trials", *OUTCOME_HEADERS.values(), "headline"):
        t.add_column(h, justify="left" if h == "label" else "right")
    for lab in summary["labels"]:
        c = summary["outcomes_by_label"][lab]
        h = summary["headline_by_label"][lab]
        t.add_row(escape(lab), str(sum(c.values())), *count_cells(c), pct(h))
    out.print(t)
    out.print(f"run {run_id} written to {store}. Next: headroom report --store {store} --run-id {run_id}")


@click.group("results")
def results() -> None:
    """Bring results produced elsewhere (Harbor jobs, Terminal-Bench runs) into a headroom store."""


@results.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=DEFAULT_STORE, show_default=True)
@click.option("--name", help="run name (default: the first source's directory name)")
@click.option("--label", "labels", multiple=True,
              help="configuration label for each source, in order (default: agent@model from the source)")
@click.option("--map", "mappings", multiple=True, metavar="TYPE=OUTCOME[:REASON]",
              help="map a Harbor exception type or Terminal-Bench failure mode (repeatable)")
@click.option("--reward-threshold", type=float, default=1.0, show_default=True, help="a reward at or above this passes")
@click.option("--separate", is_flag=True, help="one run per source instead of one run holding them all")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def import_(paths: tuple[Path, ...], store_path: Path, name: str | None, labels: tuple[str, ...],
            mappings: tuple[str, ...], reward_threshold: float, separate: bool, fmt: str) -> None:
    """Import Harbor job directories and Terminal-Bench run directories (PATHS) as a run whose
    configurations are the agents/models found, in the order given."""
    overrides = parse_overrides(mappings)
    sources = importer.read_sources(list(paths), threshold=reward_threshold, overrides=overrides)
    if separate and labels and len(labels) != len(sources):
        raise UserError(f"--label given {len(labels)} times for {len(sources)} sources; give one per source",
                        field="--label")
    groups = [[s] for s in sources] if separate else [sources]
    label_groups = [[lab] for lab in labels] if (separate and labels) else [list(labels)] * len(groups)
    store = Store(store_path)
    try:
        done = []
        for group, labs in zip(groups, label_groups):
            plan = importer.plan(group, threshold=reward_threshold, labels=labs or None)
            run_name = name or group[0].path.name
            run, tasks, trials = importer.records(plan, name=run_name)
            run_id = store.import_run(run, tasks, trials)
            summary = plan.summary()
            done.append({"run_id": run_id, "summary": summary})
            if fmt == "table":
                print_summary(summary, run_id, store_path)
    finally:
        store.close()
    if fmt == "json":
        click.echo(json.dumps(done, indent=2, default=str))
    else:
        err.print(f"{len(done)} run(s) imported")
