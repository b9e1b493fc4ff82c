"""The controller's bookkeeping over a plan and its Trials, without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.controller.planned import CompactPlan
from orchestrator.controller.progress import (
    ExperimentStatus,
    experiment_status,
    ledger,
    wilson,
)
from orchestrator.controller.reconcile import bounded_evidence
from orchestrator.spec.evidence import Evidence, PodEvent
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import Task, TaskSpec
from orchestrator.stats.proportions import wilson as stats_wilson


def _tasks(n: int) -> list[Task]:
    spec = TaskSpec.model_validate(
        {"environment": {"cpus": 1, "memory_mb": 64}, "agent": {"timeout_sec": 5}, "verifier": {"timeout_sec": 5}}
    )
    return [Task(id=f"t{i}", path=f"/x/t{i}", spec=spec, instruction="", digest=f"{i:064d}") for i in range(n)]


def _experiment(**kw: Any) -> Experiment:
    return Experiment(
        tasks_dir="/x",
        configurations=[ResourceConfig.parse(c) for c in ("1x-strict", "3x", "unbounded")],
        attempts=2,
        **kw,
    )


def _trial(
    trial_id: str,
    label: str,
    try_: int,
    phase: str | None = None,
    outcome: str | None = None,
    final: bool | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if outcome:
        status.update(outcome=outcome, final=final)
    return {
        "metadata": {"name": f"{trial_id}-{try_}".replace(":", "-")},
        "spec": {"trialId": trial_id, "try": try_, "configuration": {"label": label}},
        "status": status,
    }


def test_ledger_counts_done_running_and_due() -> None:
    p = CompactPlan.of(_experiment(), _tasks(2))  # 2 tasks x 3 configs x 2 attempts
    assert len(p) == 12
    a, b, c, d = p[0], p[1], p[2], p[3]
    trials = [
        _trial(a.trial_id, a.config.label, 0, "Finished", "passed", True),
        _trial(b.trial_id, b.config.label, 0, "Running"),
        _trial(c.trial_id, c.config.label, 0, "Finished", "infra_error", False),  # retried: try 1 is due
        _trial(d.trial_id, d.config.label, 0, "Finished", "infra_error", False),
        _trial(d.trial_id, d.config.label, 1, "Finished", "infra_error", True),
    ]
    book = ledger(p, trials)
    assert {t["spec"]["trialId"] for t in book.final} == {a.trial_id, d.trial_id} and len(book.final) == 2
    assert [t["spec"]["trialId"] for t in book.in_flight] == [b.trial_id]
    assert book.to_start[0].trial.trial_id == c.trial_id  # the retry comes first
    assert (book.to_start[0].try_index, book.to_start[0].retry_of) == (1, "-".join(c.trial_id.split(":")) + "-0")
    assert [x.trial.trial_id for x in book.to_start[1:]] == [t.trial_id for t in p[4:]]  # then the plan's order
    assert all(x.try_index == 0 and x.retry_of is None for x in book.to_start[1:])
    assert book.all_tries == 5 and book.retried == 2


def test_status_counts_and_intervals() -> None:
    p = CompactPlan.of(_experiment(), _tasks(2))
    strict = [t for t in p if t.config.label == "1x-strict"]
    trials = [
        _trial(strict[0].trial_id, "1x-strict", 0, "Finished", "infra_error", True),
        _trial(strict[1].trial_id, "1x-strict", 0, "Finished", "passed", True),
        _trial(strict[2].trial_id, "1x-strict", 0, "Running"),
    ]
    book = ledger(p, trials)
    st = experiment_status(
        ExperimentStatus(), generation=3, run_id="r-1", plan=p, book=book, task_digests={"t0": "a", "t1": "b"}
    )
    assert (st.phase, st.progress, st.in_flight, st.observed_generation) == ("Running", "2/12", 1, 3)
    c = {x.configuration: x for x in st.configurations}
    assert [x.configuration for x in st.configurations] == ["1x-strict", "1x/3x", "unbounded"]
    assert (c["1x-strict"].finished, c["1x-strict"].infra_error, c["1x-strict"].passed) == (2, 1, 1)
    assert c["1x-strict"].infra_error_rate.estimate == 0.5
    assert c["1x/3x"].pass_rate.estimate is None  # nothing finished: no interval
    assert st.infra_errors == "1x-strict=50% 1x/3x=- unbounded=-"
    conds = {x.type: x for x in st.conditions}
    assert conds["Complete"].status == "False" and conds["Progressing"].status == "True"
    again = experiment_status(st, generation=3, run_id="r-1", plan=p, book=book, task_digests={"t0": "a", "t1": "b"})
    assert again.conditions == st.conditions  # no flip, no new transition time


def test_status_complete() -> None:
    p = CompactPlan.of(_experiment(), _tasks(1))
    trials = [_trial(t.trial_id, t.config.label, 0, "Finished", "failed", True) for t in p]
    st = experiment_status(
        ExperimentStatus(), generation=1, run_id="r", plan=p, book=ledger(p, trials), task_digests={}
    )
    assert st.phase == "Complete" and st.completed_at and st.finished == st.planned == 6


@pytest.mark.parametrize("n", [1, 2, 5, 17, 100, 1000])
def test_wilson_matches_the_stats_package(n: int) -> None:
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        mine, ref = wilson(k, n), stats_wilson(k, n)
        assert mine.estimate == pytest.approx(ref.estimate, abs=1e-12)
        assert mine.low == pytest.approx(ref.low, abs=1e-9)
        assert mine.high == pytest.approx(ref.high, abs=1e-9)


def test_evidence_is_bounded() -> None:
    big = TrialFacts(
        enforcement="kubernetes",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=1,
        limit_memory_bytes=1,
        qos_class="Guaranteed",
        agent=StepFacts(name="agent", stdout_tail="x" * 50_000),
        extra=Evidence(events=[PodEvent(message="e" * 100)] * 300, node="n1"),
    )
    ev, cut = bounded_evidence(big, limit=8192)
    import json

    assert cut and len(json.dumps(ev, separators=(",", ":"))) <= 8192
    assert ev["agent"]["stdout_tail"].endswith("x" * 100)  # the end of the log is what explains a failure
    small = big.model_copy(update={"agent": None, "extra": Evidence()})
    ev, cut = bounded_evidence(small)
    assert not cut and TrialFacts.model_validate(ev) == small
