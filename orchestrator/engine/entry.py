"""The engine's one entry point for a sweep on this host: an experiment (or a run to resume) in, a session out.

:func:`run_sweep` does all the wiring a sweep needs: it refuses what cannot run before anything is
written, builds the backend, runs the oracle check when asked, derives the run's secrets once and hands
them to everything that redacts (the run's record, its tries, the gateway and the artifact sink), runs
the canary (again, on a resume), and runs the tries. It never prints: what a person should hear goes to
``on_event`` as an :mod:`~orchestrator.engine.events` value, which a front end (the CLI) renders.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.engine import events
from orchestrator.engine.events import EventSink
from orchestrator.errors import SpecError, UserError

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend, CleanupReport
    from orchestrator.engine.execute import ExecutionSummary
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.provenance import Provenance
    from orchestrator.spec.task import Task
    from orchestrator.store.sqlite import Store


@dataclass(frozen=True)
class Resume:
    """A recorded run to continue: a run id in the store, or None for its latest run."""

    run_id: str | None = None


@dataclass(frozen=True)
class SweepOptions:
    #: the local backend's enforcement (``cgroup``, ``rlimit`` or ``auto``); the others take only ``auto``
    enforcement: str = "auto"
    #: run the enforcement canary before the first try (on a resume: again)
    canary: bool = True
    #: first run each task's oracle once per configuration, as a run of its own (a new sweep only)
    oracle_check: bool = False
    #: the command line that started the sweep, recorded in its provenance
    argv: list[str] | None = None


DEFAULTS = SweepOptions()


@dataclass
class SweepOutcome:
    """Where the run is (its store stays open for the caller to report from and close) and how the session ended."""

    store: Store
    run_id: str
    #: None when a resume found nothing left to run
    summary: ExecutionSummary | None

    @property
    def interrupted(self) -> bool:
        return self.summary is not None and self.summary.interrupted


def run_sweep(
    what: Experiment | Resume,
    store_path: Path,
    options: SweepOptions = DEFAULTS,
    on_event: EventSink = events.ignore,
) -> SweepOutcome:
    """Run a new sweep of ``what`` (an experiment) into ``store_path``, or resume a run recorded there.

    Raises :class:`~orchestrator.errors.UserError` (and its kinds) for what cannot run, before anything is
    written when the input is at fault. SIGTERM, when called on the main thread, stops the tries as Ctrl-C
    does: the session ends interrupted and a resume picks it up.
    """
    from orchestrator.engine import sweep
    from orchestrator.engine.services import run_secrets
    from orchestrator.engine.store_on_record import opened, store_on_record
    from orchestrator.store.sqlite import Store

    store: Store
    tasks: dict[str, Task]
    if isinstance(what, Resume):
        if (done := _nothing_left(store_path, what.run_id, on_event)) is not None:
            on_event(events.NothingToResume(*done))
            return SweepOutcome(Store.open_existing(store_path), done[0], None)
        store = Store.open_for_resume(store_path)
        run_id, experiment, tasks = sweep.resume(store, what.run_id)
        on_event(events.Resuming(run_id, store_path))
    else:
        experiment = what
        check_agent_env(list(experiment.agent.env_passthrough), on_event)
        task_list = sweep.prepare(experiment)  # rejects bad input before anything is written
        pending = store_on_record(store_path)  # a store that cannot be written is refused here, before the backend
    secrets = run_secrets(experiment)  # once, while the gateway's keys are still in the environment
    with make_backend(experiment, options.enforcement) as backend:
        if isinstance(what, Resume):
            if backend.abilities.enforcement != (started_under := store.run(run_id).enforcement):
                on_event(events.EnforcementChanged(started_under, backend.abilities.enforcement))
            on_event(events.BackendReady(backend))
            # the nodes, or how they are set up, may have changed since the run started
            verdict = sweep.rerun_canary(
                store, run_id, experiment, list(tasks.values()), backend, canary=options.canary
            )
            on_event(events.CanaryRerun(verdict))
        else:
            on_event(events.BackendReady(backend))
            extra = _oracle_check(experiment, task_list, pending, backend, on_event) if options.oracle_check else None
            run_id, tasks = sweep.start(
                experiment,
                task_list,
                pending,
                backend,
                argv=options.argv,
                canary=options.canary,
                extra_provenance=extra,
                secrets=secrets,
            )
            store = opened(pending)
            on_event(
                events.RunRecorded(
                    run_id,
                    store.provenance(run_id),
                    len(tasks),
                    len(experiment.configurations),
                    experiment.attempts,
                    store_path,
                )
            )
        counts = store.try_counts(run_id)
        summary = _execute(store, run_id, experiment, tasks, backend, secrets, on_event)
    if (problem := store.verify(run_id, counts["final"] + counts["retried"] + summary.ran)) is not None:
        raise UserError(problem, file=str(store_path))
    on_event(events.SessionEnded(run_id, store_path, summary))
    return SweepOutcome(store, run_id, summary)


def _execute(
    store: Store,
    run_id: str,
    experiment: Experiment,
    tasks: dict[str, Task],
    backend: Backend,
    secrets: list[str],
    on_event: EventSink,
) -> ExecutionSummary:
    """The run's tries, with SIGTERM (on the main thread) as a stop, and the loop's news as events."""
    from orchestrator.engine import sweep

    stop = threading.Event()
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) if on_main else None
    try:
        on_event(events.TriesStarting())
        try:
            result = sweep.run(
                store,
                run_id,
                experiment,
                tasks,
                backend,
                on_result=lambda trial, verdict, final: on_event(events.TryDone(trial, verdict, final)),
                on_pending=lambda total, done: on_event(events.Pending(total, done)),
                stop=stop,
                secrets=secrets,
            )
        finally:
            on_event(events.TriesEnded())
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, previous)
    return result.summary


def make_backend(experiment: Experiment, enforcement: str = "auto") -> Backend:
    """The experiment's backend; the local one takes --enforcement, the others their experiment section."""
    from orchestrator import backends

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


def cleanup(experiment: Experiment, run_id: str | None, *, force: bool = False) -> CleanupReport:
    """What a crashed headroom left behind on the experiment's backend, removed (``run_id``: only that run's)."""
    with make_backend(experiment) as backend:
        return backend.cleanup(run_id, force=force)


def check_agent_env(names: list[str], on_event: EventSink = events.ignore) -> None:
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
        on_event(events.ShortSecret(name, MIN_GUESSED_SECRET))


def _nothing_left(store_path: Path, run_id: str | None, on_event: EventSink) -> tuple[str, int] | None:
    """Before a resume, read-only and before anything is written: (run id, trials) if the run is already complete.

    Also refuses a resume whose --agent-env variables are not set here.
    """
    from orchestrator.store.sqlite import Store

    with Store.open_existing(store_path) as peek:
        info = peek.run(run_id)
        if info.spec.get("kind") == "import":
            return None  # sweep.resume says why an import cannot be resumed
        planned = peek.planned_count(info.run_id)
        if info.status == "finished" and peek.try_counts(info.run_id)["final"] >= planned:
            return info.run_id, planned
        check_agent_env(list((info.spec.get("agent") or {}).get("env_passthrough") or []), on_event)
        return None


def _oracle_check(
    experiment: Experiment, task_list: list[Task], pending: Store, backend: Backend, on_event: EventSink
) -> Provenance:
    """``--oracle-check``: each task's oracle once per configuration, as a run of its own, before the sweep."""
    from orchestrator.engine import faithful, oracle_check
    from orchestrator.engine.store_on_record import opened
    from orchestrator.spec.provenance import Provenance

    faithful.check(experiment, task_list, backend)  # a refused sweep runs no oracle either
    store = opened(pending)
    on_event(events.OracleCheckStarting(len(task_list), len(experiment.configurations)))
    record = oracle_check.run(experiment, task_list, store, backend)
    on_event(events.OracleCheckDone(record, oracle_check.lines(record)))
    return Provenance(oracle_check=record)  # the part of the provenance the oracle check owns
