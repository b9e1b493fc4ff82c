"""Pure functions over an Experiment's plan and its Trial resources: what to do next, and its status.

No API calls here: the reconcile loop feeds these the cache and writes what they return,
so the bookkeeping is unit-tested without a cluster.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from statistics import NormalDist
from typing import Any, Literal

from orchestrator.controller.planned import CompactPlan
from orchestrator.controller.resources import (
    Condition,
    ConfigurationStatus,
    ExperimentStatus,
    Interval,
)
from orchestrator.spec.outcome import current_outcome
from orchestrator.spec.trial import Trial as PlannedTrial

Obj = dict[str, Any]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Pending:
    """A try to start: which planned trial (by plan order), which try number, and the Trial it retries.

    A fresh Experiment has every planned trial pending: the planned trial is built only when
    asked for (``trial``), for the few a reconcile starts.
    """

    plan: CompactPlan
    order: int
    try_index: int
    retry_of: str | None

    @property
    def trial(self) -> PlannedTrial:
        return self.plan[self.order]


@dataclass
class Ledger:
    """The plan read against the Trials that exist."""

    planned: int
    # The Trial that is each finished planned trial's result (one per planned trial: the ledger is keyed by plan
    # order). A list, not a dict by trial id: with 100,000 finished Trials a reconcile's dict was 5 MB of the peak.
    final: list[Obj] = field(default_factory=list)
    in_flight: list[Obj] = field(default_factory=list)
    to_start: list[Pending] = field(default_factory=list)
    all_tries: int = 0
    retried: int = 0
    retried_by_label: dict[str, int] = field(default_factory=dict)
    finished_unplanned: int = 0  # Trials of trial ids no longer in the plan (never counted)


def is_finished(t: Obj) -> bool:
    """Over: settled (Finished) or abandoned. Only a Finished try with final=true counts."""
    return (t.get("status") or {}).get("phase") in ("Finished", "Abandoned")


def ledger(plan: CompactPlan, trials: Iterable[Obj]) -> Ledger:
    """What is done, what runs, what to start next (retries first, then the plan's order)."""
    # Each planned trial's tries, by plan order: the Trial itself while it has one (the usual
    # case), a list from its second; nothing is allocated per planned trial that has none.
    slots: list[Any] = [None] * len(plan)
    out = Ledger(planned=len(plan))
    for t in trials:
        out.all_tries += 1
        order = plan.order_of(t["spec"]["trialId"])
        if order is None:
            out.finished_unplanned += 1
            continue
        held = slots[order]
        if held is None:
            slots[order] = t
        elif isinstance(held, list):
            held.append(t)
        else:
            slots[order] = [held, t]
    retries: list[Pending] = []
    fresh: list[Pending] = []
    for order, held in enumerate(slots):
        if held is None:
            fresh.append(Pending(plan, order, 0, None))
            continue
        tries = sorted(held, key=lambda t: t["spec"]["try"]) if isinstance(held, list) else [held]
        before = out.retried
        _settle_one(plan, order, tries, out, retries)
        if out.retried > before:
            lab = plan.label(order)
            out.retried_by_label[lab] = out.retried_by_label.get(lab, 0) + out.retried - before
    out.to_start = retries + fresh
    return out


def _settle_one(plan: CompactPlan, order: int, tries: list[Obj], out: Ledger, retries: list[Pending]) -> None:
    """Sort one planned trial's tries (ordered by try number, at least one) into the ledger."""
    final = next((t for t in tries if is_finished(t) and t["status"].get("final")), None)
    if final is not None:
        out.final.append(final)
        out.retried += sum(1 for t in tries if is_finished(t) and not t["status"].get("final"))
        return
    running = [t for t in tries if not is_finished(t)]
    if running:
        out.in_flight.extend(running)
        out.retried += sum(1 for t in tries if is_finished(t))
        return
    # the latest try finished and was not final: its retry is due
    last = tries[-1]
    out.retried += len(tries)
    retries.append(Pending(plan, order, last["spec"]["try"] + 1, last["metadata"]["name"]))


# ---- statistics for the status ---------------------------------------------------------

_Z95 = NormalDist().inv_cdf(0.975)


def wilson(k: int, n: int) -> Interval:
    """Wilson 95% score interval.

    The closed form, with the normal quantile from the standard library, rather than
    ``orchestrator.stats.proportions.wilson``: importing statsmodels costs the long-running
    controller about 100 MB of memory for a status field. A test checks this against the
    statsmodels-based function on a grid of k and n; reports use the stats package.
    """
    if n <= 0:
        return Interval(k=k, n=n)
    p = k / n
    z2 = _Z95 * _Z95
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return Interval(k=k, n=n, estimate=p, low=max(0.0, centre - half), high=min(1.0, centre + half))


def configuration_status(plan: CompactPlan, book: Ledger) -> list[ConfigurationStatus]:
    planned = plan.planned_by_label()
    counts: dict[str, dict[str, int]] = {lab: defaultdict(int) for lab in planned}
    for t in book.final:
        st = t["status"]
        outcome, _ = current_outcome(
            st.get("outcome"), st.get("reason")
        )  # a Trial settled before abstained was an outcome
        counts[t["spec"]["configuration"]["label"]][outcome or "harness_error"] += 1
    in_flight: dict[str, int] = defaultdict(int)
    for t in book.in_flight:
        in_flight[t["spec"]["configuration"]["label"]] += 1
    sort_key = {c.label: c.sort_key for c in plan.configs}
    order = sorted(planned, key=lambda lab: sort_key[lab])
    out = []
    for lab in order:
        c = counts[lab]
        finished = sum(c.values())
        out.append(
            ConfigurationStatus(
                configuration=lab,
                planned=planned[lab],
                finished=finished,
                in_flight=in_flight[lab],
                passed=c["passed"],
                failed=c["failed"],
                timeout=c["timeout"],
                infra_error=c["infra_error"],
                harness_error=c["harness_error"],
                abstained=c["abstained"],
                retried=book.retried_by_label.get(lab, 0),
                pass_rate=wilson(c["passed"], finished),
                infra_error_rate=wilson(c["infra_error"], finished),
                abstention_rate=wilson(c["abstained"], finished),
            )
        )
    return out


def set_condition(
    conditions: list[Condition], type_: str, status: bool, reason: str, message: str, generation: int | None
) -> list[Condition]:
    """Conditions with ``type_`` set; the transition time moves only when the status flips."""
    value: Literal["True", "False"] = "True" if status else "False"
    out = []
    found = False
    for c in conditions:
        if c.type == type_:
            found = True
            when = c.last_transition_time if c.status == value else now_rfc3339()
            out.append(
                Condition(
                    type=type_,
                    status=value,
                    reason=reason,
                    message=message,
                    last_transition_time=when,
                    observed_generation=generation,
                )
            )
        else:
            out.append(c)
    if not found:
        out.append(
            Condition(
                type=type_,
                status=value,
                reason=reason,
                message=message,
                last_transition_time=now_rfc3339(),
                observed_generation=generation,
            )
        )
    return out


def experiment_status(
    previous: ExperimentStatus,
    *,
    generation: int | None,
    run_id: str,
    plan: CompactPlan,
    book: Ledger,
    task_digests: dict[str, str],
) -> ExperimentStatus:
    configs = configuration_status(plan, book)
    finished = len(book.final)
    complete = finished == book.planned
    started = book.all_tries > 0
    st = previous.model_copy(deep=True)
    st.observed_generation = generation
    st.run_id = run_id
    st.planned = book.planned
    st.finished = finished
    st.in_flight = len(book.in_flight)
    st.tries = book.all_tries
    st.progress = f"{finished}/{book.planned}"
    st.infra_errors = " ".join(
        f"{c.configuration}={c.infra_error_rate.estimate:.0%}"
        if c.infra_error_rate.estimate is not None
        else f"{c.configuration}=-"
        for c in configs
    )
    st.task_digests = task_digests
    st.configurations = configs
    st.phase = "Complete" if complete else ("Running" if started else "Pending")
    if started and st.started_at is None:
        st.started_at = now_rfc3339()
    if complete and st.completed_at is None:
        st.completed_at = now_rfc3339()
    conds = set_condition(
        st.conditions, "Planned", True, "Planned", f"{book.planned} trials over {len(task_digests)} tasks", generation
    )
    conds = set_condition(
        conds,
        "Progressing",
        not complete,
        "Complete" if complete else "TrialsRunning",
        f"{finished} of {book.planned} trials finished, {len(book.in_flight)} in flight",
        generation,
    )
    conds = set_condition(
        conds,
        "Complete",
        complete,
        "AllTrialsFinished" if complete else "TrialsRemaining",
        f"{finished}/{book.planned}",
        generation,
    )
    st.conditions = conds
    return st


def failed_status(
    previous: ExperimentStatus, *, generation: int | None, reason: str, message: str, terminal: bool
) -> ExperimentStatus:
    st = previous.model_copy(deep=True)
    st.observed_generation = generation
    if terminal:
        st.phase = "Failed"
    st.conditions = set_condition(st.conditions, "Planned", False, reason, message, generation)
    return st
