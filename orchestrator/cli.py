"""The ``headroom`` command line."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import ValidationError
from rich.console import Console

from orchestrator import backends
from orchestrator import sweep as sweep_mod
from orchestrator.backends.base import Backend
from orchestrator.errors import SpecError, UserError, first_validation_error
from orchestrator.progress import SweepProgress
from orchestrator.spec.experiment import DEFAULT_MULTIPLIERS, Experiment
from orchestrator.spec.resources import LabelError, ResourceConfig
from orchestrator.store.sqlite import Store, store_error

DEFAULT_STORE = Path("headroom-results/headroom.db")
BUNDLED_TASKS = Path(__file__).resolve().parent.parent / "tasks"
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def parse_multipliers(text: str) -> list[ResourceConfig]:
    try:
        return [ResourceConfig.parse(part) for part in text.split(",") if part.strip()]
    except LabelError as exc:
        raise UserError(str(exc), field="--multipliers") from None
    except ValidationError as exc:
        raise UserError(first_validation_error(exc)[1], field="--multipliers") from None


def load_experiment_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror})", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start})", file=str(path)) from None
    except yaml.YAMLError as exc:
        raise UserError(f"malformed YAML ({yaml_problem(exc)})", file=str(path)) from None
    if not isinstance(data, dict):
        raise UserError("expected a mapping of experiment fields", file=str(path))
    return data


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What the parser found and where (1-based line and column), on one line."""
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {what}" if mark is not None else what


def check_agent_env(names: list[str]) -> None:
    """Every --agent-env variable must be set here: an agent run without its key fails as if it were the model's fault."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise UserError(f"{', '.join(missing)} {verb} not set in this environment; set it before the sweep "
                        "(the agent would run without it)", field="--agent-env")


def _nothing_left(store_path: Path, run_id: str | None) -> tuple[str, int] | None:
    """On --resume, read-only and before anything is written: (run id, trials) if the run is already complete.

    Also refuses a resume whose --agent-env variables are not set here.
    """
    peek = Store.open_existing(store_path)
    try:
        info = peek.run(run_id)
        if info.spec.get("kind") == "import":
            return None  # sweep.resume says why an import cannot be resumed
        planned = peek.planned_count(info.run_id)
        if info.status == "finished" and peek.try_counts(info.run_id)["final"] >= planned:
            return info.run_id, planned
        check_agent_env(list((info.spec.get("agent") or {}).get("env_passthrough") or []))
        return None
    finally:
        peek.close()


def build_experiment(fields: dict[str, Any], source: str | None) -> Experiment:
    try:
        return Experiment.model_validate(fields)
    except ValidationError as exc:
        field, msg = first_validation_error(exc)
        raise SpecError(msg, file=source, field=field) from None


def _make_backend(experiment: Experiment, enforcement: str) -> Backend:
    """The experiment's backend; the local one takes --enforcement, the others their experiment section."""
    if experiment.backend == "local":
        from orchestrator.backends.local.backend import LocalBackend
        from orchestrator.backends.local.cgroups import CgroupUnavailable

        try:
            return LocalBackend(enforcement)  # type: ignore[arg-type]
        except CgroupUnavailable as exc:
            raise UserError(f"--enforcement cgroup: no usable cgroup hierarchy ({exc})") from None
    if enforcement != "auto":
        raise UserError(f"--enforcement applies to the local backend only (this run uses {experiment.backend})",
                        field="--enforcement")
    return backends.load(experiment.backend, options=getattr(experiment, experiment.backend, None))


def _announce(backend: Backend) -> None:
    caps = backend.capabilities
    if backend.enforcement == "rlimit":
        err.print(
            "[bold yellow]enforcement: rlimit[/] — no cgroup could be created"
            f" ({getattr(backend, 'fallback_reason', None)}). Memory is capped with RLIMIT_DATA; OOM kills cannot be"
            " observed and CPU limits are NOT enforced. Results are recorded with enforcement=rlimit.", soft_wrap=True,
        )
    else:
        enforced = [what for what, on in (("memory limit", caps.memory_limit), ("memory guarantee", caps.memory_request),
                                          ("CPU quota", caps.cpu_quota), ("CPU weight", caps.cpu_request),
                                          ("storage limit", caps.storage_limit)) if on]
        err.print(f"backend: {backend.name}, enforcement: {backend.enforcement} ({', '.join(enforced)}; "
                  f"OOM from {caps.oom_signal}); isolation: {caps.isolation}", soft_wrap=True)
    if caps.isolation == "none":
        err.print("[bold red]isolation: none[/] — agents are not sandboxed; recorded in provenance and in every report",
                  soft_wrap=True)
    for note in caps.notes:
        err.print(f"[yellow]note:[/] {note}", soft_wrap=True)


def _announce_checks(prov: dict[str, Any]) -> None:
    """The canary's verdict and overcommit warnings, before the first trial runs."""
    from orchestrator.canary import describe

    for line in describe(prov.get("canary") or {}):
        err.print(line, soft_wrap=True)
    for w in (prov.get("overcommit") or {}).get("warnings", []):
        err.print(f"[bold yellow]overcommit:[/] {w}", soft_wrap=True)


def _run_sweep(experiment: Experiment | None, store_path: Path, *, resume_run: str | None, resume: bool,
               enforcement: str, canary: bool = True) -> tuple[Store, str, bool]:
    """Returns (store, run_id, interrupted)."""
    if resume:
        if (done := _nothing_left(store_path, resume_run)) is not None:
            err.print(f"run {done[0]}: all {done[1]} trials are already finished; nothing to resume "
                      "(the run and its record are unchanged)")
            return Store.open_existing(store_path), done[0], False
        store = Store.open_for_resume(store_path)
        run_id, experiment, tasks = sweep_mod.resume(store, resume_run)
        err.print(f"resuming run {run_id} from {store_path}")
    else:
        assert experiment is not None
        check_agent_env(list(experiment.agent.env_passthrough))
        task_list = sweep_mod.prepare(experiment)  # rejects bad input before anything is written
        store = None  # type: ignore[assignment]
    backend = _make_backend(experiment, enforcement)
    if resume and backend.enforcement != (started_under := store.run(run_id).enforcement):
        err.print(f"[bold yellow]warning:[/] this run started under {started_under}; the rest runs under "
                  f"{backend.enforcement}. Each trial records its own enforcement.")
    try:
        if not resume:
            store = Store(store_path)
        _announce(backend)
        if not resume:
            run_id, tasks = sweep_mod.start(experiment, task_list, store, backend, argv=sys.argv, canary=canary)
            _announce_checks(store.provenance(run_id))
            err.print(f"run {run_id}: {len(tasks)} tasks x {len(experiment.configurations)} configurations x "
                      f"{experiment.attempts} attempts -> {store_path}")
        else:  # the nodes, or how they are set up, may have changed since the run started
            from orchestrator.canary import describe

            for line in describe(sweep_mod.rerun_canary(store, run_id, experiment, list(tasks.values()), backend,
                                                        canary=canary)):
                err.print(f"(resume) {line}", soft_wrap=True)
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        counts = store.try_counts(run_id)
        try:
            with SweepProgress(err) as progress:
                result = sweep_mod.run(store, run_id, experiment, tasks, backend,
                                       on_result=progress.on_result, on_pending=progress.on_pending, stop=stop)
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        backend.close()
    s = result.summary
    if (problem := store.verify(run_id, counts["final"] + counts["retried"] + s.ran)) is not None:
        raise UserError(problem, file=str(store_path))
    if s.interrupted:
        err.print(f"[bold]interrupted[/]: {s.ran} tries recorded this session; nothing finished is lost. "
                  f"Resume with: headroom sweep --resume --store {store_path}")
    elif s.already_done:
        err.print(f"{s.already_done} trials were already finished and were not re-run")
    return store, run_id, s.interrupted


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="headroom")
def cli() -> None:
    """headroom: benchmark sweeps with separate resource requests and limits, real enforcement and honest statistics."""


@cli.command()
@click.argument("tasks_dir", required=False, type=click.Path(path_type=Path))
@click.option("--multipliers", default=",".join(DEFAULT_MULTIPLIERS), show_default=True,
              help="comma-separated configurations: 1, 1.5, 3 (request 1x, limit Nx), 1x-strict, 2x/4x, unbounded")
@click.option("--attempts", type=click.IntRange(1, 10_000), default=3, show_default=True, help="attempts per task and configuration")
@click.option("--concurrency", type=click.IntRange(1, 256), default=2, show_default=True)
@click.option("--agent", "agent_kind", type=click.Choice(["oracle", "command"]), default="oracle", show_default=True)
@click.option("--agent-command", help="shell command for --agent command (gets HEADROOM_* variables)")
@click.option("--agent-env", multiple=True, help="host environment variable to pass to the agent (value never recorded)")
@click.option("--model", help="model id being evaluated (recorded, not interpreted)")
@click.option("--task", "task_patterns", multiple=True, help="task id or glob; repeatable (default: all)")
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=DEFAULT_STORE, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--retries", type=click.IntRange(0, 10), default=0, show_default=True,
              help="retries of infra errors a trial cannot cause itself (not OOM kills or the storage limit); "
                   "every try stays on record")
@click.option("--timeout-multiplier", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True)
@click.option("--enforcement", type=click.Choice(["auto", "cgroup", "rlimit"]), default="auto", show_default=True,
              help="local backend: cgroup limits, or the rlimit fallback")
@click.option("--backend", "backend_name", type=click.Choice(backends.names()), default="local", show_default=True,
              help="where trials run (the experiment field 'backend')")
@click.option("--build", is_flag=True, help="docker backend: build every task image from environment/Dockerfile")
@click.option("--experiment", "experiment_file", type=click.Path(path_type=Path), help="experiment spec (YAML); flags override")
@click.option("--namespace", help="--backend kubernetes: namespace of the trial pods (kubernetes.namespace)")
@click.option("--kube-context", help="--backend kubernetes: kubeconfig context (kubernetes.context)")
@click.option("--queue", help="--backend kubernetes: Kueue LocalQueue for the trial pods (kubernetes.queue)")
@click.option("--keep-pods", is_flag=True, default=None, help="--backend kubernetes: keep harvested pods for debugging")
@click.option("--resume", is_flag=True, help="continue the latest (or --run-id) run in --store")
@click.option("--run-id", help="with --resume: which run")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "none"]), default="table", show_default=True,
              help="report printed when the sweep ends")
@click.option("--no-canary", is_flag=True, help="skip the enforcement canary (the report then says limits were not checked)")
@click.option("--placement", type=click.Choice(["default", "limit-aware"]), default="default", show_default=True,
              help="limit-aware: never run trials whose memory limits add up to more than this machine "
              "(kubernetes: each node) has")
@click.pass_context
def sweep(ctx: click.Context, tasks_dir: Path | None, multipliers: str, attempts: int, concurrency: int,
          agent_kind: str, agent_command: str | None, agent_env: tuple[str, ...], model: str | None,
          task_patterns: tuple[str, ...], store_path: Path, seed: int, retries: int, timeout_multiplier: float,
          enforcement: str, backend_name: str, build: bool, experiment_file: Path | None, namespace: str | None,
          kube_context: str | None, queue: str | None, keep_pods: bool | None, resume: bool, run_id: str | None,
          fmt: str, no_canary: bool, placement: str) -> None:
    """Run a resource sweep over the tasks in TASKS_DIR."""
    experiment = None
    if run_id is not None and not resume:
        raise UserError("applies only with --resume (a new sweep always gets a new run id)", field="--run-id")
    if resume:
        fixed = ("tasks_dir", "multipliers", "attempts", "concurrency", "agent_kind", "agent_command", "agent_env", "model",
                 "task_patterns", "seed", "retries", "timeout_multiplier", "experiment_file", "backend_name",
                 "namespace", "kube_context", "queue", "keep_pods", "placement", "build")
        changed = [n for n in fixed if ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT]
        if changed:
            raise UserError(f"--resume continues the run as it was recorded; drop {', '.join(changed)}", field="--resume")
    else:
        fields: dict[str, Any] = load_experiment_file(experiment_file) if experiment_file else {}
        source = str(experiment_file) if experiment_file else None
        for key in ("agent", "model", "retry", "kubernetes", "docker"):  # merged with flags below, so they must be mappings
            if key in fields and not isinstance(fields[key], dict):
                raise SpecError(f"expected a mapping, got {type(fields[key]).__name__}", file=source, field=key)
        given = lambda name: ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT  # noqa: E731
        if tasks_dir is not None:
            fields["tasks_dir"] = str(tasks_dir.resolve())
        elif isinstance(fields.get("tasks_dir"), str) and experiment_file:
            # Relative to the experiment file, and stored absolute so a resume works from anywhere.
            fields["tasks_dir"] = str((experiment_file.parent / fields["tasks_dir"]).resolve())
        if "tasks_dir" not in fields:
            raise UserError("give TASKS_DIR (or tasks_dir in --experiment, or --resume)")
        if given("multipliers") or "configurations" not in fields:
            fields["configurations"] = parse_multipliers(multipliers)
        for name, key, value in (("attempts", "attempts", attempts), ("concurrency", "concurrency", concurrency),
                                 ("seed", "seed", seed), ("timeout_multiplier", "timeout_multiplier", timeout_multiplier)):
            if given(name) or key not in fields:
                fields[key] = value
        agent = dict(fields.get("agent") or {})
        if given("agent_kind"):
            agent["kind"] = agent_kind
        if agent_command:
            agent["command"] = agent_command  # implies kind 'command' unless a kind was given
        if agent_env:
            agent["env_passthrough"] = list(agent_env)
        fields["agent"] = agent
        if model:
            fields["model"] = {**(fields.get("model") or {}), "name": model}
        if task_patterns:
            fields["tasks"] = list(task_patterns)
        if given("backend_name") or "backend" not in fields:
            fields["backend"] = backend_name
        if given("placement") or "placement" not in fields:
            fields["placement"] = placement
        if given("retries"):
            fields["retry"] = {**(fields.get("retry") or {}), "max_retries": retries}
        kube = {k: v for k, v in (("namespace", namespace), ("context", kube_context), ("queue", queue),
                                  ("keep_pods", keep_pods)) if v is not None}
        if kube:
            fields["kubernetes"] = {**(fields.get("kubernetes") or {}), **kube}
        if build:
            fields["docker"] = {**(fields.get("docker") or {}), "build": True}
        experiment = build_experiment(fields, source)
        if build and experiment.backend != "docker":
            raise UserError(f"--build applies to the docker backend (this run uses {experiment.backend})", field="--build")
    store, rid, interrupted = _run_sweep(experiment, store_path, resume_run=run_id, resume=resume, enforcement=enforcement,
                                         canary=not no_canary)
    if fmt != "none":
        _print_report(store, rid, fmt)
    if interrupted:
        ctx.exit(130)


def _print_report(store: Store, run_id: str | None, fmt: str, output: Path | None = None,
                  reference: str | None = None) -> None:
    from orchestrator.commands.outputs import write_file
    from orchestrator.report import document, render, terminal

    doc = document.build(store, run_id, reference=reference)
    if fmt == "table":
        if output is None:
            terminal.print_report(doc, out)
            return
        # The same table as on a terminal, as plain text (no colour codes) at a fixed width.
        buf = io.StringIO()
        terminal.print_report(doc, Console(file=buf, width=160, highlight=False, color_system=None,
                                           force_terminal=False, soft_wrap=False))
        text = buf.getvalue()
    else:
        text = render.render_text(doc, fmt)
    if output:
        write_file(output, text, "--output")
        err.print(f"report written to {output}")
    else:
        click.echo(text)


@cli.command()
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=DEFAULT_STORE, show_default=True)
@click.option("--run-id", help="which run (default: the latest)")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "html"]), default="table", show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path),
              help="write to a file instead of the terminal (--format table: the terminal table as plain text)")
@click.option("--reference", help="reference configuration for paired tests, any label in the run "
              "(default: 1x-strict in a sweep, the first label in an import)")
def report(store_path: Path, run_id: str | None, fmt: str, output: Path | None, reference: str | None) -> None:
    """Report a run: outcomes, rates with Wilson 95% intervals, paired and trend tests, calibration, provenance."""
    from orchestrator.commands.outputs import check_file

    store = Store.open_existing(store_path)
    if fmt == "html" and output is None:
        raise UserError("--format html needs --output FILE", field="--output")
    if output is not None:
        check_file(output, "--output")
    if reference is not None:
        finished = store.finished_labels(store.run(run_id).run_id)
        if reference not in finished:  # any label in the store is taken as written; else a resource spelling
            try:
                reference = ResourceConfig.parse(reference).label
            except (LabelError, ValidationError):
                raise UserError(f"unknown configuration label {reference!r} (has: {', '.join(sorted(finished)) or 'none'})",
                                field="--reference") from None
        if reference not in finished:
            raise UserError(f"run has no finished trials under {reference!r} (has: {', '.join(sorted(finished)) or 'none'})",
                            field="--reference")
    _print_report(store, run_id, fmt, output, reference)


def _open_run(ref: str, default_store: Path) -> tuple[Store, str | None]:
    """A run named by id in --store, or a store file (its latest run), or FILE:RUN_ID."""
    from orchestrator.commands.runref import open_run

    return open_run(ref, default_store)


@cli.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=DEFAULT_STORE, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table", show_default=True)
def compare(run_a: str, run_b: str, store_path: Path, fmt: str) -> None:
    """Paired comparison of two runs on the tasks and configurations both hold (different agents or models).

    RUN_A and RUN_B are run ids in --store, store files (their latest run), or FILE:RUN_ID.
    """
    from orchestrator.report import comparison, document

    sa, ra = _open_run(run_a, store_path)
    sb, rb = _open_run(run_b, store_path)
    doc = document.build_comparison(sa, ra, sb, rb)
    if fmt == "json":
        import json

        click.echo(json.dumps(doc, indent=2, allow_nan=False))
    elif fmt == "markdown":
        click.echo(comparison.markdown(doc))
    else:
        comparison.print_table(doc, out)


@cli.command()
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=DEFAULT_STORE, show_default=True)
def runs(store_path: Path) -> None:
    """List the runs in a store."""
    store = Store.open_existing(store_path)
    for r in store.runs():
        click.echo(f"{r.run_id}  {r.status:<11}  {r.enforcement:<9}  {r.name}  started {r.created_at}")


@cli.command()
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=Path("headroom-results/demo.db"), show_default=True)
@click.option("--attempts", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--enforcement", type=click.Choice(["auto", "cgroup", "rlimit"]), default="auto", show_default=True)
@click.pass_context
def demo(ctx: click.Context, store_path: Path, attempts: int, concurrency: int, seed: int, enforcement: str) -> None:
    """Sweep the bundled demo tasks (about 3 minutes on 2 cores) and print the report."""
    experiment = build_experiment(
        {"name": "demo", "tasks_dir": str(BUNDLED_TASKS), "configurations": list(DEFAULT_MULTIPLIERS),
         "attempts": attempts, "concurrency": concurrency, "seed": seed, "agent": {"kind": "oracle"},
         "model": {"name": "oracle"}},
        None,
    )
    store, rid, interrupted = _run_sweep(experiment, store_path, resume_run=None, resume=False, enforcement=enforcement)
    _print_report(store, rid, "table")
    err.print(f"store: {store_path}   more: headroom report --store {store_path} --format markdown|json|html")
    if interrupted:
        ctx.exit(130)


@cli.command()
@click.argument("what", type=click.Choice(["experiment", "task"]))
def schema(what: str) -> None:
    """Print the JSON Schema of an experiment spec or a task.toml."""
    import json

    from orchestrator.spec.task import TaskSpec

    model = Experiment if what == "experiment" else TaskSpec
    click.echo(json.dumps(model.model_json_schema(), indent=2))


@cli.command()
@click.option("--backend", "backend_name", type=click.Choice(backends.names()), default="local", show_default=True)
@click.option("--run-id", help="only what this run left behind, live or not (default: every run whose process is gone)")
@click.option("--namespace", help="--backend kubernetes: namespace of the trial pods (default: 'default')")
@click.option("--kube-context", help="--backend kubernetes: kubeconfig context")
@click.option("--force", is_flag=True,
              help="--backend kubernetes: also remove runs whose Lease says they are still executing")
def cleanup(backend_name: str, run_id: str | None, namespace: str | None, kube_context: str | None,
            force: bool) -> None:
    """Remove what a crashed headroom left behind: trial cgroups, work dirs, containers, pods."""
    fields: dict[str, Any] = {"tasks_dir": ".", "backend": backend_name}
    kube = {k: v for k, v in (("namespace", namespace), ("context", kube_context)) if v is not None}
    if (kube or force) and backend_name != "kubernetes":
        raise UserError("--namespace, --kube-context and --force apply to --backend kubernetes", field="--backend")
    if kube:
        fields["kubernetes"] = kube
    experiment = build_experiment(fields, None)
    backend = _make_backend(experiment, "auto")
    try:
        report = backend.cleanup(run_id, force=True) if force else backend.cleanup(run_id)  # type: ignore[call-arg]
    finally:
        backend.close()
    for item in report.removed:
        click.echo(f"removed {item}")
    for item in report.kept:
        click.echo(f"kept    {item}")
    err.print(f"{len(report.removed)} removed, {len(report.kept)} kept")

from orchestrator.commands.trust import audit_cmd, judge_group, provenance_cmd, regrade_cmd  # noqa: E402


from orchestrator.commands.tasks import tasks as tasks_group  # noqa: E402  (one `tasks` group: import/list/show/validate)

cli.add_command(tasks_group)
tasks_group.add_command(provenance_cmd)
cli.add_command(audit_cmd)
cli.add_command(judge_group)
cli.add_command(regrade_cmd)

from orchestrator.commands.calibrate import calibrate  # noqa: E402

cli.add_command(calibrate)

from orchestrator.commands import cluster as _cluster  # noqa: E402

for _command in _cluster.COMMANDS: cli.add_command(_command)  # noqa: E701
for _command in _cluster.TASK_COMMANDS: tasks_group.add_command(_command)  # noqa: E701

from orchestrator.commands.taskimage import image as _task_image  # noqa: E402

tasks_group.add_command(_task_image)


from orchestrator.commands.view import view as view_command  # noqa: E402

cli.add_command(view_command)


def main() -> None:
    try:
        rv = cli.main(standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except UserError as exc:
        err.print(f"[bold red]error:[/] {exc.one_line()}", soft_wrap=True)
        sys.exit(2)
    except sqlite3.DatabaseError as exc:  # the store failed under us: a full disk, a corrupt or vanished file
        err.print(f"[bold red]error:[/] store: {store_error(exc)}", soft_wrap=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


# Command groups in their own modules (imported last: they import nothing from here).
from orchestrator.commands import bundle as _bundle, results as _results  # noqa: E402

cli.add_command(_results.results)
cli.add_command(_bundle.bundle)
cli.add_command(_bundle.verify)

from orchestrator.commands.nodes import nodes as _nodes  # noqa: E402

cli.add_command(_nodes)
