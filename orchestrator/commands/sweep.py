"""``headroom sweep``: a resource sweep over a task set (resume.py continues one, demo.py runs the bundled one).

The engine (pandas, httpx, the gateway, the backends) is imported when a command runs, so
``headroom --help`` loads none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from orchestrator.commands.console import err
from orchestrator.commands.experiment_flags import (
    build_experiment,
    check_env_names,
    file_notes,
    finite,
    load_experiment_file,
    nonempty,
    parse_multipliers,
)
from orchestrator.commands.options import (
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
    seed_option,
    store_option,
)
from orchestrator.commands.sweep_console import REPORT_FORMATS, finish, run_and_show
from orchestrator.errors import UserError
from orchestrator.spec.defaults import DEFAULT_MULTIPLIERS, MAX_TIMEOUT_MULTIPLIER


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
    finish(
        ctx,
        fmt,
        *run_and_show(
            experiment,
            store_path,
            enforcement=enforcement,
            canary=not no_canary,
            oracle_check=oracle_check,
        ),
    )
