"""Run a planned experiment through any backend: bounded concurrency, resume, bounded retries.

The loop only submits, observes and records; every decision is a pure function
of :mod:`orchestrator.engine.settle`. Only this loop writes to the store. A trial
counts once it has a finished try marked final. On resume, a try a crash left
``running`` is adopted if the backend says it is still alive (a pod outlives
the CLI) and abandoned otherwise; a trial waiting for a retry continues with
the next try number. Nothing is lost, run twice or counted twice.

Any error inside the loop leaves no try ``running``: in-flight tries are
cancelled and abandoned, and the run is marked ``failed`` (``interrupted`` on
Ctrl-C or SIGTERM), so a resume picks it up.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.artifacts.sink import TryKey
from orchestrator.backends.base import Backend, Handle, recorded
from orchestrator.engine.launch import build_launch, spec_digest
from orchestrator.engine.overcommit import Placement
from orchestrator.engine.services import TryServices, run_secrets
from orchestrator.engine.settle import finished_counts, pending_tries, retry_wait, settle, unstorable
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial, Verdict
from orchestrator.store.base import RunStore

ResultHook = Callable[[Trial, Verdict, bool], None]
#: How long the loop waits for a backend's news before looking again.
POLL_S = 0.5
#: How often every in-flight try is observed when the backend names the tries that changed (``changed()``):
#: between these sweeps only the named ones are, and a sweep catches what only the clock changes (a deadline).
FULL_SWEEP_S = 1.0


@dataclass
class ExecutionSummary:
    total: int
    already_done: int
    ran: int = 0
    retried: int = 0
    abandoned_before: int = 0
    adopted: int = 0
    interrupted: bool = False
    #: why the model gateway's circuit breaker paused the run (no new try started; `headroom resume` continues)
    paused: str | None = None
    outcomes: dict[str, int] = field(default_factory=dict)


def to_observe(backend: Backend, last_sweep: float) -> tuple[set[str] | None, float]:
    """Which in-flight tries to observe now (None: all of them), and the time of the last sweep of all.

    A backend that names its changed tries (``changed()``, the Pod backend) has only those observed, and every
    try once per :data:`FULL_SWEEP_S`; any other backend has every try observed on every wake-up.
    """
    changed: Callable[[], set[str]] | None = getattr(backend, "changed", None)
    if changed is None:
        return None, last_sweep
    now = time.monotonic()
    names = changed()  # taken either way: a sweep of all covers what it names
    if now - last_sweep >= FULL_SWEEP_S:
        return None, now
    return names, last_sweep


def execute(
    store: RunStore,
    run_id: str,
    experiment: Experiment,
    tasks: dict[str, Task],
    backend: Backend,
    *,
    on_result: ResultHook | None = None,
    on_pending: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
    placement: Placement | None = None,
    services: TryServices | None = None,
    secrets: list[str] | None = None,
) -> ExecutionSummary:
    """``secrets``: the run's (``services.run_secrets``, derived once by its caller); None, derived here."""
    stop = stop or threading.Event()
    store.claim(run_id)  # refuses if another live process is executing this run
    digest = spec_digest(experiment)
    secrets = run_secrets(experiment) if secrets is None else secrets
    if services is not None:  # the gateway took its keys out of the environment: its own list of them
        secrets = sorted({*secrets, *services.upstream_secrets()}, key=len, reverse=True)
    trials = store.planned(run_id)
    by_id = {t.trial_id: t for t in trials}

    def launch_of(trial: Trial, try_index: int):
        launch = build_launch(run_id, trial, try_index, tasks[trial.task_id], experiment, digest)
        return services.launch(launch) if services is not None else launch

    in_flight: dict[str, tuple[Trial, int, Handle]] = {}
    # each in-flight try's place in start order: the tries a wake-up names are observed in that order, as a sweep
    # of all is, without walking every try in flight to find them
    started = itertools.count()
    position: dict[str, int] = {}
    last_sweep = 0.0  # monotonic time of the last observation of every in-flight try
    abandoned = 0
    for trial_id, records in store.tries(run_id).items():
        for r in records:
            if r.status != "running":
                continue
            h = backend.adopt(launch_of(by_id[trial_id], r.try_index))
            if h is not None:
                in_flight[h.name] = (by_id[trial_id], r.try_index, h)
                position[h.name] = next(started)
            elif store.abandon_try(run_id, trial_id, r.try_index):
                abandoned += 1
    tries = store.tries(run_id)
    pending = pending_tries(trials, tries, in_flight=(t.trial_id for t, _, _ in in_flight.values()))
    queue = deque(pending.queue)
    finished = finished_counts(tries)
    summary = ExecutionSummary(
        total=len(trials), already_done=pending.done, abandoned_before=abandoned, adopted=len(in_flight)
    )
    if on_pending:
        on_pending(len(trials), pending.done)

    def record(trial: Trial, try_index: int, result: TrialFacts | BaseException) -> None:
        key = TryKey(run_id, trial.trial_id, try_index)
        end = services.end(key) if services is not None else None  # the try's gateway key ends here
        if end is not None and isinstance(result, TrialFacts):  # the gateway's calls are evidence for the verdict
            result = result.model_copy(update={"model_usage": end.usage})
        s = settle(
            result,
            reward_threshold=experiment.reward_threshold,
            retry=experiment.retry,
            finished_before=finished.get(trial.trial_id, 0),
            secrets=secrets + TryServices.secrets(end),
            grader=tasks[trial.task_id].spec.grader,
        )
        facts = services.complete(key, s.facts, end) if services is not None else s.facts
        try:
            stored = store.finish_try(run_id, trial.trial_id, try_index, facts, s.verdict, final=s.final)
        except Exception as exc:  # noqa: BLE001 - one try's unstorable evidence must not end the run
            s = unstorable(facts, exc, secrets)
            stored = store.finish_try(run_id, trial.trial_id, try_index, s.facts, s.verdict, final=s.final)
        if not stored:
            return  # the try was settled elsewhere (abandoned); its result must not count
        finished[trial.trial_id] = finished.get(trial.trial_id, 0) + 1
        summary.ran += 1
        if not s.final:
            summary.retried += 1
            wait = retry_wait(s, backoff_s, finished[trial.trial_id] - 1)
            if wait > 0:  # a starved try: its retry waits for the provider
                waiting.append((time.monotonic() + wait, trial, try_index + 1))
            else:
                queue.appendleft((trial, try_index + 1))
        else:
            summary.outcomes[s.verdict.outcome.value] = summary.outcomes.get(s.verdict.outcome.value, 0) + 1
        if on_result:
            on_result(trial, s.verdict, s.final)

    waiting: list[tuple[float, Trial, int]] = []  # retries of starved tries, each with the time it may start
    backoff_s = experiment.gateway.retry_backoff_s if experiment.gateway is not None else 0.0
    store.set_status(run_id, "running")
    error: BaseException | None = None
    try:
        while (in_flight or (summary.paused is None and (queue or waiting))) and not stop.is_set():
            now = time.monotonic()
            for item in [w for w in waiting if w[0] <= now]:
                waiting.remove(item)
                queue.appendleft(item[1:])
            if summary.paused is None and services is not None and services.tripped:
                summary.paused = services.tripped  # no new try: the ones running end and are recorded
            while queue and summary.paused is None and len(in_flight) < experiment.concurrency and not stop.is_set():
                trial, try_index = queue[0]
                try:
                    launch: Launch | Exception = launch_of(trial, try_index)
                except Exception as exc:  # recorded below as this try's result, like a refused submit
                    launch = exc
                if placement is not None and isinstance(launch, Launch) and not placement.admit(launch):
                    break  # limit-aware placement: wait until the head of the queue fits
                queue.popleft()
                store.start_try(run_id, trial.trial_id, try_index)
                try:
                    if isinstance(launch, Exception):
                        raise launch
                    h = backend.submit(launch)
                except Exception as exc:  # a backend bug or a refused try is recorded, not fatal
                    record(trial, try_index, exc)
                    continue
                in_flight[h.name] = (trial, try_index, h)
                position[h.name] = next(started)
                if placement is not None and isinstance(launch, Launch):
                    placement.started(h.name, launch)
            if not in_flight:
                if waiting and not queue:
                    stop.wait(min(POLL_S, max(min(w[0] for w in waiting) - time.monotonic(), 0.0)))
                continue
            backend.wait([h for _, _, h in in_flight.values()], POLL_S)
            names, last_sweep = to_observe(backend, last_sweep)
            due = list(in_flight) if names is None else sorted(names & in_flight.keys(), key=position.__getitem__)
            for name in due:
                if stop.is_set():
                    break  # a cancelled try's facts describe the cancellation, not the trial
                trial, try_index, h = in_flight[name]
                try:
                    result: TrialFacts | BaseException | None = backend.observe(h)
                except Exception as exc:
                    result = exc
                if result is None:
                    continue
                del in_flight[name]
                del position[name]
                seen = placement.finished(name) if placement is not None else None
                if seen is not None and isinstance(result, TrialFacts) and result.extra.overcommit is None:
                    result.extra.overcommit = seen  # a cluster backend's own node record wins
                record(trial, try_index, result)
                recorded(backend, h)
    except KeyboardInterrupt:
        stop.set()
    except BaseException as exc:
        error = exc
        raise
    finally:
        queue.extend((trial, try_index) for _, trial, try_index in waiting)
        if stop.is_set() or queue or in_flight or error is not None:
            summary.interrupted = True
            for trial, try_index, h in in_flight.values():
                try:
                    backend.cancel(h)
                except Exception:  # noqa: S110 - best effort: the try is abandoned either way
                    pass
                if services is not None:
                    services.abandon(TryKey(run_id, trial.trial_id, try_index))
            store.abandon_running(run_id)
            store.set_status(run_id, "failed" if error is not None else "interrupted")
        else:
            store.set_status(run_id, "finished")
        store.release(run_id)
    return summary
