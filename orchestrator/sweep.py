"""Wire a sweep together: load tasks, plan, record, execute. Used by the CLI and the demo."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator import provenance
from orchestrator.backends.base import Backend, check_capabilities
from orchestrator.errors import SpecError
from orchestrator.execute import ExecutionSummary, ResultHook, execute
from orchestrator.plan import plan
from orchestrator.redact import redact, secret_values
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.task import Task
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import load_tasks


@dataclass
class SweepResult:
    run_id: str
    summary: ExecutionSummary


def check_agent_can_run(experiment: Experiment, tasks: list[Task]) -> None:
    if experiment.agent.kind == "oracle":
        for t in tasks:
            solve = Path(t.path) / "solution" / "solve.sh"
            if not solve.is_file():
                raise SpecError("the oracle agent needs the task's solution", file=str(solve))


def prepare(experiment: Experiment) -> list[Task]:
    """Everything that can reject the input, before anything is written."""
    tasks = load_tasks(Path(experiment.tasks_dir), experiment.tasks)
    check_agent_can_run(experiment, tasks)
    return tasks


def start(
    experiment: Experiment, tasks: list[Task], store: Store, backend: Backend, *, argv: list[str] | None = None,
) -> tuple[str, dict[str, Task]]:
    """Write the run, its provenance and its plan in one transaction."""
    check_capabilities(backend, {"gpus": max((t.spec.environment.gpus for t in tasks), default=0)})
    trials = plan(experiment, tasks)
    secrets = secret_values(experiment.agent.env_passthrough)
    spec = redact(experiment.model_dump(mode="json"), secrets)
    prov = redact(provenance.collect(backend.facts(), argv), secrets)
    run_id = store.create_run(
        name=experiment.name, backend=backend.name, enforcement=backend.enforcement, spec=spec, provenance=prov,
        tasks=tasks, trials=trials,
    )
    return run_id, {t.id: t for t in tasks}


def resume(store: Store, run_id: str | None) -> tuple[str, Experiment, dict[str, Task]]:
    """Reload a run's experiment and tasks; refuse if the tasks changed since it started."""
    info = store.run(run_id)
    store.claim(info.run_id)  # first: refuse at once if a live process is executing the run
    experiment = Experiment.model_validate(info.spec)
    if "[REDACTED]" in (experiment.agent.command or ""):
        raise SpecError(
            "the run's agent command held a secret and was stored redacted; pass secrets with --agent-env to make runs resumable",
            field="agent.command",
        )
    tasks = load_tasks(Path(experiment.tasks_dir), experiment.tasks)
    recorded = store.provenance(info.run_id)["tasks"]
    missing = sorted(set(recorded) - {t.id for t in tasks})
    if missing:
        raise SpecError(f"tasks of this run are gone: {', '.join(missing)}", file=experiment.tasks_dir)
    for t in tasks:
        if t.id in recorded and recorded[t.id]["digest"] != t.digest:
            raise SpecError("task changed since the run started (content digest differs)", file=t.path)
    return info.run_id, experiment, {t.id: t for t in tasks}


def run(
    store: Store, run_id: str, experiment: Experiment, tasks: dict[str, Task], backend: Backend,
    *, on_result: ResultHook | None = None, on_pending: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
) -> SweepResult:
    summary = execute(store, run_id, experiment, tasks, backend, on_result=on_result, on_pending=on_pending, stop=stop)
    return SweepResult(run_id, summary)
