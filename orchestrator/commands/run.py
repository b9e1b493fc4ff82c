"""Running sweeps: ``sweep``, ``resume``, ``demo`` and ``cleanup``.

The engine (pandas, httpx, the gateway, the backends) is imported when a command runs, so
``headroom --help`` loads none of it.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from orchestrator import backends
from orchestrator.commands.console import err
from orchestrator.commands.options import RunName, deprecated, kube_context_option, run_argument, store_option
from orchestrator.errors import SpecError, UserError, first_validation_error
from orchestrator.spec.defaults import DEFAULT_MULTIPLIERS, MAX_TIMEOUT_MULTIPLIER

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.resources import ResourceConfig
    from orchestrator.store.sqlite import Store

BUNDLED_TASKS = Path(__file__).resolve().parent.parent.parent / "tasks"
REPORT_FORMATS = ("table", "json", "markdown", "none")


def parse_multipliers(text: str) -> list[ResourceConfig]:
    """The configurations --multipliers names; a spelling that reads two ways is said out loud (see describe)."""
    from pydantic import ValidationError

    from orchestrator.spec.resources import LabelError, ResourceConfig

    try:
        return [ResourceConfig.parse(part) for part in text.split(",") if part.strip()]
    except LabelError as exc:
        raise UserError(str(exc), field="--multipliers") from None
    except ValidationError as exc:
        raise UserError(first_validation_error(exc)[1], field="--multipliers") from None


def reread_spellings(text: str, configs: list[ResourceConfig]) -> list[str]:
    """``4x`` alone means request 1x, limit 4x (as ``4`` does): said out loud, since it also reads as both at 4x.

    Refusing it would break every experiment file that writes ``3x``; a note on stderr costs nothing.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return [f"{part!r} means {c.label} (request 1x, limit {c.label.partition('/')[2]}); write {part.rstrip('xX')}x-strict "
            "for request and limit both at that multiple" for part, c in zip(parts, configs, strict=True)
            if part.lower().endswith("x") and "/" in c.label and not c.label.endswith("unbounded")]


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


def nonempty(value: str | None, flag: str) -> str | None:
    if value is not None and not value.strip():
        raise UserError("is empty; give a value or leave the flag out", field=flag)
    return value


def finite(value: float, flag: str) -> float:
    if math.isnan(value):  # click's range check lets NaN through (every comparison with it is false)
        raise UserError("not a number; give a multiple such as 1.5", field=flag)
    return value


def check_agent_env(names: list[str]) -> None:
    """Every --agent-env variable must be set here: an agent run without its key fails as if it were the model's fault."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise UserError(f"{', '.join(missing)} {verb} not set in this environment; set it before the sweep "
                        "(the agent would run without it)", field="--agent-env")


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


def build_experiment(fields: dict[str, Any], source: str | None) -> Experiment:
    from pydantic import ValidationError

    from orchestrator.spec.experiment import Experiment

    try:
        return Experiment.model_validate(fields)
    except ValidationError as exc:
        field, msg = first_validation_error(exc)
        raise SpecError(msg, file=source, field=field) from None


def make_backend(experiment: Experiment, enforcement: str) -> Backend:
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
    if experiment.backend == "kubernetes":
        from orchestrator.agents.pods import pod_agent_problem

        # Before connecting to a cluster: a refusal needs none (an external agent is not refused here any more: it
        # runs on this host over pods/exec; sweep.start checks the backend's exec_channel ability).
        if problem := pod_agent_problem(experiment.agent.kind, experiment.agent.path):
            raise SpecError(problem, field="agent")
    return backends.load(experiment.backend, options=getattr(experiment, experiment.backend, None))


def _announce(backend: Backend) -> None:
    caps = backend.capabilities
    if backend.enforcement == "rlimit":
        err.print(
            "[bold yellow]enforcement: rlimit[/] — no cgroup could be created"
            f" ({backend.facts().get('enforcement_fallback_reason')}). Memory is capped with RLIMIT_DATA; OOM kills cannot be"
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
    from orchestrator import sweep as sweep_mod
    from orchestrator.progress import SweepProgress
    from orchestrator.store.sqlite import Store

    store: Store
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
    backend = make_backend(experiment, enforcement)
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
                  f"Resume with: headroom resume {store_path}:{run_id}")
    elif s.already_done:
        err.print(f"{s.already_done} trials were already finished and were not re-run")
    return store, run_id, s.interrupted




def print_report(store: Store, run_id: str, fmt: str) -> None:
    from orchestrator.commands.reporting import print_report as show

    show(store, run_id, fmt)


KUBE_FLAGS = ("namespace", "kube_context", "queue", "keep_pods")


@click.command()
@click.argument("tasks_dir", required=False, type=click.Path(path_type=Path))
@click.option("--name", callback=lambda _c, p, v: nonempty(v, "--name"), help="run name, shown by `headroom runs` and every report (default: the experiment's name, "
              "else 'sweep')")
@click.option("--multipliers", default=",".join(DEFAULT_MULTIPLIERS), show_default=True,
              help="comma-separated configurations: 1, 1.5, 3 or 3x (request 1x, limit Nx), 1x-strict, 2x/4x, "
                   "unbounded")
@click.option("--attempts", type=click.IntRange(1, 10_000), default=3, show_default=True, help="attempts per task and configuration")
@click.option("--concurrency", type=click.IntRange(1, 256), default=2, show_default=True)
@click.option("--agent", "agent_kind", type=click.Choice(["oracle", "command", "external"]), default="oracle",
              show_default=True, help="command: runs inside the trial's environment; external: runs on the host and "
              "acts on the environment through $HEADROOM_EXEC (docs/agents.md)")
@click.option("--agent-command", help="shell command for --agent command|external (gets HEADROOM_* variables)")
@click.option("--allow-internet/--no-internet", "allow_internet", default=None,
              help="network for the agent and the trial's environment (experiment: allow_internet; agent.network and "
              "environment.network set each apart); a task with allow_internet = false never gets it")
@click.option("--agent-env", multiple=True, callback=check_env_names, metavar="NAME",
              help="host environment variable to pass to the agent, by name (its value is never recorded)")
@click.option("--model", callback=lambda _c, p, v: nonempty(v, "--model"),
              help="model id being evaluated (recorded, not interpreted)")
@click.option("--task", "task_patterns", multiple=True, help="task id or glob; repeatable (default: all)")
@store_option()
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--retries", type=click.IntRange(0, 10), default=0, show_default=True,
              help="retries of infra errors a trial cannot cause itself (not OOM kills or the storage limit); "
                   "every try stays on record")
@click.option("--timeout-multiplier", type=click.FloatRange(0, MAX_TIMEOUT_MULTIPLIER, min_open=True), default=1.0,
              show_default=True, callback=lambda _c, _p, v: finite(v, "--timeout-multiplier"),
              help="scales every task's agent and verifier timeouts")
@click.option("--enforcement", type=click.Choice(["auto", "cgroup", "rlimit"]), default="auto", show_default=True,
              help="local backend: cgroup limits, or the rlimit fallback")
@click.option("--backend", "backend_name", type=click.Choice(backends.names()), default="local", show_default=True,
              help="where trials run (the experiment field 'backend')")
@click.option("--build", is_flag=True, help="docker backend: build every task image from environment/Dockerfile")
@click.option("--experiment", "experiment_file", type=click.Path(path_type=Path), help="experiment spec (YAML); flags override")
@click.option("--namespace", help="--backend kubernetes: namespace of the trial pods (kubernetes.namespace)")
@kube_context_option("--backend kubernetes: kubeconfig context (kubernetes.context)")
@click.option("--queue", help="--backend kubernetes: Kueue LocalQueue for the trial pods (kubernetes.queue)")
@click.option("--keep-pods", is_flag=True, default=None, help="--backend kubernetes: keep harvested pods for debugging")
@click.option("--resume", is_flag=True, hidden=True)  # old spelling of `headroom resume`
@click.option("--run-id", hidden=True)  # with the old --resume
@click.option("--format", "fmt", type=click.Choice(REPORT_FORMATS), default="table", show_default=True,
              help="report printed when the sweep ends")
@click.option("--no-canary", is_flag=True, help="skip the enforcement canary (the report then says limits were not checked)")
@click.option("--placement", type=click.Choice(["default", "limit-aware"]), default="default", show_default=True,
              help="limit-aware: never run trials whose memory limits add up to more than this machine "
              "(kubernetes: each node) has")
@click.pass_context
def sweep(ctx: click.Context, tasks_dir: Path | None, name: str | None, multipliers: str, attempts: int,
          concurrency: int, agent_kind: str, agent_command: str | None, allow_internet: bool | None,
          agent_env: tuple[str, ...], model: str | None,
          task_patterns: tuple[str, ...], store_path: Path, seed: int, retries: int, timeout_multiplier: float,
          enforcement: str, backend_name: str, build: bool, experiment_file: Path | None, namespace: str | None,
          kube_context: str | None, queue: str | None, keep_pods: bool | None, resume: bool, run_id: str | None,
          fmt: str, no_canary: bool, placement: str) -> None:
    """Run a resource sweep over the tasks in TASKS_DIR (or the experiment file's tasks_dir)."""
    given = lambda n: ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT  # noqa: E731
    if run_id is not None and not resume:
        raise UserError("applies only with --resume (a new sweep always gets a new run id)", field="--run-id")
    if resume:
        deprecated("sweep --resume", "headroom resume [RUN]")
        kept = ("resume", "run_id", "store_path", "enforcement", "fmt", "no_canary")
        changed = [p.opts[0] if isinstance(p, click.Option) else p.human_readable_name
                   for p in ctx.command.params if p.name in ctx.params and p.name not in kept and given(p.name)]
        if changed:
            raise UserError(f"a resume continues the run as it was recorded; drop {', '.join(changed)}", field="--resume")
        _resume(ctx, RunName(run_id) if run_id else RunName(None), store_path, enforcement, fmt, no_canary)
        return
    fields: dict[str, Any] = load_experiment_file(experiment_file) if experiment_file else {}
    source = str(experiment_file) if experiment_file else None
    for key in ("agent", "model", "retry", "kubernetes", "docker"):  # merged with flags below, so they must be mappings
        if key in fields and not isinstance(fields[key], dict):
            raise SpecError(f"expected a mapping, got {type(fields[key]).__name__}", file=source, field=key)
    if tasks_dir is not None:
        fields["tasks_dir"] = str(tasks_dir.resolve())
    elif isinstance(fields.get("tasks_dir"), str) and experiment_file:
        # Relative to the experiment file, and stored absolute so a resume works from anywhere.
        fields["tasks_dir"] = str((experiment_file.parent / fields["tasks_dir"]).resolve())
    if "tasks_dir" not in fields:
        raise UserError("give TASKS_DIR (or tasks_dir in --experiment)")
    if name is not None:
        fields["name"] = name
    if given("multipliers") or "configurations" not in fields:
        fields["configurations"] = parse_multipliers(multipliers)
        for line in reread_spellings(multipliers, fields["configurations"]) if given("multipliers") else []:
            err.print(f"note: --multipliers {line}", soft_wrap=True, markup=False)
    for param, key, value in (("attempts", "attempts", attempts), ("concurrency", "concurrency", concurrency),
                              ("seed", "seed", seed), ("timeout_multiplier", "timeout_multiplier", timeout_multiplier)):
        if given(param) or key not in fields:
            fields[key] = value
    agent = dict(fields.get("agent") or {})
    if given("agent_kind"):
        agent["kind"] = agent_kind
    if agent_command is not None:
        if not agent_command.strip():
            raise UserError("empty command; give the shell command that runs your agent", field="--agent-command")
        agent["command"] = agent_command  # implies kind 'command' unless a kind was given
    if agent_env:
        agent["env_passthrough"] = list(agent_env)
    fields["agent"] = agent
    if allow_internet is not None:
        fields["allow_internet"] = allow_internet
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
    flags = [f"--{n.replace('_', '-')}" for n in KUBE_FLAGS if given(n) or (n == "kube_context" and kube_context)]
    _refuse_ignored_flags(experiment.backend, (["--build"] if build else []) + flags)
    _finish(ctx, fmt, *_run_sweep(experiment, store_path, resume_run=None, resume=False, enforcement=enforcement,
                                  canary=not no_canary))


def _refuse_ignored_flags(backend_name: str, flags: list[str]) -> None:
    """A backend-specific flag the run's backend does not declare is refused before anything runs."""
    if flags:
        from orchestrator.backends.abilities import refuse_flags

        refuse_flags(backend_name, backends.declared_abilities(backend_name), flags)


def _finish(ctx: click.Context, fmt: str, store: Store, run_id: str, interrupted: bool) -> None:
    """The report a sweep or a resume prints when it ends; 130 when it was interrupted."""
    if fmt != "none":
        print_report(store, run_id, fmt)
    if interrupted:
        ctx.exit(130)


def _resume(ctx: click.Context, run: RunName, store_path: Path, enforcement: str, fmt: str, no_canary: bool) -> None:
    store, run_id = run.open(store_path)
    path = store.path
    store.close()
    _finish(ctx, fmt, *_run_sweep(None, path, resume_run=run_id, resume=True, enforcement=enforcement,
                                  canary=not no_canary))


@click.command()
@run_argument()
@store_option()
@click.option("--enforcement", type=click.Choice(["auto", "cgroup", "rlimit"]), default="auto", show_default=True,
              help="local backend: cgroup limits, or the rlimit fallback (each trial records its own)")
@click.option("--format", "fmt", type=click.Choice(REPORT_FORMATS), default="table", show_default=True,
              help="report printed when the run ends")
@click.option("--no-canary", is_flag=True, help="skip re-checking enforcement before the rest runs")
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


@click.command()
@store_option(default=Path("headroom-results/demo.db"))
@click.option("--attempts", type=click.IntRange(1, 1000), default=DEMO_ATTEMPTS, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--enforcement", type=click.Choice(["auto", "cgroup", "rlimit"]), default="auto", show_default=True)
@click.pass_context
def demo(ctx: click.Context, store_path: Path, attempts: int, concurrency: int, seed: int, enforcement: str) -> None:
    """Sweep the bundled demo tasks (about 3 minutes on 2 cores) and print the report."""
    experiment = build_experiment(
        {"name": "demo", "tasks_dir": str(BUNDLED_TASKS), "configurations": list(DEMO_MULTIPLIERS),
         "attempts": attempts, "concurrency": concurrency, "seed": seed, "agent": {"kind": "oracle"},
         "model": {"name": "oracle"}},
        None,
    )
    store, rid, interrupted = _run_sweep(experiment, store_path, resume_run=None, resume=False, enforcement=enforcement)
    print_report(store, rid, "table")
    err.print(f"store: {store_path}   more: headroom report {store_path} -o report.html (or .md, .json)")
    if interrupted:
        ctx.exit(130)


@click.command()
@click.option("--backend", "backend_name", type=click.Choice(backends.names()), default="local", show_default=True)
@click.option("--run-id", help="only what this run left behind, live or not (default: every run whose process is gone)")
@click.option("--namespace", help="--backend kubernetes: namespace of the trial pods (default: 'default')")
@kube_context_option("--backend kubernetes: kubeconfig context")
@click.option("--force", is_flag=True,
              help="--backend kubernetes: also remove runs whose Lease says they are still executing")
def cleanup(backend_name: str, run_id: str | None, namespace: str | None, kube_context: str | None,
            force: bool) -> None:
    """Remove what a crashed headroom left behind: trial cgroups, work dirs, containers, pods."""
    fields: dict[str, Any] = {"tasks_dir": ".", "backend": backend_name}
    kube = {k: v for k, v in (("namespace", namespace), ("context", kube_context)) if v is not None}
    _refuse_ignored_flags(backend_name, [f for f, on in (("--namespace", namespace is not None),
                                                           ("--kube-context", kube_context is not None),
                                                           ("--force", force)) if on])
    if kube:
        fields["kubernetes"] = kube
    experiment = build_experiment(fields, None)
    backend = make_backend(experiment, "auto")
    try:
        report = backend.cleanup(run_id, force=True) if force else backend.cleanup(run_id)  # type: ignore[call-arg]
    finally:
        backend.close()
    for item in report.removed:
        click.echo(f"removed {item}")
    for item in report.kept:
        click.echo(f"kept    {item}")
    err.print(f"{len(report.removed)} removed, {len(report.kept)} kept")
