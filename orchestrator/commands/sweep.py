"""Running sweeps: ``sweep``, ``resume``, ``demo`` and ``cleanup``.

The engine (pandas, httpx, the gateway, the backends) is imported when a command runs, so
``headroom --help`` loads none of it.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from orchestrator import backends
from orchestrator.commands.console import err
from orchestrator.commands.options import (
    DEFAULT_STORE,
    FULL_REPORT,
    RunName,
    attempts_option,
    backend_option,
    concurrency_option,
    enforcement_option,
    format_option,
    full_report_option,
    keep_pods_option,
    kube_context_option,
    namespace_option,
    no_canary_option,
    run_argument,
    seed_option,
    store_option,
)
from orchestrator.errors import UserError
from orchestrator.spec.defaults import DEFAULT_MULTIPLIERS, MAX_TIMEOUT_MULTIPLIER
from orchestrator.spec.unknown import first_validation_error

if TYPE_CHECKING:
    from orchestrator.engine.entry import Resume
    from orchestrator.spec.experiment import Experiment, ExperimentOverrides
    from orchestrator.spec.resources import ResourceConfig
    from orchestrator.store.sqlite import Store

BUNDLED_TASKS = Path(__file__).resolve().parent.parent.parent / "tasks"
REPORT_FORMATS = ("table", "json", "markdown", "none")


def parse_multipliers(text: str) -> list[ResourceConfig]:
    """The configurations --multipliers names; a spelling that reads two ways is refused (see ambiguous)."""
    from pydantic import ValidationError

    from orchestrator.errors import LabelError
    from orchestrator.spec.resources import ResourceConfig

    parts = [part.strip() for part in text.split(",") if part.strip()]
    for part in parts:
        if (problem := ambiguous(part)) is not None:
            raise UserError(problem, field="--multipliers")
    try:
        return [ResourceConfig.parse(part) for part in parts]
    except LabelError as exc:
        raise UserError(str(exc), field="--multipliers") from None
    except ValidationError as exc:
        raise UserError(first_validation_error(exc)[1], field="--multipliers") from None


def ambiguous(label: str) -> str | None:
    """Why ``Nx`` alone (N other than 1) cannot be read: it says a multiple, not of what.

    The label grammar reads it as request 1x, limit Nx (as a bare ``N`` is), but ``4x`` reads just as
    well as both at 4x; on the command line, where it was measured being misread, it is refused.
    """
    text = str(label).strip().lower()
    if not re.fullmatch(r"\d+(?:\.\d+)?x", text):
        return None
    n = float(text[:-1])
    if n == 1:
        return None  # 1x/1x either way
    m = f"{n:g}x"
    return f"{label!r} reads two ways: write 1x/{m} for a {m} limit over the spec's request, or {m}/{m} for both at {m}"


def file_notes(configurations: Any) -> list[str]:
    """An experiment file's ``Nx``: still read as 1x/Nx (files and cluster Experiments are written so), said aloud."""
    if not isinstance(configurations, list):
        return []
    return [
        f"configurations: {str(c)!r} is read as 1x/{str(c).strip().lower()} (request 1x); write "
        f"{str(c).strip().lower()}/{str(c).strip().lower()} for both at that multiple"
        for c in configurations
        if isinstance(c, str) and ambiguous(c) is not None
    ]


def load_experiment_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except IsADirectoryError:
        raise UserError("is a directory; give the experiment's YAML file", file=str(path)) from None
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


def check_env_names(ctx: click.Context, param: click.Parameter, names: tuple[str, ...]) -> tuple[str, ...]:
    from orchestrator.spec.experiment import ENV_NAME, env_name_problem

    for name in names:
        if not ENV_NAME.fullmatch(name):
            raise UserError(env_name_problem(name), field="--agent-env")
    return names


def nonempty(value: str | None, flag: str, problem: str = "is empty; give a value or leave the flag out") -> str | None:
    if value is not None and not value.strip():
        raise UserError(problem, field=flag)
    return value


def finite(value: float, flag: str) -> float:
    if math.isnan(value):  # click's range check lets NaN through (every comparison with it is false)
        raise UserError("not a number; give a multiple such as 1.5", field=flag)
    return value


def build_experiment(overrides: ExperimentOverrides, base: dict[str, Any], source: str | None) -> Experiment:
    """The experiment the flags say over ``base`` (an experiment file's mapping, or a command's own); a
    backend-specific flag the experiment's backend would ignore is refused."""
    experiment = overrides.apply(base, source)
    _refuse_ignored_flags(experiment.backend, overrides.flags())
    return experiment


def _run_sweep(
    what: Experiment | Resume,
    store_path: Path,
    *,
    enforcement: str,
    canary: bool = True,
    oracle_check: bool = False,
) -> tuple[Store, str, bool]:
    """The engine's sweep (orchestrator/engine/entry.py), its events shown on stderr: (store, run_id, interrupted)."""
    from orchestrator.commands.sweep_console import SweepConsole
    from orchestrator.engine.entry import SweepOptions, run_sweep

    options = SweepOptions(enforcement=enforcement, canary=canary, oracle_check=oracle_check, argv=sys.argv)
    done = run_sweep(what, store_path, options, SweepConsole())
    return done.store, done.run_id, done.interrupted


def print_report(store: Store, run_id: str, fmt: str, compact: bool = False) -> None:
    from orchestrator.commands.report import print_report as show

    show(store, run_id, fmt, compact=compact)


@click.command()
@click.argument("tasks_dir", required=False, type=click.Path(path_type=Path))
@click.option(
    "--name",
    callback=lambda _c, p, v: nonempty(v, "--name"),
    help="run name, shown by `headroom runs` and every report (default: the experiment's name, else 'sweep')",
)
@click.option(
    "--multipliers",
    default=",".join(DEFAULT_MULTIPLIERS),
    show_default=True,
    help="comma-separated configurations: 1, 1.5 or 3 (request 1x, limit Nx), 1x-strict, 1x/3x, 2x/4x, "
    "unbounded, task-band",
)
@attempts_option()
@concurrency_option()
@click.option(
    "--agent",
    "agent_kind",
    type=click.Choice(["oracle", "command", "external"]),
    default="oracle",
    show_default=True,
    help="command: runs inside the trial's environment; external: runs on the host and "
    "acts on the environment through $HEADROOM_EXEC (docs/agents.md)",
)
@click.option(
    "--agent-command",
    callback=lambda _c, p, v: nonempty(
        v, "--agent-command", "empty command; give the shell command that runs your agent"
    ),
    help="shell command for --agent command|external (gets HEADROOM_* variables)",
)
@click.option(
    "--trusted-agent",
    is_flag=True,
    default=None,
    help="--agent external: where its host sandbox cannot start, run it unsandboxed instead of refusing "
    "(agent.trusted; every report says so)",
)
@click.option(
    "--allow-internet/--no-internet",
    "allow_internet",
    default=None,
    help="network for the agent and the trial's environment (experiment: allow_internet; agent.network and "
    "environment.network set each apart); a task with allow_internet = false never gets it",
)
@click.option(
    "--agent-env",
    multiple=True,
    callback=check_env_names,
    metavar="NAME",
    help="host environment variable to pass to the agent, by name (its value is never recorded)",
)
@click.option(
    "--model",
    callback=lambda _c, p, v: nonempty(v, "--model"),
    help="model id being evaluated (recorded, not interpreted)",
)
@click.option("--task", "task_patterns", multiple=True, help="task id or glob; repeatable (default: all)")
@store_option()
@seed_option()
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=0,
    show_default=True,
    help="retries of infra errors a trial cannot cause itself (not OOM kills or the storage limit); "
    "every try stays on record",
)
@click.option(
    "--timeout-multiplier",
    type=click.FloatRange(0, MAX_TIMEOUT_MULTIPLIER, min_open=True),
    default=1.0,
    show_default=True,
    callback=lambda _c, _p, v: finite(v, "--timeout-multiplier"),
    help="scales every task's agent and verifier timeouts",
)
@enforcement_option()
@backend_option()
@click.option("--build", is_flag=True, help="docker backend: build every task image from environment/Dockerfile")
@click.option(
    "--run-on-host",
    is_flag=True,
    default=None,
    help="local backend: run tasks that name a container image (docker_image, environment/Dockerfile) on the host "
    "anyway; without it they are refused (experiment: run_on_host; recorded in provenance and reports)",
)
@click.option(
    "--oracle-check",
    is_flag=True,
    help="first run each task's oracle once per configuration (a run of its own); a task whose oracle fails "
    "under a configuration is named, and recorded in the run's provenance (oracle_check)",
)
@click.option(
    "--experiment", "experiment_file", type=click.Path(path_type=Path), help="experiment spec (YAML); flags override"
)
@namespace_option("--backend kubernetes: namespace of the trial pods (kubernetes.namespace)")
@kube_context_option("--backend kubernetes: kubeconfig context (kubernetes.context)")
@click.option("--queue", help="--backend kubernetes: Kueue LocalQueue for the trial pods (kubernetes.queue)")
@keep_pods_option("--backend kubernetes: keep harvested pods for debugging")
@format_option(REPORT_FORMATS, help="report printed when the sweep ends")
@full_report_option
@no_canary_option()
@click.option(
    "--placement",
    type=click.Choice(["default", "limit-aware"]),
    default="default",
    show_default=True,
    help="limit-aware: never run trials whose memory limits add up to more than this machine "
    "(kubernetes: each node) has",
)
@click.pass_context
def sweep(
    ctx: click.Context,
    tasks_dir: Path | None,
    multipliers: str,
    store_path: Path,
    enforcement: str,
    experiment_file: Path | None,
    fmt: str,
    no_canary: bool,
    oracle_check: bool,
    **flags: Any,
) -> None:
    """Run a resource sweep over the tasks in TASKS_DIR (or the experiment file's tasks_dir)."""
    from orchestrator.spec.experiment import ExperimentOverrides

    defaults = {p.name: p.get_default(ctx) for p in ctx.command.params}

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)

    base: dict[str, Any] = load_experiment_file(experiment_file) if experiment_file else {}
    source = str(experiment_file) if experiment_file else None
    if tasks_dir is not None:
        flags["tasks_dir"] = str(tasks_dir.resolve())
    elif isinstance(base.get("tasks_dir"), str) and experiment_file:
        # Relative to the experiment file, and stored absolute so a resume works from anywhere.
        base["tasks_dir"] = str((experiment_file.parent / base["tasks_dir"]).resolve())
    elif "tasks_dir" not in base:
        raise UserError("give TASKS_DIR (or tasks_dir in --experiment)")
    if given("multipliers"):
        flags["multipliers"] = parse_multipliers(multipliers)
    for line in file_notes(base.get("configurations")) if not given("multipliers") else []:
        err.print(f"note: {source}: {line}", soft_wrap=True, markup=False)
    overrides = ExperimentOverrides.model_validate(
        {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in flags.items()
            if name in ("tasks_dir", "multipliers") or given(name) or value not in (None, (), defaults.get(name))
        }
    )
    experiment = build_experiment(overrides, base, source)
    _finish(
        ctx,
        fmt,
        *_run_sweep(
            experiment,
            store_path,
            enforcement=enforcement,
            canary=not no_canary,
            oracle_check=oracle_check,
        ),
    )


def _refuse_ignored_flags(backend_name: str, flags: list[str]) -> None:
    """A backend-specific flag the run's backend does not declare is refused before anything runs."""
    from orchestrator.backends.abilities import BACKEND_FLAGS, refuse_flags

    if specific := [f for f in flags if f in BACKEND_FLAGS]:
        refuse_flags(backend_name, backends.declared_abilities(backend_name), specific)


def _finish(ctx: click.Context, fmt: str, store: Store, run_id: str, interrupted: bool) -> None:
    """The report a sweep or a resume prints when it ends; 130 when it was interrupted."""
    if fmt != "none":  # as a table, the summary unless --full-report asked for the whole report
        print_report(store, run_id, fmt, compact=not ctx.meta.get(FULL_REPORT, False))
    if interrupted:
        ctx.exit(130)


def _resume(ctx: click.Context, run: RunName, store_path: Path, enforcement: str, fmt: str, no_canary: bool) -> None:
    from orchestrator.engine.entry import Resume

    store, run_id = run.open(store_path)
    with store:
        path = store.path
    _finish(ctx, fmt, *_run_sweep(Resume(run_id), path, enforcement=enforcement, canary=not no_canary))


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
    store, rid, interrupted = _run_sweep(experiment, store_path, enforcement=enforcement)
    print_report(store, rid, "table")
    listing = "headroom runs" if store_path == DEFAULT_STORE else f"headroom runs --store {store_path}"
    err.print(
        f"store: {store_path}   list: {listing}   more: headroom report {store_path}:{rid} -o report.html (or .md, .json)",
        soft_wrap=True,
        markup=False,
    )
    if interrupted:
        ctx.exit(130)


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
    _refuse_ignored_flags(backend_name, [*overrides.flags(), *(["--force"] if force else [])])
    from orchestrator.engine.entry import cleanup as clean

    experiment = build_experiment(overrides, {"tasks_dir": "."}, None)
    run_id = None if run.text is None else run.run_id(store_path)
    report = clean(experiment, run_id, force=force)
    for item in report.removed:
        click.echo(f"removed {item}")
    for item in report.kept:
        click.echo(f"kept    {item}")
    err.print(f"{len(report.removed)} removed, {len(report.kept)} kept")
