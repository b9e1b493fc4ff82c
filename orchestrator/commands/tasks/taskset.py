"""``headroom tasks validate|list|show|import``: a task set on disk, headroom's own or made for Harbor or
Terminal-Bench (the group and its other commands: orchestrator/commands/tasks/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from orchestrator.commands.console import err, out
from orchestrator.commands.options import (
    agent_timeout_option,
    backend_option,
    format_option,
    json_option,
    out_dir_option,
    store_option,
)
from orchestrator.commands.outputs import check_dir, make_dir, write_file
from orchestrator.errors import UserError
from orchestrator.importers.fields import DEFAULTED, KINDS, size_to_mib
from orchestrator.spec.defaults import DEFAULT_MULTIPLIERS

if TYPE_CHECKING:
    from orchestrator.importers.taskset import TaskEntry, TaskSet
    from orchestrator.spec.provenance import OracleCheck


def _memory_option(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return size_to_mib(text, bare_unit="m")
    except ValueError as exc:
        raise UserError(str(exc), field="--above-memory") from None


def _num(x: float) -> str:
    return f"{x:g}"


def print_summary(ts: TaskSet, *, verb: str) -> None:
    s = ts.summary()
    if ts.dataset:
        out.print(
            f"dataset {ts.dataset.get('name')} {ts.dataset.get('version') or ''}: "
            f"{ts.dataset['tasks_listed']} tasks listed in {ts.dataset['manifest']}"
        )
    fmt = ", ".join(f"{n} {f}" for f, n in s["formats"].items()) or "none"
    out.print(f"{verb}: {s['tasks_ok']} tasks ({fmt}); {s['tasks_bad']} bad")
    for b in ts.bad:
        out.print(f"  [red]bad[/] {escape(b.path)}: {escape(b.reason)}", soft_wrap=True)
    t = Table(title="Fields (tasks each applies to)", title_justify="left")
    for h in ("what happened", "field", "tasks", "note"):
        t.add_column(h, overflow="fold")
    for kind in KINDS:
        for row in s["fields"][kind]:
            t.add_row(kind, escape(str(row["field"])), str(row["tasks"]), escape(str(row["note"])))
    if t.row_count:
        out.print(t)
    print_resources(s["resources"])


def print_resources(res: dict[str, Any]) -> None:
    if not res.get("n_tasks"):
        return
    t = Table(title=f"Resources across {res['n_tasks']} tasks", title_justify="left")
    for h in ("", "min", "median", "max", "largest"):
        t.add_column(h, justify="left" if h in ("", "largest") else "right")
    for key, label in (("cpus", "cpus"), ("memory_mb", "memory (MiB)"), ("agent_timeout_sec", "agent timeout (s)")):
        r = res[key]
        t.add_row(label, _num(r["min"]), _num(r["median"]), _num(r["max"]), r["max_task"])
    out.print(t)


@click.command("import")
@click.argument("path", type=click.Path(path_type=Path))
@out_dir_option("directory to write the headroom task directories into (required)")
@agent_timeout_option()
@click.option("--force", is_flag=True, help="replace task directories that already exist in --out-dir")
@format_option(("table", "json"))
@click.pass_context
def import_(
    ctx: click.Context, path: Path, out_dir: Path | None, agent_timeout: float | None, force: bool, fmt: str
) -> None:
    """Import every task under PATH into --out-dir; bad tasks are listed and skipped."""
    output = out_dir
    if output is None:
        raise UserError("needs --out-dir DIR, the directory to write the tasks into", field="--out-dir")
    check_dir(output, "--out-dir")
    from orchestrator.importers import taskset  # the task models load when a task command runs, not with --help

    ts = taskset.read_task_set(path, agent_timeout=agent_timeout)
    make_dir(output, "--out-dir")
    try:
        written = taskset.write_task_set(ts, output, force=force)
    except OSError as exc:  # a full disk or a place that refuses files: one line, not a traceback
        raise UserError(
            f"cannot write the tasks ({exc.strerror or exc})", file=str(exc.filename or output), field="--out-dir"
        ) from None
    from orchestrator.engine import faithful

    # what a sweep on the default backend would refuse, said now rather than at the first sweep
    on_local = faithful.check_tasks([taskset.as_task(e) for e in ts.entries], faithful.Profile.declared("local")).lines
    summary = {
        **ts.summary(),
        "output": str(output),
        "written": [str(p) for p in written],
        "refused_on_local": on_local,
    }
    write_file(output / "import-summary.json", json.dumps(summary, indent=2), "--out-dir")
    if fmt == "json":
        click.echo(json.dumps(summary, indent=2))
    else:
        print_summary(ts, verb=f"imported into {output}")
        if on_local:
            out.print(
                "[yellow]note:[/] a sweep on the default local backend would refuse these "
                "(`headroom tasks validate DIR --backend NAME` checks another):",
                soft_wrap=True,
            )
            for line in on_local:
                out.print(f"  {escape(line)}", soft_wrap=True)
        err.print(f"summary written to {output / 'import-summary.json'}")
    if ts.bad:
        ctx.exit(1)


@click.command("list")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--above-cpus", type=float, help="list only tasks asking for more CPUs than this")
@click.option("--above-memory", help="list only tasks asking for more memory than this (e.g. 4G, 2048M)")
@format_option(("table", "json"))
def list_(path: Path, above_cpus: float | None, above_memory: str | None, fmt: str) -> None:
    """One line per task with its resources, and the distribution across the set."""
    from orchestrator.importers import taskset  # the task models load when a task command runs, not with --help

    ts = taskset.read_task_set(path)
    mem = _memory_option(above_memory)
    chosen = (
        taskset.above(ts.entries, cpus=above_cpus, memory_mb=mem)
        if (above_cpus is not None or mem is not None)
        else ts.entries
    )
    rows = [
        {
            "task": e.task_id,
            "format": e.source_format,
            "cpus": e.cpus,
            "memory_mb": e.memory_mb,
            "agent_timeout_sec": e.spec["agent"]["timeout_sec"],
            "verifier_timeout_sec": e.spec["verifier"]["timeout_sec"],
            "gpus": e.spec["environment"].get("gpus", 0),
        }
        for e in chosen
    ]
    if fmt == "json":
        click.echo(
            json.dumps(
                {"tasks": rows, "resources": ts.summary()["resources"], "bad": [b.__dict__ for b in ts.bad]}, indent=2
            )
        )
        return
    t = Table(
        title=f"{len(rows)} of {len(ts.entries)} tasks"
        + (" above the given size" if len(rows) != len(ts.entries) else ""),
        title_justify="left",
    )
    for h in ("task", "format", "cpus", "memory (MiB)", "agent timeout (s)", "verifier timeout (s)", "gpus"):
        t.add_column(h, justify="left" if h in ("task", "format") else "right")
    for r in rows:
        t.add_row(
            r["task"],
            r["format"],
            _num(r["cpus"]),
            str(r["memory_mb"]),
            _num(r["agent_timeout_sec"]),
            _num(r["verifier_timeout_sec"]),
            str(r["gpus"]),
        )
    out.print(t)
    print_resources(ts.summary()["resources"])
    for b in ts.bad:
        out.print(f"[red]bad[/] {escape(b.path)}: {escape(b.reason)}", soft_wrap=True)


@click.command("show")
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("task_id", required=False)
@json_option
def show(path: Path, task_id: str | None, as_json: bool) -> None:
    """The task as headroom reads it (PATH is the task, or TASK_ID names one under PATH), and what became of each field."""
    target = path / task_id if task_id else path
    if not target.is_dir():
        raise UserError("no such task directory", file=str(target))
    from orchestrator.importers import taskset

    entry = taskset.read_task(target)
    if isinstance(entry, taskset.BadTask):
        raise UserError(entry.reason, file=entry.path)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "task": entry.task_id,
                    "format": entry.source_format,
                    "spec": entry.spec,
                    "fields": [{"what": k, "field": p, "note": n} for k, p, n in entry.report.entries],
                },
                indent=2,
                default=str,
            )
        )
        return
    env, agent, verifier = entry.spec["environment"], entry.spec["agent"], entry.spec["verifier"]
    out.print(
        f"[bold]{escape(entry.task_id)}[/] ({entry.source_format}"
        f"{', runs as it is' if entry.verbatim else ', needs `headroom tasks import` first'})"
    )
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    t.add_row(
        "resources",
        f"{_num(entry.cpus)} cpus, {entry.memory_mb} MiB memory"
        + (f", {env['storage_mb']} MiB storage" if env.get("storage_mb") else "")
        + (f", {env['gpus']} gpus" if env.get("gpus") else ""),
    )
    t.add_row("timeouts", f"agent {_num(agent['timeout_sec'])} s, verifier {_num(verifier['timeout_sec'])} s")
    t.add_row("internet", "allowed" if env.get("allow_internet") else "none")
    if env.get("docker_image"):
        t.add_row("image", escape(str(env["docker_image"])))
    t.add_row("instruction", escape(" ".join(entry.instruction.split())[:200]))
    out.print(t)
    f = Table(title="Fields", title_justify="left")
    for h in ("what happened", "field", "note"):
        f.add_column(h, overflow="fold")
    for kind, field_path, note in entry.report.entries:
        f.add_row(kind, escape(field_path), escape(note))
    if f.row_count:
        out.print(f)


@click.command("validate")
@click.argument("path", type=click.Path(path_type=Path))
@agent_timeout_option()
@backend_option(
    "the backend the tasks are checked against: what it cannot run faithfully is refused, as a sweep on it would"
)
@click.option(
    "--allow-internet",
    is_flag=True,
    help="the sweep will give trials the network (sweep --allow-internet): tasks that need it are not refused",
)
@click.option(
    "--run-on-host",
    is_flag=True,
    help="the sweep will run tasks that name a container image on the host anyway (sweep --run-on-host)",
)
@click.option(
    "--oracle-check",
    is_flag=True,
    help="also run each task's oracle once per configuration on --backend (a run of its own in --store) and name "
    "the tasks whose oracle fails under one",
)
@click.option(
    "--multipliers",
    default=",".join(DEFAULT_MULTIPLIERS),
    show_default=True,
    help="--oracle-check: the configurations to check the oracle under",
)
@store_option()
@json_option
@click.pass_context
def validate(
    ctx: click.Context,
    path: Path,
    agent_timeout: float | None,
    backend_name: str,
    allow_internet: bool,
    run_on_host: bool,
    oracle_check: bool,
    multipliers: str,
    store_path: Path,
    as_json: bool,
) -> None:
    """Check every task under PATH: which `headroom sweep` runs as it is, which need `headroom tasks import`
    first, why each bad one cannot be used, and which --backend cannot run faithfully (exit 1 unless every
    task runs as it is; with --oracle-check, also unless every oracle passes everywhere)."""
    from orchestrator.engine import faithful
    from orchestrator.importers import taskset  # the task models load when a task command runs, not with --help

    ts = taskset.read_task_set(path, agent_timeout=agent_timeout)
    needs_import = [e for e in ts.entries if not e.verbatim]

    def why_not(e: TaskEntry) -> str:
        if e.source_format != taskset.HARBOR:
            return "a legacy Terminal-Bench task.yaml"
        defaulted = [path for kind, path, _note in e.report.entries if kind == DEFAULTED]
        return (
            "leaves " + ", ".join(defaulted) + " to Harbor's defaults, which the import writes in"
            if defaulted
            else "its task.toml does not load as written"
        )

    why = {e.task_id: why_not(e) for e in needs_import}
    profile = faithful.Profile.declared(backend_name)
    unchecked = faithful.arch_unchecked([taskset.as_task(e) for e in ts.entries], profile)
    check = faithful.check_tasks(
        [taskset.as_task(e) for e in ts.entries],
        profile,
        run_on_host=run_on_host,
        env_network=allow_internet,
        oracle_network=allow_internet,
    )
    oracle = (
        _oracle_check(path, ts, backend_name, multipliers, store_path, allow_internet, run_on_host)
        if (oracle_check and not (ts.bad or needs_import or check.lines))
        else None
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    **ts.summary(),
                    "runs_as_is": not (ts.bad or needs_import or check.lines),
                    "needs_import": [{"task": t, "reason": r} for t, r in sorted(why.items())],
                    "backend": backend_name,
                    "refused": check.lines,
                    "architecture_unchecked": unchecked,
                    "run_on_host": check.record(profile, run_on_host).tasks_run_on_host,
                    "oracle_check": oracle.model_dump(mode="json") if oracle is not None else None,
                },
                indent=2,
            )
        )
    else:
        print_summary(ts, verb="valid")
        if needs_import:
            out.print(
                f"[yellow]{len(needs_import)} of {len(ts.entries)} valid tasks do not run as they are[/]: "
                "`headroom sweep` needs them through `headroom tasks import PATH --out-dir DIR` first",
                soft_wrap=True,
            )
            for task_id, reason in sorted(why.items()):
                out.print(f"  needs import {escape(task_id)}: {escape(reason)}", soft_wrap=True)
        if check.lines:
            out.print(f"[red]refused on --backend {backend_name}[/] (a sweep there would refuse them):")
            for line in check.lines:
                out.print(f"  {escape(line)}", soft_wrap=True)
        elif check.on_host:
            out.print(
                f"{len(check.on_host)} task(s) that name a container image run on the host (--run-on-host): "
                + escape(", ".join(sorted(check.on_host))),
                soft_wrap=True,
            )
        if unchecked:
            out.print(
                f"CPU architecture not checked here: the {backend_name} backend's is read when a sweep connects "
                f"(the daemon's, or the schedulable nodes' of a cluster); {len(unchecked)} task(s) declare one: "
                + escape(", ".join(f"{t} ({a})" for t, a in list(unchecked.items())[:5])),
                soft_wrap=True,
            )
        if oracle is not None:
            from orchestrator.engine import oracle_check as oc

            for line in oc.lines(oracle) or ["oracle check: every oracle passes under every configuration"]:
                out.print(escape(line), soft_wrap=True)
            out.print(f"oracle check recorded as run {oracle.run_id} in {store_path}")
    oracle_failed = oracle is not None and bool(oracle.too_low or oracle.fails_everywhere)
    if ts.bad or needs_import or check.lines or oracle_failed:
        ctx.exit(1)


def _oracle_check(
    path: Path,
    ts: TaskSet,
    backend_name: str,
    multipliers: str,
    store_path: Path,
    allow_internet: bool,
    run_on_host: bool,
) -> OracleCheck:
    """`tasks validate --oracle-check`: the oracle check a sweep's --oracle-check runs, on its own."""
    from orchestrator.commands.experiment_flags import parse_multipliers
    from orchestrator.engine import oracle_check
    from orchestrator.engine.entry import make_backend
    from orchestrator.spec.experiment import Experiment
    from orchestrator.store.sqlite import Store
    from orchestrator.tasks.loader import load_tasks

    experiment = Experiment(
        name=f"validate-{ts.root.name}",
        tasks_dir=str(path.resolve()),
        configurations=parse_multipliers(multipliers),
        backend=backend_name,  # type: ignore[arg-type]
        allow_internet=allow_internet,
        run_on_host=run_on_host,
    )
    store_path.parent.mkdir(parents=True, exist_ok=True)
    with make_backend(experiment, "auto") as backend:
        return oracle_check.run(experiment, load_tasks(path.resolve()), Store(store_path), backend)
