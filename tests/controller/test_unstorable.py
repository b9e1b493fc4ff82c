"""A try whose result the API server will not store is recorded against that try, as the CLI's loop records it.

Before: the reconciler re-raised when writing the Trial's status failed, let go of the handle, and the next
pass harvested the same pod and failed the same write, forever (the pod held by its finalizer, the
Experiment never finishing). Now a refusal of the data (4xx) is recorded at once as
``harness_error(orchestrator_error)`` with the reason in ``extra.storage_error``, and a transient failure
(5xx, unreachable, conflicts) is retried on later passes, a bounded number of times.

The API server here is a stand-in for the Trial status endpoint: a real one cannot be made to refuse a
valid, bounded status on demand (tests/cluster runs the reconciler against the real one). The reconciler,
its settlement and its writes are the real ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import structlog
from kubernetes.client.exceptions import ApiException

from orchestrator.backends.base import Handle
from orchestrator.controller.metrics import Metrics
from orchestrator.controller.planned import CompactPlan
from orchestrator.controller.reconcile import WRITE_ATTEMPTS, Reconciler, _Plan
from orchestrator.controller.resources import ExperimentResourceSpec, TaskSource
from orchestrator.spec.backend import BackendAbilities
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.task import Task, TaskSpec

MARK = "agent-data-the-server-refuses"


class _StatusApi:
    """The Trial status endpoint: stores what it accepts, refuses what ``refuse(body)`` names with its status."""

    def __init__(self, trial: dict[str, Any], refuse: Callable[[dict[str, Any]], int | None]) -> None:
        self.objects = {trial["metadata"]["name"]: trial}
        self.refuse = refuse
        self.writes: list[dict[str, Any]] = []

    def replace_namespaced_custom_object_status(
        self, group: str, version: str, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.writes.append(body)
        if (status := self.refuse(body)) is not None:
            raise ApiException(status=status, reason="refused by the stand-in")
        rv = str(int(self.objects[name]["metadata"]["resourceVersion"]) + 1)
        stored = {
            **self.objects[name],
            "status": body["status"],
            "metadata": {**self.objects[name]["metadata"], "resourceVersion": rv},
        }
        self.objects[name] = stored
        return stored

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> dict[str, Any]:
        return self.objects[name]


class _TrialCache:
    """The informer's cache of Trials, over the stand-in's objects."""

    def __init__(self, api: _StatusApi) -> None:
        self.api = api

    def get(self, name: str) -> dict[str, Any] | None:
        return self.api.objects.get(name)

    def upsert(self, obj: dict[str, Any]) -> None:
        self.api.objects[obj["metadata"]["name"]] = obj

    def items(self) -> list[dict[str, Any]]:
        return list(self.api.objects.values())


class _EndedTry:
    """A backend whose one try has ended; it keeps its pod until told the result is recorded."""

    abilities = BackendAbilities(recorded=True)

    def __init__(self, facts: TrialFacts) -> None:
        self.facts, self.observed, self.released = facts, 0, 0

    def observe(self, handle: Handle) -> TrialFacts:
        self.observed += 1
        return self.facts

    def recorded(self, handle: Handle) -> None:
        self.released += 1


def _setup(refuse: Callable[[dict[str, Any]], int | None]) -> tuple[Reconciler, _StatusApi, _EndedTry, Any]:
    spec = TaskSpec.model_validate(
        {"environment": {"cpus": 1, "memory_mb": 64}, "agent": {"timeout_sec": 5}, "verifier": {"timeout_sec": 5}}
    )
    task = Task(id="t", path="/x/t", spec=spec, instruction="", digest="0" * 64)
    experiment = ExperimentResourceSpec(task_source=TaskSource(bundle="b"), configurations=["unbounded"], attempts=1)
    trials = CompactPlan.of(experiment, [task])
    [planned_trial] = trials
    planned = _Plan(key=("e", 1, "d"), digest="d", experiment=experiment, tasks={"t": task}, trials=trials)
    name = "e-t-0"
    trial = {
        "metadata": {"name": name, "resourceVersion": "1", "uid": "u", "creationTimestamp": None},
        "spec": {
            "trialId": planned_trial.trial_id,
            "try": 0,
            "runId": "e-u",
            "experiment": "e",
            "configuration": {"label": "unbounded"},
        },
        "status": {"phase": "Running"},
    }
    api = _StatusApi(trial, refuse)
    facts = TrialFacts(
        enforcement="kubernetes",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="BestEffort",
        reward=0.0,
        agent=StepFacts(name="agent", exit_code=0, stdout_tail=MARK),
        verifier=StepFacts(name="verifier", exit_code=0),
    )
    backend = _EndedTry(facts)
    rec = Reconciler(
        namespace="ns",
        custom=api,
        core=None,
        experiments=None,
        trials=_TrialCache(api),  # type: ignore[arg-type]
        make_backend=lambda n, s: backend,
        metrics=Metrics(),
        events=None,
    )  # type: ignore[arg-type,return-value]
    handle = Handle(name=name, run_id="e-u", trial_id=planned_trial.trial_id, try_index=0, backend="kubernetes")
    rec._handles[name] = ("e", handle)

    def advance() -> bool:
        return rec._advance({"metadata": {"name": "e"}}, planned, api.objects[name], structlog.get_logger("test"))

    return rec, api, backend, advance


def _agent_data(body: dict[str, Any]) -> bool:
    return MARK in str(body["status"].get("evidence"))


def test_a_result_the_api_server_refuses_is_recorded_against_the_try_and_its_pod_released() -> None:
    rec, api, backend, advance = _setup(lambda body: 422 if _agent_data(body) else None)
    assert advance() is True
    status = api.objects["e-t-0"]["status"]
    assert (status["phase"], status["outcome"], status["reason"], status["final"]) == (
        "Finished",
        "harness_error",
        "orchestrator_error",
        True,
    )
    assert "storing the try's evidence failed" in status["evidence"]["extra"]["storage_error"]
    assert "422" in status["evidence"]["extra"]["storage_error"]
    assert backend.released == 1 and backend.observed == 1  # the pod may go; nobody harvests it again
    assert "e-t-0" not in rec._handles and not rec._write_failures


def _adopt(rec: Reconciler, api: _StatusApi) -> None:
    """Hand the try back to the reconciler, as its next pass adopts the still-held pod."""
    rec._handles["e-t-0"] = (
        "e",
        Handle(
            name="e-t-0",
            run_id="e-u",
            trial_id=api.objects["e-t-0"]["spec"]["trialId"],
            try_index=0,
            backend="kubernetes",
        ),
    )


def test_a_transient_failure_is_retried_on_later_passes_then_recorded() -> None:
    rec, api, backend, advance = _setup(lambda body: 503 if _agent_data(body) else None)
    for attempt in range(1, WRITE_ATTEMPTS):
        _adopt(rec, api)
        with pytest.raises(ApiException):
            advance()
        assert api.objects["e-t-0"]["status"]["phase"] == "Running" and backend.released == 0, attempt
    _adopt(rec, api)
    assert advance() is True  # the last allowed pass records it as unstorable
    assert api.objects["e-t-0"]["status"]["outcome"] == "harness_error" and backend.released == 1


def test_a_transient_failure_that_clears_stores_the_real_result() -> None:
    calls = {"n": 0}

    def flaky(body: dict[str, Any]) -> int | None:
        calls["n"] += 1
        return 503 if calls["n"] == 1 else None

    rec, api, backend, advance = _setup(flaky)
    with pytest.raises(ApiException):
        advance()
    _adopt(rec, api)
    assert advance() is True
    assert api.objects["e-t-0"]["status"]["outcome"] == "failed" and backend.released == 1
    assert not rec._write_failures


def test_when_nothing_can_be_written_the_pod_stays_held() -> None:
    rec, api, backend, advance = _setup(lambda body: 422)
    with pytest.raises(ApiException):
        advance()
    assert backend.released == 0 and "e-t-0" not in rec._handles  # the next pass adopts and harvests it again
