"""Reading runs: the ``runs`` group (``runs list``, ``runs compare``), ``report`` and ``schema``."""

from __future__ import annotations

import difflib
import io
import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from orchestrator.commands.console import err, out
from orchestrator.commands.groups import ListingGroup
from orchestrator.commands.options import (
    RunName,
    format_option,
    json_option,
    output_format,
    output_option,
    rules_option,
    run_argument,
    store_option,
)
from orchestrator.errors import UserError
from orchestrator.report.labels import agent_label
from orchestrator.report.safe import terminal_text, visible_controls

if TYPE_CHECKING:
    from orchestrator.store.sqlite import RunInfo, Store

REPORT_FORMATS = ("table", "json", "markdown", "html")
#: The listing's headline column, and what each line of it is (printed under the table).
HEADLINE_COLUMN = "headline per configuration"
HEADLINE_NOTE = (
    "each headline line: configuration: score with infra errors counted as failures [Wilson 95%, these tasks], "
    "infra-error rate; `headroom report RUN` has the rest"
)


def print_report(
    store: Store,
    run_id: str | None,
    fmt: str,
    output: Path | None = None,
    reference: str | None = None,
    rules: str | None = None,
    margin: float | None = None,
    *,
    compact: bool = False,
) -> None:
    """The report in ``fmt``; ``compact``: a table holds only the summary (what a sweep prints when it ends)."""
    from orchestrator.commands.outputs import write_file
    from orchestrator.report import document

    doc = document.build(store, run_id, reference=reference, rules=rules, margin=margin)
    if fmt == "table":
        from orchestrator.report import terminal

        if output is None:
            if compact:
                terminal.print_compact(doc, out, f"headroom report {store.path}:{run_id}")
                return
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
    from orchestrator.errors import LabelError
    from orchestrator.spec.resources import ResourceConfig

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
@click.option(
    "--label",
    "labels",
    multiple=True,
    help="what to call A's agent, then B's (give it once or twice; default: each agent's name)",
)
def compare(run_a: RunName, run_b: RunName, store_path: Path, fmt: str, rules: str, labels: tuple[str, ...]) -> None:
    """Paired comparison of two runs on the tasks and configurations both hold (different agents or models):
    scores and their tests, cost, tokens and latency per configuration, and the cost/score front.

    RUN_A and RUN_B are run ids in --store, store files (their latest run), or FILE:RUN_ID.
    """
    from orchestrator.report import comparison, document

    if len(labels) > 2 or any(not lab.strip() for lab in labels):
        raise UserError("give --label once or twice (A's agent, then B's), each non-empty", field="--label")
    sa, ra = run_a.open(store_path)
    sb, rb = run_b.open(store_path)
    doc = document.comparison_document(sa, ra, sb, rb, rules=rules)
    for side, lab in zip((doc.a, doc.b), labels):
        side.label = lab
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


def config_rows(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Per run, per configuration (resource levels from the strictest limit up; labels in plan order): the headline (passed / finished, an infra error counted as a
    failure) with its Wilson 95% interval on these tasks, and the infra-error rate, on what has finished.

    WHY per configuration: a run's configurations are different resources, agents or models; one pooled score
    over them answers no question anyone asks."""
    import numpy as np

    from orchestrator.stats.proportions import wilson_many

    rows = store.db.execute(
        """SELECT t.run_id, t.config_label, COUNT(*) AS n, SUM(e.outcome = 'passed') AS passed,
                  SUM(e.outcome = 'infra_error') AS infra
           FROM executions e JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
           WHERE e.final = 1 GROUP BY t.run_id, t.config_label
           ORDER BY t.run_id, MIN(t.limit_multiplier) IS NULL, MIN(t.limit_multiplier), MIN(t.request_multiplier),
                    MIN(t.ord)"""
    ).fetchall()
    if not rows:
        return {}
    n = np.array([int(r["n"]) for r in rows])
    scores = wilson_many(np.array([int(r["passed"] or 0) for r in rows]), n)
    infra = wilson_many(np.array([int(r["infra"] or 0) for r in rows]), n)
    out: dict[str, list[dict[str, Any]]] = {}
    for r, sc, inf in zip(rows, scores, infra):
        out.setdefault(r["run_id"], []).append(
            {
                "label": r["config_label"],
                "trials_finished": int(r["n"]),
                "passed": int(r["passed"] or 0),
                "infra_errors": int(r["infra"] or 0),
                "score": sc.estimate,
                "score_low": sc.low,
                "score_high": sc.high,
                "infra_error_rate": inf.estimate,
            }
        )
    return out


def headline_cell(configs: list[dict[str, Any]]) -> str:
    """``1x-strict: 50.0% [15.0, 85.0], infra 0.0%`` per line: the headline of each configuration, labelled."""
    return "\n".join(
        f"{terminal_text(c['label'])}: {100 * c['score']:.1f}% [{100 * c['score_low']:.1f}, "
        f"{100 * c['score_high']:.1f}], infra {100 * c['infra_error_rate']:.1f}%"
        for c in configs
    )


def run_rows(store: Store) -> list[dict[str, Any]]:
    summaries = store.run_summaries()
    per_config = config_rows(store)
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
                "model": model.get("name") or ", ".join(str(m) for m in model.get("names") or []) or None,
                "backend": r.backend,
                "enforcement": r.enforcement,
                "trials_planned": s["planned"],
                "trials_finished": s["final"],
                "passed": s["passed"],
                # passed / finished over every configuration pooled (kept for scripts that read it); the headline
                # is per configuration, in "configurations"
                "score": s["passed"] / s["final"] if s["final"] else None,
                "configurations": per_config.get(r.run_id, []),
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
    """List the runs in a store: name, status, agent, model, trials and the headline of each configuration.

    The headline is passed / finished trials with an infra error counted as a failure, per configuration, with its
    Wilson 95% interval on these tasks and the infra-error rate (`headroom report` gives the new-tasks interval
    and the other rules). A run whose process is gone shows as interrupted: `headroom resume RUN`.
    """
    from orchestrator.store.sqlite import Store

    with Store.open_existing(store_path) as store:
        rows = run_rows(store)
    if as_json:
        click.echo(json.dumps({"store": str(store_path), "runs": rows}, indent=2))
        return
    if not rows:
        err.print(f"no runs in {store_path}")
        return
    t = Table(box=None, pad_edge=False)
    for col in ("run", "name", "status", "agent", "model", "trials", HEADLINE_COLUMN, "backend", "started"):
        t.add_column(col, justify="right" if col == "trials" else "left", overflow="fold")
    colour = {"finished": "green", "interrupted": "yellow", "failed": "red", "running": "cyan"}
    for r in rows:
        status = f"[{colour.get(r['status'], 'white')}]{terminal_text(r['status'])}[/]"
        t.add_row(
            terminal_text(r["run_id"]),
            terminal_text(r["name"]),
            status,
            terminal_text(str(r["agent"] or "-")),
            terminal_text(str(r["model"] or "-")),
            f"{r['trials_finished']}/{r['trials_planned']}",
            headline_cell(r["configurations"]) or "-",
            terminal_text(r["backend"]),
            (r["created_at"] or "")[:19].replace("T", " "),
        )
    out.print(t)
    if any(r["configurations"] for r in rows):
        out.print(HEADLINE_NOTE, markup=False)
    for r in rows:
        if r["status"] == "interrupted" and r["recorded_status"] != "interrupted":
            err.print(
                visible_controls(
                    f"{r['run_id']}: recorded as {r['recorded_status']}, but {r['status_detail']}; continue it with "
                    f"headroom resume {store_path}:{r['run_id']}"
                ),
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


def trial_rows(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Every planned trial of a run with its latest try's outcome and reason (the final one once settled)."""
    from orchestrator.spec.outcome import OUTCOME_SQL, REASON_SQL

    rows = store.db.execute(
        f"""SELECT t.trial_id, t.task_id, t.config_label, t.attempt,
                  (SELECT COUNT(*) FROM executions x WHERE x.run_id = t.run_id AND x.trial_id = t.trial_id) AS tries,
                  e.status, {OUTCOME_SQL} AS outcome, {REASON_SQL} AS reason, e.duration_s
           FROM trials t LEFT JOIN executions e ON e.run_id = t.run_id AND e.trial_id = t.trial_id
                AND e.try = (SELECT MAX(y.try) FROM executions y WHERE y.run_id = t.run_id AND y.trial_id = t.trial_id)
           WHERE t.run_id = ? ORDER BY t.ord""",
        (run_id,),
    ).fetchall()
    return [dict(r) for r in rows]


@runs.command("show")
@run_argument(required=True)
@click.argument("trial", required=False)
@store_option()
@click.option(
    "--lines",
    type=click.IntRange(1, 10_000),
    default=20,
    show_default=True,
    help="last lines of each step's output to show",
)
@json_option
def show(run: RunName, trial: str | None, store_path: Path, lines: int, as_json: bool) -> None:
    """Why a trial ended as it did: a run's trials with their outcome and reason, or one trial's tries.

    With TRIAL (a trial id from the listing), every try: its outcome and reason; each step's exit code,
    signal, timeout and OOM evidence; the last lines of the agent's and the verifier's output; the model
    calls made through the gateway and their errors. The same facts as the viewer's trial page.
    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID.
    """
    from orchestrator.report import trial as render
    from orchestrator.view import artifacts, data

    store, run_id = run.open(store_path)
    with store:
        info = store.run(run_id)
        if trial is None:
            rows = trial_rows(store, info.run_id)
            if as_json:
                click.echo(json.dumps({"run_id": info.run_id, "trials": rows}, indent=2))
            else:
                render.print_trials(info, rows, out)
            return
        detail = data.trial_detail(store, info.run_id, trial)
        if detail is None:
            ids = [r["trial_id"] for r in trial_rows(store, info.run_id)]
            near = difflib.get_close_matches(trial, ids, n=3)
            hint = f"; did you mean {', '.join(map(visible_controls, near))}?" if near else ""
            hint += f"; `headroom runs show {info.run_id}` lists them"
            raise UserError(f"run {info.run_id} has no trial {trial!r}{hint}", field="TRIAL")
        calls = artifacts.model_calls(store.db, info.run_id, trial)
        if as_json:
            for t in detail["tries"]:
                t.pop("evidence_json", None)
            body = {"run_id": info.run_id, **detail, "model_calls": {str(k): v for k, v in calls.items()}}
            click.echo(json.dumps(body, indent=2, default=str))
        else:
            render.print_trial(info.run_id, detail, calls, out, lines=lines)
