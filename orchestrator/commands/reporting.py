"""Reading runs: the ``runs`` group (``runs list``, ``runs compare``), ``report`` and ``schema``."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.commands.console import err, out
from orchestrator.commands.groups import ListingGroup
from orchestrator.commands.options import (
    RunName,
    format_option,
    json_option,
    old_run_id_option,
    output_format,
    output_option,
    rules_option,
    run_argument,
    store_option,
    take_old_run_id,
)
from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.store.sqlite import RunInfo, Store

REPORT_FORMATS = ("table", "json", "markdown", "html")


def print_report(
    store: Store,
    run_id: str | None,
    fmt: str,
    output: Path | None = None,
    reference: str | None = None,
    rules: str | None = None,
    margin: float | None = None,
) -> None:
    from orchestrator.commands.outputs import write_file
    from orchestrator.report import document

    doc = document.build(store, run_id, reference=reference, rules=rules, margin=margin)
    if fmt == "table":
        from orchestrator.report import terminal

        if output is None:
            terminal.print_report(doc, out)
            return
        # The same table as on a terminal, as plain text (no colour codes) at a fixed width.
        buf = io.StringIO()
        terminal.print_report(
            doc, Console(file=buf, width=160, highlight=False, color_system=None, force_terminal=False, soft_wrap=False)
        )
        text = buf.getvalue()
    else:
        from orchestrator.report import render

        text = render.render_text(doc, fmt)
    if output:
        write_file(output, text, "--output")
        err.print(f"report written to {output} ({fmt})")
    else:
        click.echo(text)


@click.command()
@run_argument()
@store_option()
@old_run_id_option
@format_option(
    REPORT_FORMATS,
    default=None,
    help="table, json, markdown or html (default: what --output's extension says, else table)",
)
@output_option("write to this file instead of stdout; .html, .md and .json choose the format")
@click.option(
    "--reference",
    help="reference configuration for paired tests, any label in the run "
    "(default: 1x-strict in a sweep, the first label in an import)",
)
@rules_option()
@click.option(
    "--margin",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="calibration: equivalence margin of the agent score, as a fraction (default 0.04 = 4 points)",
)
def report(
    run: RunName,
    store_path: Path,
    old_run_id: str | None,
    fmt: str | None,
    output: Path | None,
    reference: str | None,
    rules: str,
    margin: float | None,
) -> None:
    """Report a run: outcomes, rates with Wilson 95% intervals, paired and trend tests, calibration, provenance.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """
    from pydantic import ValidationError

    from orchestrator.commands.outputs import check_file
    from orchestrator.spec.resources import LabelError, ResourceConfig

    run = take_old_run_id(run, old_run_id)
    fmt = output_format(fmt, output, REPORT_FORMATS)
    if fmt == "html" and output is None:
        raise UserError("--format html needs --output FILE", field="--output")
    if output is not None:
        check_file(output, "--output")
    store, run_id = run.open(store_path)
    if reference is not None:
        finished = store.finished_labels(run_id)
        if reference not in finished:  # any label in the store is taken as written; else a resource spelling
            try:
                reference = ResourceConfig.parse(reference).label
            except (LabelError, ValidationError):
                raise UserError(
                    f"unknown configuration label {reference!r} (has: {', '.join(sorted(finished)) or 'none'})",
                    field="--reference",
                ) from None
        if reference not in finished:
            raise UserError(
                f"run has no finished trials under {reference!r} (has: {', '.join(sorted(finished)) or 'none'})",
                field="--reference",
            )
    print_report(store, run_id, fmt, output, reference, rules, margin)


@click.command("compare")
@run_argument(required=True, name="run_a")
@run_argument(required=True, name="run_b")
@store_option()
@format_option(("table", "json", "markdown"))
@rules_option()
def compare(run_a: RunName, run_b: RunName, store_path: Path, fmt: str, rules: str) -> None:
    """Paired comparison of two runs on the tasks and configurations both hold (different agents or models).

    RUN_A and RUN_B are run ids in --store, store files (their latest run), or FILE:RUN_ID.
    """
    from orchestrator.report import comparison, document

    sa, ra = run_a.open(store_path)
    sb, rb = run_b.open(store_path)
    doc = document.comparison_document(sa, ra, sb, rb, rules=rules)
    if fmt == "json":
        click.echo(doc.to_json())
    elif fmt == "markdown":
        click.echo(comparison.markdown(doc))
    else:
        comparison.print_table(doc, out)


def liveness(info: RunInfo, last_activity: str | None) -> tuple[str, str | None]:
    """(status as shown, why): a run recorded as running whose process is gone is shown as interrupted.

    The store records the executing process as host:pid (``Store.claim``). On this host a dead pid
    proves the run stopped (``kill -9``, a crash, a reboot); on another host it cannot be checked,
    so the run shows as running there, with its last try's time as the heartbeat.
    """
    from orchestrator.processes import pid_alive

    if info.status not in ("running", "planned"):
        return info.status, None
    if info.owner is None:
        return ("interrupted", "no process holds it") if info.status == "running" else (info.status, None)
    host, _, pid = info.owner.rpartition(":")
    if host == socket.gethostname():
        if pid.isdigit() and pid_alive(int(pid)):
            return "running", f"pid {pid}"
        return "interrupted", f"its process (pid {pid}) is gone"
    return "running", f"on {host} (pid {pid}), cannot check from here; last try {last_activity or 'none yet'}"


def agent_label(agent: dict[str, Any]) -> str | None:
    """The agent as a person would name it: its name, else its command (shortened), else its kind."""
    if agent.get("name"):
        return str(agent["name"])
    if agent.get("kind") == "command" and agent.get("command"):
        cmd = " ".join(str(agent["command"]).split())
        return cmd if len(cmd) <= 32 else cmd[:31] + "…"
    return agent.get("kind")


def run_rows(store: Store) -> list[dict[str, Any]]:
    summaries = store.run_summaries()
    rows = []
    for r in store.runs():
        s = summaries.get(r.run_id, {"planned": 0, "final": 0, "passed": 0, "last_activity": None})
        status, why = liveness(r, s.get("last_activity"))
        agent = r.spec.get("agent") or {}
        model = r.spec.get("model") or {}
        rows.append(
            {
                "run_id": r.run_id,
                "name": r.name,
                "status": status,
                "status_detail": why,
                "recorded_status": r.status,
                "agent": agent_label(agent),
                "model": model.get("name"),
                "backend": r.backend,
                "enforcement": r.enforcement,
                "trials_planned": s["planned"],
                "trials_finished": s["final"],
                "passed": s["passed"],
                # passed / finished, an infra error counted as a failure: the headline rule, on what has finished
                "score": s["passed"] / s["final"] if s["final"] else None,
                "created_at": r.created_at,
                "finished_at": r.finished_at,
                "last_activity": s.get("last_activity"),
                "owner": r.owner,
            }
        )
    return rows


@click.group("runs", cls=ListingGroup, short_help="the runs in a store: list, compare, calibrate, bundle ...")
def runs() -> None:
    """The runs in a store: list them (`headroom runs` alone lists), compare two, calibrate, re-grade, bundle.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """


@runs.command("list")
@store_option()
@json_option
def list_runs(store_path: Path, as_json: bool) -> None:
    """List the runs in a store: name, status, agent, model, trials and score.

    score is passed / finished trials with an infra error counted as a failure (`headroom report` gives its
    interval and the other rules). A run whose process is gone shows as interrupted: `headroom resume RUN`.
    """
    from orchestrator.store.sqlite import Store

    store = Store.open_existing(store_path)
    try:
        rows = run_rows(store)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"store": str(store_path), "runs": rows}, indent=2))
        return
    if not rows:
        err.print(f"no runs in {store_path}")
        return
    t = Table(box=None, pad_edge=False)
    for col in ("run", "name", "status", "agent", "model", "trials", "score", "backend", "started"):
        t.add_column(col, justify="right" if col in ("trials", "score") else "left", overflow="fold")
    colour = {"finished": "green", "interrupted": "yellow", "failed": "red", "running": "cyan"}
    for r in rows:
        status = f"[{colour.get(r['status'], 'white')}]{r['status']}[/]"
        t.add_row(
            r["run_id"],
            escape(r["name"]),
            status,
            escape(str(r["agent"] or "-")),
            escape(str(r["model"] or "-")),
            f"{r['trials_finished']}/{r['trials_planned']}",
            "-" if r["score"] is None else f"{r['score']:.1%}",
            escape(r["backend"]),
            (r["created_at"] or "")[:19].replace("T", " "),
        )
    out.print(t)
    for r in rows:
        if r["status"] == "interrupted" and r["recorded_status"] != "interrupted":
            err.print(
                f"{r['run_id']}: recorded as {r['recorded_status']}, but {r['status_detail']}; continue it with "
                f"headroom resume {store_path}:{r['run_id']}",
                soft_wrap=True,
                markup=False,
            )


@click.command()
@click.argument("what", type=click.Choice(["experiment", "task", "evidence"]))
def schema(what: str) -> None:
    """Print the JSON Schema of an experiment spec, a task.toml, or a try's stored evidence (versioned)."""
    if what == "evidence":
        from orchestrator.spec.facts import evidence_schema

        click.echo(json.dumps(evidence_schema(), indent=2))
        return
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.task import TaskSpec

    model = Experiment if what == "experiment" else TaskSpec
    click.echo(json.dumps(model.model_json_schema(), indent=2))
