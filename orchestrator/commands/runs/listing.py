"""``headroom runs list`` (``headroom runs`` alone) and ``runs show``: what a store holds, and why a trial ended as it did."""

from __future__ import annotations

import difflib
import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from orchestrator.commands.console import err, out
from orchestrator.commands.options import RunName, json_option, run_argument, store_option
from orchestrator.errors import UserError
from orchestrator.report.labels import agent_label
from orchestrator.report.safe import terminal_text, visible_controls

if TYPE_CHECKING:
    from orchestrator.store.sqlite import RunInfo, Store


#: The listing's headline column, and what each line of it is (printed under the table).
HEADLINE_COLUMN = "headline per configuration"


HEADLINE_NOTE = (
    "each headline line: configuration: score with infra errors counted as failures [Wilson 95%, these tasks], "
    "infra-error rate; `headroom report RUN` has the rest"
)


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


@click.command("list")
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


@click.command("show")
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
