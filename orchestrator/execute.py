"""Run a planned experiment: bounded concurrency, resume, bounded retries of infra errors.

Only this module's caller thread writes to the store; workers only run trials.
A trial counts once it has a finished try marked final. On resume, finished
trials are skipped, tries a crash left 'running' are marked abandoned and the
trial runs again, and a trial that was waiting for a retry continues with the
next try number — so nothing is lost, re-run or counted twice.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from orchestrator.backends.base import Backend
from orchestrator.classify import Verdict, classify
from orchestrator.plan import Trial
from orchestrator.redact import redact, secret_values
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.outcome import HarnessReason, Outcome
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import Task
from orchestrator.store.sqlite import Store

ResultHook = Callable[[Trial, Verdict, bool], None]


@dataclass
class ExecutionSummary:
    total: int
    already_done: int
    ran: int = 0
    retried: int = 0
    abandoned_before: int = 0
    interrupted: bool = False
    outcomes: dict[str, int] = field(default_factory=dict)


def trials_of(store: Store, run_id: str) -> list[Trial]:
    return [
        Trial(
            trial_id=r["trial_id"], task_id=r["task_id"],
            config=ResourceConfig(request_multiplier=r["request_multiplier"], limit_multiplier=r["limit_multiplier"]),
            attempt=r["attempt"], seed=r["seed"], order=r["ord"],
        )
        for r in store.planned_trials(run_id)
    ]


def _run_guarded(backend: Backend, trial: Trial, task: Task, experiment: Experiment) -> TrialFacts | BaseException:
    try:
        return backend.run_trial(trial, task, experiment)
    except Exception as exc:  # an orchestrator bug must not take the whole sweep down
        return exc


def execute(
    store: Store,
    run_id: str,
    experiment: Experiment,
    tasks: dict[str, Task],
    backend: Backend,
    *,
    on_result: ResultHook | None = None,
    on_pending: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
) -> ExecutionSummary:
    stop = stop or threading.Event()
    store.claim(run_id)  # refuses if another live process is executing this run
    trials = trials_of(store, run_id)
    abandoned = store.abandon_running(run_id)
    secrets = secret_values(experiment.agent.env_passthrough)
    tries = store.tries(run_id)
    queue: deque[tuple[Trial, int]] = deque()
    done = 0
    for t in trials:
        rows = tries.get(t.trial_id, [])
        if any(r["final"] for r in rows):
            done += 1
            continue
        queue.append((t, 1 + max((r["try"] for r in rows), default=-1)))
    summary = ExecutionSummary(total=len(trials), already_done=done, abandoned_before=abandoned)
    if on_pending:
        on_pending(len(trials), done)
    finished_tries = {tid: sum(1 for r in rows if r["status"] == "finished") for tid, rows in tries.items()}
    store.set_status(run_id, "running")
    running: dict[Future[TrialFacts | BaseException], tuple[Trial, int]] = {}
    pool = ThreadPoolExecutor(max_workers=experiment.concurrency, thread_name_prefix="trial")
    try:
        while (queue or running) and not stop.is_set():
            while queue and len(running) < experiment.concurrency and not stop.is_set():
                trial, try_index = queue.popleft()
                store.start_try(run_id, trial.trial_id, try_index)
                fut = pool.submit(_run_guarded, backend, trial, tasks[trial.task_id], experiment)
                running[fut] = (trial, try_index)
            finished, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in finished:
                trial, try_index = running.pop(fut)
                if stop.is_set():
                    break  # a cancelled trial's facts describe the cancellation, not the trial
                result = fut.result()
                if isinstance(result, BaseException):
                    facts = _orchestrator_error_facts(result)
                    verdict = Verdict(Outcome.HARNESS_ERROR, HarnessReason.ORCHESTRATOR_ERROR.value)
                else:
                    facts, verdict = result, classify(result, experiment.reward_threshold)
                # One choke point for secrets: everything a backend saw passes through here before the store.
                facts = TrialFacts.model_validate(redact(facts.model_dump(mode="json"), secrets))
                n_finished = finished_tries.get(trial.trial_id, 0) + 1
                finished_tries[trial.trial_id] = n_finished
                retry = (
                    verdict.outcome is Outcome.INFRA_ERROR
                    and verdict.reason in experiment.retry.reasons
                    and n_finished <= experiment.retry.max_retries
                )
                if not store.finish_try(run_id, trial.trial_id, try_index, facts, verdict, final=not retry):
                    continue  # the try was settled elsewhere (abandoned); its result must not count
                summary.ran += 1
                if retry:
                    summary.retried += 1
                    queue.appendleft((trial, try_index + 1))
                else:
                    summary.outcomes[verdict.outcome.value] = summary.outcomes.get(verdict.outcome.value, 0) + 1
                if on_result:
                    on_result(trial, verdict, not retry)
    except KeyboardInterrupt:
        stop.set()
    finally:
        if stop.is_set() or queue or running:
            summary.interrupted = True
            cancel = getattr(backend, "cancel", None)
            if cancel:
                cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            store.abandon_running(run_id)
            store.set_status(run_id, "interrupted")
        else:
            pool.shutdown(wait=True)
            store.set_status(run_id, "finished")
        store.release(run_id)
    return summary


def _orchestrator_error_facts(exc: BaseException) -> TrialFacts:
    return TrialFacts(
        enforcement="unknown", request_cpus=0, request_memory_bytes=0, limit_cpus=None, limit_memory_bytes=None,
        qos_class="unknown", extra={"orchestrator_error": f"{type(exc).__name__}: {exc}"},
    )
