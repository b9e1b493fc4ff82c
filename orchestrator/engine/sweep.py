"""Wire a sweep together: load tasks, plan, record, execute. Used by the CLI and the demo."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.agentio.redact import redact
from orchestrator.agents import harbor
from orchestrator.backends.abilities import fit_checker, run_holder
from orchestrator.backends.base import Backend, check_capabilities
from orchestrator.engine import faithful, overcommit, preflight, provenance
from orchestrator.engine.canary import not_run as canary_not_run
from orchestrator.engine.canary import run_canary
from orchestrator.engine.execute import ExecutionSummary, ResultHook, execute
from orchestrator.engine.launch import trial_amounts
from orchestrator.engine.plan import plan
from orchestrator.engine.services import TryServices, run_secrets
from orchestrator.errors import SpecError
from orchestrator.spec.backend import BackendFacts
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.provenance import (
    AgentPreflight,
    AgentSandbox,
    CanaryVerdict,
    HostBoundsRecord,
    Paused,
    Provenance,
)
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import load_tasks


@dataclass
class SweepResult:
    run_id: str
    summary: ExecutionSummary


def check_agent_can_run(experiment: Experiment, tasks: list[Task]) -> None:
    experiment = harbor.hosted(experiment)  # a Harbor agent: checked as the external agent that runs it
    if experiment.gateway is not None:
        from orchestrator.agents.gateway import check

        check(experiment.gateway, experiment.agent.env_passthrough)
        if problem := preflight.gateway_problem(experiment):
            raise SpecError(problem, field="gateway")
    if experiment.agent.kind == "external":
        host_sandbox_facts(experiment, tasks)
    if experiment.agent.kind == "oracle":
        for t in tasks:
            solve = Path(t.path) / "solution" / "solve.sh"
            if not solve.is_file():
                raise SpecError("the oracle agent needs the task's solution", file=str(solve))


def host_sandbox_facts(experiment: Experiment, tasks: list[Task], store: Path | None = None) -> AgentSandbox:
    """An external agent's sandbox on this host, as provenance records it; :class:`SpecError` (one line) when it
    cannot start and the agent is not declared trusted, or when what it would show holds the tasks or the store."""
    from orchestrator.agents import host_bounds, host_sandbox
    from orchestrator.errors import SandboxUnavailable
    from orchestrator.spec.launch import HostLimits

    agent = harbor.hosted(experiment).agent
    try:
        box = host_sandbox.probe()
    except SandboxUnavailable as exc:
        if not agent.trusted:
            raise SpecError(
                f"an external agent runs in a sandbox of its own, which cannot start here ({exc}): install "
                "bubblewrap (scripts/install-sandbox.sh), or declare the agent trusted (agent.trusted: true, "
                "--trusted-agent) to run it unsandboxed as this user",
                field="agent.trusted",
            ) from None
        return AgentSandbox(sandboxed=False, trusted=True, fallback_reason=str(exc))
    assert agent.command is not None
    shown = host_sandbox.own_files(agent.command, agent.path, agent.host_paths, os.environ.get("PATH"))
    # the temporary directory holds every try's work area and exec channel, and the backends' work roots
    protected = [experiment.tasks_dir, *(t.path for t in tasks), *([str(store)] if store else [])]
    if (bad := host_sandbox.conflicts(shown, [tempfile.gettempdir()], inside=False)) is not None:
        raise SpecError(
            f"the external agent's sandbox would show {bad}, where every try's files are: name a directory of "
            "the agent's own",
            field="agent.path",
        )
    if (bad := host_sandbox.conflicts(shown, protected)) is not None:
        raise SpecError(
            f"the external agent's sandbox would show {bad}: keep the agent's files apart from the tasks and the store",
            field="agent.path",
        )
    named = {os.path.abspath(p) for p in agent.host_paths}
    found = [p for p in shown if p not in named]  # what the user named is shown as named, credential or not
    if (bad := host_sandbox.conflicts(found, host_sandbox.credentials(os.environ))) is not None or (
        bad := host_sandbox.conflicts(found, host_sandbox.homes(), inside=False)
    ) is not None:
        raise SpecError(
            f"the external agent's sandbox would show {bad}, a credential of this host: keep the agent's files "
            "apart from it, or name what it needs in agent.host_paths",
            field="agent.path",
        )
    bounds = HostBoundsRecord.model_validate(host_bounds.describe(agent.host_limits or HostLimits()))
    described = box.describe()
    return AgentSandbox.model_validate(
        {"sandboxed": True, "trusted": agent.trusted, "shown_read_only": shown, **described, "bounds": bounds}
    )


def prepare(experiment: Experiment) -> list[Task]:
    """Everything that can reject the input, before anything is written."""
    tasks = load_tasks(Path(experiment.tasks_dir), experiment.tasks)
    check_agent_can_run(experiment, tasks)
    check_task_bands(experiment, tasks)
    return tasks


def check_task_bands(experiment: Experiment, tasks: list[Task]) -> None:
    """A task-band arm needs every task's ceiling; refuse before anything runs."""
    if not any(c.task_band for c in experiment.configurations):
        return
    for t in tasks:
        if t.spec.environment.memory_limit_mb is None:
            raise SpecError(
                "a task-band configuration needs each task's ceiling (memory_limit_mb); "
                "write it with `headroom runs calibrate RUN --tasks-out DIR`",
                file=str(Path(t.path) / "task.toml"),
                field="environment.memory_limit_mb",
            )


def start(
    experiment: Experiment,
    tasks: list[Task],
    store: Store,
    backend: Backend,
    *,
    argv: list[str] | None = None,
    canary: bool = False,
    extra_provenance: Provenance | None = None,
    secrets: list[str] | None = None,
) -> tuple[str, dict[str, Task]]:
    """Write the run, its provenance and its plan in one transaction.

    With ``canary``, the enforcement canary (:mod:`orchestrator.engine.canary`) runs first on this
    backend for every configuration, and its verdict goes into the provenance. ``extra_provenance``: the parts
    a caller owns (the oracle check's verdict, engine/oracle_check.py), each part it set. ``secrets``: the run's
    (``services.run_secrets``, derived once by the caller, engine/entry.py); None, derived here.
    """
    faithfulness = faithful.check(experiment, tasks, backend)  # a task the backend would run wrongly is refused
    check_capabilities(
        backend,
        {
            "gpus": max((t.spec.environment.gpus for t in tasks), default=0),
            "without_tests": [t.id for t in tasks if not t.has_tests],
        },
    )
    trials = plan(experiment, tasks)
    check_fit(backend, tasks, trials, experiment.placement)
    placement_for(experiment, backend)  # a placement the backend cannot keep is refused before the run is written
    host_side = experiment.agent.kind in ("external", "harbor")
    if host_side and not backend.abilities.exec_channel:
        raise SpecError(
            f"external agents need an exec channel, which the {backend.name} backend does not give yet "
            "(local, docker and kubernetes do)",
            field="agent.kind",
        )
    preflight_note = preflight.check(experiment, trials, tasks, backend)  # refuses an agent that cannot start
    secrets = run_secrets(experiment) if secrets is None else secrets
    spec = redact(experiment.model_dump(mode="json"), secrets)
    prov = provenance.collect(backend.facts(), argv)
    prov.faithful = faithfulness
    for part in extra_provenance.model_fields_set if extra_provenance else ():
        setattr(prov, part, getattr(extra_provenance, part))
    if host_side:
        prov.agent_sandbox = host_sandbox_facts(experiment, tasks, store.path)
    if experiment.agent.kind != "oracle":
        prov.agent_preflight = AgentPreflight(
            where="host" if host_side else backend.name, checked=preflight_note is None, note=preflight_note
        )
    prov.canary = (
        run_canary(backend, list(experiment.configurations), image=canary_image(experiment, tasks, backend))
        if canary
        else canary_not_run("not requested (--no-canary)")
    )
    facts = prov.backend or BackendFacts.from_stored({})
    prov.overcommit = overcommit.warnings_for(
        experiment, tasks, overcommit.capacity_of(facts), overcommit.node_capacities(facts)
    )
    # Every part redacted, not only those known to hold input: a secret must never reach the record.
    prov = Provenance.model_validate(redact(prov.to_stored(), secrets))
    run_id = store.create_run(
        name=experiment.name,
        backend=backend.name,
        enforcement=backend.abilities.enforcement,
        spec=spec,
        provenance=prov,
        tasks=tasks,
        trials=trials,
    )
    return run_id, {t.id: t for t in tasks}


def check_fit(backend: Backend, tasks: list[Task], trials: list[Trial], placement: str = "default") -> None:
    """A backend that knows its nodes refuses, before anything is written, a try no node could hold
    (and, under limit-aware placement, a run no node is set up to place by limit)."""
    checker = fit_checker(backend)
    if checker is None:
        return
    by_id = {t.id: t for t in tasks}
    needs = {(tr.task_id, tr.config.label): trial_amounts(by_id[tr.task_id], tr) for tr in trials}
    checker.check_fit([(task_id, label, amounts) for (task_id, label), amounts in needs.items()], placement=placement)


def canary_image(experiment: Experiment, tasks: list[Task], backend: Backend) -> str | None:
    """The image of the canary's try on a cluster: the experiment's, else the first task's that names one.

    Other backends keep their own way (the docker backend's ``default_image``; none locally).
    """
    if not backend.abilities.canary_needs_image:
        return None
    return experiment.image or next(
        (t.spec.environment.docker_image for t in sorted(tasks, key=lambda t: t.id) if t.spec.environment.docker_image),
        None,
    )


def rerun_canary(
    store: Store, run_id: str, experiment: Experiment, tasks: list[Task], backend: Backend, *, canary: bool = True
) -> CanaryVerdict:
    """On ``--resume``: the canary again (the backend, its nodes or their setup may have changed since the start).

    Appended to the provenance's ``canary_resumed`` list; the canary of the start stays as it was.
    """
    got = (
        run_canary(backend, list(experiment.configurations), image=canary_image(experiment, tasks, backend))
        if canary
        else canary_not_run("not requested (--no-canary)")
    )
    got.resumed_at = datetime.now(UTC).isoformat(timespec="seconds")
    store.append_canary_resumed(run_id, got)
    return got


def resume(store: Store, run_id: str | None) -> tuple[str, Experiment, dict[str, Task]]:
    """Reload a run's experiment and tasks; refuse if the tasks changed since it started."""
    info = store.run(run_id)
    if info.spec.get("kind") == "import":
        raise SpecError(
            f"run {info.run_id} was imported from results made elsewhere; there is nothing to resume", field="RUN"
        )
    store.claim(info.run_id)  # first: refuse at once if a live process is executing the run
    experiment = Experiment.model_validate(info.spec)
    if "[REDACTED]" in (experiment.agent.command or ""):
        raise SpecError(
            "the run's agent command held a secret and was stored redacted; pass secrets with --agent-env to make runs resumable",
            field="agent.command",
        )
    tasks = load_tasks(Path(experiment.tasks_dir), experiment.tasks)
    check_agent_can_run(experiment, tasks)
    recorded = store.provenance(info.run_id).tasks
    missing = sorted(set(recorded) - {t.id for t in tasks})
    if missing:
        raise SpecError(f"tasks of this run are gone: {', '.join(missing)}", file=experiment.tasks_dir)
    for t in tasks:
        if t.id in recorded and recorded[t.id].digest != t.digest:
            raise SpecError("task changed since the run started (content digest differs)", file=t.path)
    return info.run_id, experiment, {t.id: t for t in tasks}


def placement_for(experiment: Experiment, backend: Backend) -> overcommit.Placement | None:
    """The engine's overcommit record-keeper for one host (local, docker); a cluster backend records per node.

    The kubernetes backend places a limit-aware try itself (the Launch carries ``placement``; its
    pod requests an extended resource, see ``backends/kubernetes/limit_resource.py``). The Docker
    backend runs every container on its daemon's host, so the engine caps and records there,
    against the memory the daemon reports.
    """
    if backend.abilities.places_tries:
        return None
    capacity = overcommit.capacity_of(backend.facts())
    if capacity is None and experiment.placement == "limit-aware":
        raise SpecError(
            f"--placement limit-aware needs the host's memory, and the {backend.name} backend reports none",
            field="placement",
        )
    return overcommit.Placement(capacity, experiment.placement)


def run(
    store: Store,
    run_id: str,
    experiment: Experiment,
    tasks: dict[str, Task],
    backend: Backend,
    *,
    on_result: ResultHook | None = None,
    on_pending: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
    secrets: list[str] | None = None,
) -> SweepResult:
    """Execute the run's pending tries, with its services around them. ``secrets``: as :func:`start`'s."""
    secrets = run_secrets(experiment) if secrets is None else secrets  # before the gateway takes its keys
    holder = run_holder(backend)
    if holder is not None:  # a liveness signal other processes' cleanup can see (kubernetes: a Lease)
        holder.hold_run(run_id)
    placement = placement_for(experiment, backend)
    # The run's artifact sink and, if the experiment has one, its model gateway: started before the first try
    # (a resume starts a new gateway: keys of tries that ended with the old one stay refused), stopped at the end.
    services = TryServices.open(store.path, experiment, run_id, secrets)
    try:
        summary = execute(
            store,
            run_id,
            experiment,
            tasks,
            backend,
            on_result=on_result,
            on_pending=on_pending,
            stop=stop,
            placement=placement,
            services=services,
            secrets=secrets,
        )
    finally:
        services.close()
    if summary.paused and summary.interrupted:  # on record: the run stopped for its provider, not for its trials
        at = datetime.now(UTC).isoformat(timespec="seconds")
        store.append_paused(run_id, Paused(at=at, why=summary.paused))
    return SweepResult(run_id, summary)
