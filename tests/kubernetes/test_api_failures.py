"""How the backend turns API errors on a pod create into a try's facts (no cluster: the
errors are the client's own ApiException objects; a 422 from a real API server is in
tests/cluster/test_kubernetes_backend_lifecycle.py)."""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from orchestrator.backends.kubernetes.backend import KubernetesBackend, _Try
from orchestrator.launch import build_launch
from orchestrator.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.outcome import InfraReason
from orchestrator.tasks.loader import load_tasks

REPO = Path(__file__).resolve().parents[2]


def _backend(now: list[float]) -> KubernetesBackend:
    # an API client pointed nowhere: nothing here sends a request
    api = client.ApiClient(client.Configuration(host="https://127.0.0.1:9"))
    return KubernetesBackend(options=KubernetesOptions(api_retry_s=10), api_client=api, clock=lambda: now[0])


def _try(now: float) -> _Try:
    exp = Experiment(tasks_dir=str(REPO / "tasks"), tasks=["csv-report"], configurations=["1x-strict"], attempts=1)
    tasks = load_tasks(REPO / "tasks", ["csv-report"])
    return _Try(launch=build_launch("run-a", plan(exp, tasks)[0], 0, tasks[0], exp), body={}, submitted_at=now)


def _status(code: int, reason: str, message: str) -> ApiException:
    exc = ApiException(status=code, reason=reason)
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "reason": reason, "code": code})
    return exc


def test_a_refused_spec_is_spawn_failed_with_the_servers_message() -> None:
    now = [1000.0]
    backend = _backend(now)
    try:
        t = _try(now[0])
        backend._api_failure(t, _status(422, "Invalid", 'Pod "x" is invalid: spec.containers[0].name: Invalid value'))
        assert t.result is not None
        assert t.result.infra_hint is InfraReason.SPAWN_FAILED
        assert t.result.infra_detail == ('the API server refused the pod: Pod "x" is invalid: '
                                         'spec.containers[0].name: Invalid value')
        assert t.result.extra.api_refusal is not None and t.result.extra.api_refusal.status == 422
    finally:
        backend.close()


def test_server_errors_are_retried_then_end_as_api_error() -> None:
    now = [1000.0]
    backend = _backend(now)
    try:
        t = _try(now[0])
        backend._api_failure(t, _status(503, "Service Unavailable", "etcd is away"))
        assert t.result is None and t.retry_at > now[0]
        now[0] += 11  # past api_retry_s
        backend._api_failure(t, _status(503, "Service Unavailable", "etcd is away"))
        assert t.result is not None and t.result.infra_hint is InfraReason.API_ERROR
        assert t.result.infra_detail is not None and t.result.infra_detail.startswith("API errors for 10s: 503")
    finally:
        backend.close()


def test_a_full_quota_waits_forever() -> None:
    now = [1000.0]
    backend = _backend(now)
    try:
        t = _try(now[0])
        for _ in range(5):
            now[0] += 100
            backend._api_failure(t, _status(403, "Forbidden", 'pods "x" is forbidden: exceeded quota: q'))
        assert t.result is None and backend.stats.quota_waits == 5
    finally:
        backend.close()
