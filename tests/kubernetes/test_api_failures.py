"""How the backend turns API errors on a pod create into a try's facts (no cluster: the
errors are the client's own ApiException objects; a 422 from a real API server is in
tests/cluster/test_kubernetes_backend_lifecycle.py)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from orchestrator.backends.kubernetes.backend import KubernetesBackend, _Try
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.outcome import InfraReason
from orchestrator.tasks.loader import load_tasks

REPO = Path(__file__).resolve().parents[2]


def _backend(now: list[float], host: str = "https://127.0.0.1:9") -> KubernetesBackend:
    # by default an API client pointed nowhere: nothing there answers
    api = client.ApiClient(client.Configuration(host=host))
    return KubernetesBackend(options=KubernetesOptions(api_retry_s=10), api_client=api, clock=lambda: now[0])


def _try(now: float) -> _Try:
    exp = Experiment(tasks_dir=str(REPO / "tasks"), tasks=["csv-report"], configurations=["1x-strict"], attempts=1)
    tasks = load_tasks(REPO / "tasks", ["csv-report"])
    return _Try(launch=build_launch("run-a", plan(exp, tasks)[0], 0, tasks[0], exp), body={}, submitted_at=now)


def _status(code: int, reason: str, message: str) -> ApiException:
    exc = ApiException(status=code, reason=reason)
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "reason": reason, "code": code})
    return exc


def _answer(handler: BaseHTTPRequestHandler, code: int, obj: object) -> None:
    """Send ``obj`` as the JSON answer of the loopback API servers below."""
    body = json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A loopback HTTP server answering with ``handler``, by its URL, shut down on leaving."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_refused_spec_is_spawn_failed_with_the_servers_message() -> None:
    now = [1000.0]
    backend = _backend(now)
    try:
        t = _try(now[0])
        backend._api_failure(t, _status(422, "Invalid", 'Pod "x" is invalid: spec.containers[0].name: Invalid value'))
        assert t.result is not None
        assert t.result.infra_hint is InfraReason.SPAWN_FAILED
        assert t.result.infra_detail == (
            'the API server refused the pod: Pod "x" is invalid: spec.containers[0].name: Invalid value'
        )
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


BACKEND_LOG = "orchestrator.backends.kubernetes.backend"
FORBIDDEN = (
    'pods is forbidden: User "system:serviceaccount:ns:headroom" cannot deletecollection resource "pods" '
    'in API group "" in the namespace "ns"'
)


class _RefusesDeletes(BaseHTTPRequestHandler):
    """An API server whose RBAC refuses every DELETE, as the chart's Role once did a collection delete."""

    seen: list[str] = []

    def do_DELETE(self) -> None:  # noqa: N802 - the http.server name
        self.seen.append(self.path)
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": FORBIDDEN}
        _answer(self, 403, {**status, "reason": "Forbidden", "code": 403})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    _RefusesDeletes.seen = []
    with _serving(_RefusesDeletes) as url:
        yield url


def test_a_refused_collection_delete_is_said_once_and_tried_again(
    refusing_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Harvested pods that may not be deleted stay on their node (a running one keeps its requests):
    the backend says which permission is missing, once, and keeps the run for the next sweep."""
    backend = _backend([1000.0], host=refusing_server)
    try:
        with caplog.at_level(logging.WARNING, logger=BACKEND_LOG):
            for _ in range(2):
                backend._to_delete.add("run-a")
                backend._sweep()
                assert backend._to_delete == {"run-a"}  # kept for the next sweep (the Role may be fixed)
        warnings = [r.getMessage() for r in caplog.records if r.name == BACKEND_LOG and r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert "grant deletecollection on pods in namespace default" in warnings[0]
        assert "cannot deletecollection" in warnings[0]  # the server's own words
        assert len(_RefusesDeletes.seen) == 2
        from urllib.parse import parse_qs, urlsplit

        query = parse_qs(urlsplit(_RefusesDeletes.seen[0]).query)
        assert query["labelSelector"] == ["headroom.dev/run=run-a,headroom.dev/harvested=true"]
    finally:
        backend.close()


def test_an_unreachable_server_on_the_sweep_is_retried_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    backend = _backend([1000.0])
    try:
        with caplog.at_level(logging.WARNING, logger=BACKEND_LOG):
            backend._to_delete.add("run-a")
            backend._sweep()
        assert backend._to_delete == {"run-a"}
        assert not [r for r in caplog.records if r.name == BACKEND_LOG and r.levelno == logging.WARNING]
    finally:
        backend.close()


class _PolicyFailsOnce(BaseHTTPRequestHandler):
    """An API server whose first NetworkPolicy create fails (503, etcd away) and that takes every other POST."""

    posts: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        failing = path.endswith("/networkpolicies") and not any(p.endswith("/networkpolicies") for p in self.posts)
        self.posts.append(path)
        if failing:
            _answer(self, 503, {"kind": "Status", "code": 503})
        else:
            _answer(self, 201, {})

    def log_message(self, *args: object) -> None:
        pass


def test_a_retried_create_makes_the_no_network_policy_before_the_offline_pod() -> None:
    """A transient error on the NetworkPolicy at submit is retried like any other: the pod body built at the
    retry makes the policy first, so an offline task's pod never exists without it (the retry path used to build
    the body without the policy, and created the pod with the network open)."""
    _PolicyFailsOnce.posts = []
    now = [1000.0]
    with _serving(_PolicyFailsOnce) as url:
        backend = _backend(now, host=url)
        try:
            t = _try(now[0])
            with pytest.raises(ApiException):
                backend._pod_body(t)  # at submit: the policy's 503 stops the body (submit records it as an API failure)
            assert not t.body
            backend._try_create(t)  # the retry
            assert t.created, _PolicyFailsOnce.posts
            kinds = [p.rsplit("/", 1)[1] for p in _PolicyFailsOnce.posts]
            assert kinds.count("networkpolicies") == 2 and kinds[-1] == "pods", kinds
            last_policy = max(i for i, kind in enumerate(kinds) if kind == "networkpolicies")
            assert kinds.index("pods") > last_policy, kinds  # the policy existed before the pod was asked for
        finally:
            backend.close()


class _PodCreateHangs(BaseHTTPRequestHandler):
    """An API server that takes every POST but never answers a pod's (a connection that stalled)."""

    release = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0].endswith("/pods"):
            self.release.wait(30)
            return
        _answer(self, 201, {})

    def log_message(self, *args: object) -> None:
        pass


def test_a_create_that_never_answers_times_out_and_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod create whose answer never comes ends at its timeout as an API error to retry, not a worker held
    for good (the create had no timeout: a stalled connection kept its worker, and its place among the paced
    creates, forever)."""
    from orchestrator.backends.kubernetes import backend as backend_mod

    monkeypatch.setattr(backend_mod, "CREATE_TIMEOUT_S", (5, 0.5))
    _PodCreateHangs.release.clear()
    now = [1000.0]
    with _serving(_PodCreateHangs) as url:
        backend = _backend(now, host=url)
        try:
            t = _try(now[0])
            done = threading.Event()

            def create() -> None:
                backend._try_create(t)
                done.set()

            threading.Thread(target=create, daemon=True).start()
            assert done.wait(20), "the create waited past its timeout"
            assert not t.created and t.result is None
            assert t.retry_at > now[0]  # an API error within api_retry_s: tried again later
        finally:
            _PodCreateHangs.release.set()
            backend.close()
