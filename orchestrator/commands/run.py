"""Running sweeps: ``sweep``, ``resume``, ``demo`` and ``cleanup``.

The engine (pandas, httpx, the gateway, the backends) is imported when a command runs, so
``headroom --help`` loads none of it.
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from rich.markup import escape

from orchestrator import backends
from orchestrator.commands.console import err
from orchestrator.commands.options import (
    DEFAULT_STORE,
    FULL_REPORT,
    RunName,
    agent_kwarg_option,
    attempts_option,
    backend_option,
    concurrency_option,
    enforcement_option,
    format_option,
    full_report_option,
    harbor_agent_option,
    harbor_agent_overrides,
    keep_pods_option,
    kube_context_option,
    namespace_option,
    no_canary_option,
    run_argument,
    seed_option,
    store_option,
)
from orchestrator.errors import SpecError, UserError
from orchestrator.spec.defaults import DEFAULT_MULTIPLIERS, MAX_TIMEOUT_MULTIPLIER
from orchestrator.spec.unknown import first_validation_error

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend
    from orchestrator.spec.experiment import Experiment, ExperimentOverrides
    from orchestrator.spec.provenance import Provenance
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


def check_agent_env(names: list[str]) -> None:
    """Every --agent-env variable must be set here: an agent run without its key fails as if it were the model's fault."""
    from orchestrator.agentio.redact import MIN_GUESSED_SECRET, too_short_to_redact_cleanly

    missing = [n for n in names if n not in os.environ]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise UserError(
            f"{', '.join(missing)} {verb} not set in this environment; set it before the sweep "
            "(the agent would run without it)",
            field="--agent-env",
        )
    for name in too_short_to_redact_cleanly(names):
        err.print(
            f"note: --agent-env {name}: its value is shorter than {MIN_GUESSED_SECRET} characters; it is "
            "redacted as a secret all the same, so that text is wiped wherever it appears in outputs and "
            "trajectories (pass only secrets with --agent-env)",
            soft_wrap=True,
            markup=False,
        )


def _nothing_left(store_path: Path, run_id: str | None) -> tuple[str, int] | None:
    """Before a resume, read-only and before anything is written: (run id, trials) if the run is already complete.

    Also refuses a resume whose --agent-env variables are not set here.
    """
    from orchestrator.store.sqlite import Store

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


def build_experiment(overrides: ExperimentOverrides, base: dict[str, Any], source: str | None) -> Experiment:
    """The experiment the flags say over ``base`` (an experiment file's mapping, or a command's own); a
    backend-specific flag the experiment's backend would ignore is refused."""
    experiment = overrides.apply(base, source)
    _refuse_ignored_flags(experiment.backend, overrides.flags())
    return experiment


def make_backend(experiment: Experiment, enforcement: str) -> Backend:
    """The experiment's backend; the local one takes --enforcement, the others their experiment section."""
    if experiment.backend == "local":
        from orchestrator.backends.local.backend import LocalBackend
        from orchestrator.errors import CgroupUnavailable

        try:
            return LocalBackend(enforcement)  # type: ignore[arg-type]
        except CgroupUnavailable as exc:
            raise UserError(f"--enforcement cgroup: no usable cgroup hierarchy ({exc})") from None
    if enforcement != "auto":
        raise UserError(
            f"--enforcement applies to the local backend only (this run uses {experiment.backend})",
            field="--enforcement",
        )
    if experiment.backend == "kubernetes":
        from orchestrator.agents.pods import pod_agent_problem

        # Before connecting to a cluster: a refusal needs none (an external agent is not refused here any more: it
        # runs on this host over pods/exec; sweep.start checks the backend's exec_channel ability).
        if problem := pod_agent_problem(experiment.agent.kind, experiment.agent.path):
            raise SpecError(problem, field="agent")
    return backends.load(experiment.backend, options=getattr(experiment, experiment.backend, None))


def _announce(backend: Backend) -> None:
    caps = backend.abilities
    if caps.enforcement == "rlimit":
        local = backend.facts().local
        err.print(
            "[bold yellow]enforcement: rlimit[/] — no cgroup could be created"
            f" ({local.enforcement_fallback_reason if local else None}). Memory is capped with RLIMIT_DATA; OOM kills cannot be"
            " observed and CPU limits are NOT enforced. Results are recorded with enforcement=rlimit.",
            soft_wrap=True,
        )
    else:
        err.print(
            f"backend: {backend.name}, enforcement: {caps.enforcement} ({', '.join(caps.enforced())}; "
            f"OOM from {caps.oom_signal}); isolation: {caps.isolation}",
            soft_wrap=True,
        )
    if caps.isolation == "none":
        err.print(
            "[bold red]isolation: none[/] — agents are not sandboxed; recorded in provenance and in every report",
            soft_wrap=True,
        )
    for note in caps.notes:
        err.print(f"[yellow]note:[/] {note}", soft_wrap=True)


def _announce_checks(prov: Provenance) -> None:
    """The canary's verdict and overcommit warnings, before the first trial runs."""
    from orchestrator.engine.canary import describe

    for line in describe(prov.canary):
        err.print(line, soft_wrap=True)
    for w in prov.overcommit.warnings if prov.overcommit else []:
        err.print(f"[bold yellow]overcommit:[/] {w}", soft_wrap=True)


def _run_sweep(
    experiment: Experiment | None,
    store_path: Path,
    *,
    resume_run: str | None,
    resume: bool,
    enforcement: str,
    canary: bool = True,
    oracle_check: bool = False,
) -> tuple[Store, str, bool]:
    """Returns (store, run_id, interrupted)."""
    from orchestrator.engine import sweep as sweep_mod
    from orchestrator.engine.progress import SweepProgress
    from orchestrator.store.sqlite import Store

    store: Store
    if resume:
        if (done := _nothing_left(store_path, resume_run)) is not None:
            err.print(
                f"run {done[0]}: all {done[1]} trials are already finished; nothing to resume "
                "(the run and its record are unchanged)"
            )
            return Store.open_existing(store_path), done[0], False
        store = Store.open_for_resume(store_path)
        run_id, experiment, tasks = sweep_mod.resume(store, resume_run)
        err.print(f"resuming run {run_id} from {store_path}")
    else:
        assert experiment is not None
        check_agent_env(list(experiment.agent.env_passthrough))
        task_list = sweep_mod.prepare(experiment)  # rejects bad input before anything is written
        pending = _store_on_record(store_path)  # a store that cannot be written is refused here, before the backend
    with make_backend(experiment, enforcement) as backend:
        if resume and backend.abilities.enforcement != (started_under := store.run(run_id).enforcement):
            err.print(
                f"[bold yellow]warning:[/] this run started under {started_under}; the rest runs under "
                f"{backend.abilities.enforcement}. Each trial records its own enforcement."
            )
        _announce(backend)
        if not resume:
            extra = _oracle_check(experiment, task_list, pending, backend) if oracle_check else None
            run_id, tasks = sweep_mod.start(
                experiment, task_list, pending, backend, argv=sys.argv, canary=canary, extra_provenance=extra
            )
            store = pending.opened if isinstance(pending, _Pending) else pending
            _announce_checks(store.provenance(run_id))
            err.print(
                f"run {run_id}: {len(tasks)} tasks x {len(experiment.configurations)} configurations x "
                f"{experiment.attempts} attempts -> {store_path}"
            )
        else:  # the nodes, or how they are set up, may have changed since the run started
            from orchestrator.engine.canary import describe

            for line in describe(
                sweep_mod.rerun_canary(store, run_id, experiment, list(tasks.values()), backend, canary=canary)
            ):
                err.print(f"(resume) {line}", soft_wrap=True)
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        counts = store.try_counts(run_id)
        try:
            with SweepProgress(err) as progress:
                result = sweep_mod.run(
                    store,
                    run_id,
                    experiment,
                    tasks,
                    backend,
                    on_result=progress.on_result,
                    on_pending=progress.on_pending,
                    stop=stop,
                )
        finally:
            signal.signal(signal.SIGTERM, previous)
    s = result.summary
    if (problem := store.verify(run_id, counts["final"] + counts["retried"] + s.ran)) is not None:
        raise UserError(problem, file=str(store_path))
    if s.interrupted and s.paused:
        err.print(
            f"[bold]paused[/]: the model provider is failing: {escape(s.paused)}. {s.ran} tries recorded this "
            f"session; no new try was started. When the provider is back: headroom resume {store_path}:{run_id}"
        )
    elif s.interrupted:
        err.print(
            f"[bold]interrupted[/]: {s.ran} tries recorded this session; nothing finished is lost. "
            f"Resume with: headroom resume {store_path}:{run_id}"
        )
    elif s.already_done:
        err.print(f"{s.already_done} trials were already finished and were not re-run")
    return store, run_id, s.interrupted


def _oracle_check(experiment: Experiment, task_list: list[Any], pending: Store, backend: Backend) -> Provenance:
    """``--oracle-check``: each task's oracle once per configuration, as a run of its own, before the sweep."""
    from orchestrator.engine import faithful, oracle_check

    faithful.check(experiment, task_list, backend)  # a refused sweep runs no oracle either
    store = _opened(pending)
    err.print(
        f"oracle check: {len(task_list)} tasks x {len(experiment.configurations)} configurations, the task's own "
        "solution once each (a run of its own, kept apart from the agent's)"
    )
    record = oracle_check.run(experiment, task_list, store, backend)
    found = oracle_check.lines(record)
    for line in found:
        err.print(f"[bold yellow]oracle check:[/] {escape(line)}", soft_wrap=True)
    if not found:
        err.print(f"oracle check: every task's oracle passes under every configuration (run {record.run_id})")
    from orchestrator.spec.provenance import Provenance as Prov

    return Prov(oracle_check=record)  # the part of the provenance the oracle check owns


def _opened(store: Store) -> Store:
    """The real store behind ``_store_on_record``'s stand-in (created now), or the store itself."""
    if isinstance(store, _Pending) and not hasattr(store, "opened"):
        from orchestrator.store.sqlite import Store as RealStore

        store.opened = RealStore(store.path)
    return store.opened if isinstance(store, _Pending) else store


class _Pending:
    """Marks the stand-in ``_store_on_record`` returns for a store file that does not exist yet."""

    opened: Store


def _store_on_record(path: Path) -> Store:
    """The store a new sweep records into, created only when ``sweep.start`` writes the run.

    Everything before that (capabilities, fit, the agent's preflight, the canary) may still refuse the
    sweep, and a refused sweep must leave no store file behind. An existing store is opened now: its
    own checks (not a headroom store, read-only) come first and nothing is created. ``sweep.start``
    touches its store only through ``create_run``; splitting it into a check and a record step would
    let this be a plain ``Store`` again.
    """
    from orchestrator.store.sqlite import Store, read_only_reason

    if path.exists():
        return Store(path)
    base = path.absolute().parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():  # what creating it would run into, said as Store says it
        raise UserError(f"cannot create the store ({base} is not a directory)", file=str(path))
    if (why := read_only_reason(path)) is not None:
        raise UserError(f"the store is read-only ({why}); copy it to a writable place to continue", file=str(path))

    class OnRecord(Store, _Pending):
        def __init__(self) -> None:  # no file yet: Store.__init__ runs in create_run
            self.path = path

        def create_run(self, **kwargs: Any) -> str:
            if not hasattr(self, "opened"):  # the oracle check (--oracle-check) may have opened it first
                self.opened = Store(path)
            return self.opened.create_run(**kwargs)

    return OnRecord()


def print_report(store: Store, run_id: str, fmt: str, compact: bool = False) -> None:
    from orchestrator.commands.reporting import print_report as show

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
@harbor_agent_option()
@agent_kwarg_option()
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
    if flags.get("harbor_agent") and given("agent_kind"):
        raise UserError("give --harbor-agent or --agent, not both", field="--harbor-agent")
    harbor_agent_overrides(flags)  # kind harbor, its name or import path, its kwargs
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
            resume_run=None,
            resume=False,
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
    store, run_id = run.open(store_path)
    with store:
        path = store.path
    _finish(
        ctx, fmt, *_run_sweep(None, path, resume_run=run_id, resume=True, enforcement=enforcement, canary=not no_canary)
    )


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
    store, rid, interrupted = _run_sweep(experiment, store_path, resume_run=None, resume=False, enforcement=enforcement)
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
    experiment = build_experiment(overrides, {"tasks_dir": "."}, None)
    run_id = None if run.text is None else run.run_id(store_path)
    with make_backend(experiment, "auto") as backend:
        report = backend.cleanup(run_id, force=force)
    for item in report.removed:
        click.echo(f"removed {item}")
    for item in report.kept:
        click.echo(f"kept    {item}")
    err.print(f"{len(report.removed)} removed, {len(report.kept)} kept")
