"""The oracle check: each task's own solution, once per resource configuration, before the agent's sweep.

A task whose oracle fails under a configuration cannot be passed there by any agent: its spec is too low for
that configuration (or, failing everywhere, the task is broken). Scoring the agent there blames the agent for
the task. ``headroom sweep --oracle-check`` and ``headroom tasks validate --oracle-check`` run this check.

The check is a run of its own in the same store (``<name>-oracle-check``, oracle agent, one attempt, no
retries), so its trials never mix with the agent's. Its verdict is recorded in the agent's run provenance under
``oracle_check`` (:func:`verdict`), the place ``headroom runs calibrate`` reads to say "its oracle fails below
3x"::

    {"run_id": ..., "configurations": ["1x-strict", ...],          # in the experiment's order
     "results": {task: {label: "passed" | "failed" | "infra_error(oom_killed)" | ...}},
     "too_low": {task: [labels where it fails but passes under a larger one]},
     "fails_everywhere": [task, ...], "lowest_passing": {task: label},
     "tasks": {task: {"passes_from": smallest limit multiplier that passed, "unbounded", or null}},
     "no_solution": [tasks without solution/solve.sh, not checked]}
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from orchestrator.spec.provenance import OracleCheck, OraclePass, Provenance

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.resources import ResourceConfig
    from orchestrator.spec.task import Task
    from orchestrator.store.sqlite import Store


def oracle_experiment(experiment: Experiment) -> Experiment:
    """The experiment's configurations and tasks, with the oracle as the agent: one attempt, no retries."""
    # Here, not at the top: a report reads this module's ``lines`` and needs no experiment model.
    from orchestrator.spec.experiment import AgentSpec, RetryPolicy

    return experiment.model_copy(
        update={
            "name": f"{experiment.name}-oracle-check",
            "agent": AgentSpec(),
            "attempts": 1,
            "retry": RetryPolicy(max_retries=0),
            "gateway": None,
        }
    )


def _size(config: ResourceConfig) -> float:
    """A configuration's place from the tightest to the most generous (unbounded and task bands last)."""
    return float("inf") if config.limit_multiplier is None else float(config.limit_multiplier)


def verdict(run_id: str, configurations: list[ResourceConfig], outcomes: dict[tuple[str, str], str]) -> OracleCheck:
    """``outcomes``: (task, configuration label) -> outcome text. See the module's docstring for the shape."""
    labels = [c.label for c in configurations]
    by_size = [c.label for c in sorted(configurations, key=_size)]
    tasks = sorted({t for t, _ in outcomes})
    results = {t: {lab: outcomes[(t, lab)] for lab in labels if (t, lab) in outcomes} for t in tasks}
    too_low: dict[str, list[str]] = {}
    lowest: dict[str, str] = {}
    everywhere: list[str] = []
    for t in tasks:
        passing = [lab for lab in by_size if results[t].get(lab) == "passed"]
        if not passing:
            everywhere.append(t)
            continue
        lowest[t] = passing[0]
        largest_pass = by_size.index(passing[-1])
        low = [lab for lab in by_size[:largest_pass] if lab in results[t] and results[t][lab] != "passed"]
        if low:
            too_low[t] = low
    limit_of = {c.label: c.limit_multiplier for c in configurations}
    return OracleCheck(
        run_id=run_id,
        configurations=labels,
        results=results,
        too_low=too_low,
        fails_everywhere=everywhere,
        lowest_passing=lowest,
        # What `runs calibrate` reads (commands/runs/calibrate.py: oracle_checks): the smallest limit multiplier at
        # which the oracle passed ("unbounded" when only there), null when it passed at none.
        tasks={
            t: OraclePass(passes_from=None if t not in lowest else _multiplier(limit_of.get(lowest[t]))) for t in tasks
        },
    )


def _multiplier(limit: float | None) -> float | Literal["unbounded"]:
    return "unbounded" if limit is None else float(limit)


def lines(record: OracleCheck) -> list[str]:
    """What a person reads: one line per task whose oracle fails somewhere."""
    out = []
    for task, labels in sorted(record.too_low.items()):
        got = record.results[task]
        why = ", ".join(f"{lab}: {got[lab]}" for lab in labels)
        out.append(
            f"task {task}: its spec is too low for {', '.join(labels)} (its oracle fails there: {why}; "
            f"passes from {record.lowest_passing[task]})"
        )
    if unsolved := record.no_solution:
        out.append(f"not checked (no solution/solve.sh): {', '.join(unsolved)}")
    for task in record.fails_everywhere:
        got = record.results[task]
        out.append(
            f"task {task}: its oracle fails under every configuration "
            f"({', '.join(f'{lab}: {o}' for lab, o in got.items())}): the task or its solution is broken"
        )
    return out


def run(experiment: Experiment, tasks: list[Task], store: Store, backend: Backend) -> OracleCheck:
    """Run the oracle check as its own run in ``store`` and return its verdict."""
    from orchestrator.engine import sweep

    oracle = oracle_experiment(experiment)
    unsolved = sorted(t.id for t in tasks if not (Path(t.path) / "solution" / "solve.sh").is_file())
    checked = [t for t in tasks if t.id not in unsolved]
    if not checked:
        empty = verdict("", list(experiment.configurations), {})
        empty.no_solution = unsolved
        return empty
    run_id, by_id = sweep.start(
        oracle, checked, store, backend, canary=False, extra_provenance=Provenance(oracle_check_for=experiment.name)
    )
    sweep.run(store, run_id, oracle, by_id, backend)
    planned = {t.trial_id: t for t in store.planned(run_id)}
    outcomes: dict[tuple[str, str], str] = {}
    for trial_id, outcome, reason, _facts in store.final_results(run_id):
        trial = planned[trial_id]
        text = str(outcome) if outcome is not None else "unrecorded"
        outcomes[(trial.task_id, trial.config.label)] = f"{text}({reason})" if reason else text
    got = verdict(run_id, list(experiment.configurations), outcomes)
    got.no_solution = unsolved
    return got
