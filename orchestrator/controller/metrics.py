"""Prometheus metrics of the controller, named by Prometheus conventions, and the /metrics server.

Two kinds:

* counts derived from the Trial resources at scrape time (``headroom_trials``,
  ``headroom_trials_in_flight``): they are the store's own numbers, so they are right
  after a restart and can be checked against ``kubectl get trials``;
* events this process saw (``*_total`` counters, histograms): they restart at zero with
  the process, which ``rate()`` handles.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

DURATION_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600)
RECONCILE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

#: (namespace, experiment, configuration, outcome, reason) -> count of final trials
TrialCounts = dict[tuple[str, str, str, str, str], int]


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.tries_settled = Counter(
            "headroom_trial_tries_settled_total",
            "Trial tries this controller settled, by result",
            ["namespace", "experiment", "configuration", "outcome", "reason", "final"],
            registry=r,
        )
        self.oom_kills = Counter(
            "headroom_trial_oom_kills_total",
            "Trial tries that ended in an OOM kill",
            ["namespace", "experiment", "configuration"],
            registry=r,
        )
        self.queue_wait = Histogram(
            "headroom_trial_queue_wait_seconds",
            "From Trial created to its pod bound to a node",
            ["namespace", "experiment"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.phase_duration = Histogram(
            "headroom_trial_phase_duration_seconds",
            "Duration of each phase of a trial try (scheduling, starting, agent, verifier, total)",
            ["phase"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.api_requests = Counter(
            "headroom_kube_api_requests_total",
            "Requests to the Kubernetes API, by verb, resource and status code",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.api_errors = Counter(
            "headroom_kube_api_request_errors_total",
            "Kubernetes API requests that failed (status >= 400 or no response)",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "headroom_reconcile_duration_seconds",
            "Time to reconcile one Experiment",
            ["result"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.reconcile_errors = Counter(
            "headroom_reconcile_errors_total",
            "Reconciles that raised and were requeued",
            registry=r,
        )
        self.workqueue_depth = Gauge("headroom_workqueue_depth", "Keys waiting in the work queue", registry=r)
        self.workqueue_adds = Counter("headroom_workqueue_adds_total", "Keys added to the work queue", registry=r)
        self.watch_restarts = Counter(
            "headroom_watch_restarts_total",
            "Watches re-opened, by kind and why (timeout, gone = relist, error)",
            ["kind", "reason"],
            registry=r,
        )
        self.leader = Gauge("headroom_leader", "1 while this replica holds the leader Lease", registry=r)

    def observe_state(self, source: Callable[[], tuple[TrialCounts, dict[tuple[str, str], int]]]) -> None:
        """Register the scrape-time collector over the controller's Trial cache."""
        self.registry.register(_StateCollector(source))


class _StateCollector(Collector):
    def __init__(self, source: Callable[[], tuple[TrialCounts, dict[tuple[str, str], int]]]) -> None:
        self.source = source

    def collect(self) -> Iterable[GaugeMetricFamily]:
        counts, in_flight = self.source()
        trials = GaugeMetricFamily(
            "headroom_trials",
            "Trials with a final result, from the Trial resources, by configuration, outcome and reason",
            labels=["namespace", "experiment", "configuration", "outcome", "reason"],
        )
        for labels, n in sorted(counts.items()):
            trials.add_metric(list(labels), n)
        flight = GaugeMetricFamily(
            "headroom_trials_in_flight",
            "Trial tries created and not yet finished",
            labels=["namespace", "experiment"],
        )
        for key, n in sorted(in_flight.items()):
            flight.add_metric(list(key), n)
        yield trials
        yield flight

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []  # dynamic: collected at scrape time only


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # scrapes are not news; the structured log stays readable


def serve(metrics: Metrics, address: str, healthy: Callable[[], bool]) -> tuple[WSGIServer, int]:
    """/metrics (Prometheus text format) and /healthz, in a daemon thread. Returns (server, port)."""
    host, _, port = address.rpartition(":")
    prom = make_wsgi_app(metrics.registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            ok = healthy()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"ok\n" if ok else b"unhealthy\n"]
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"see /metrics and /healthz\n"]
        return prom(environ, start_response)

    server = make_server(host or "0.0.0.0", int(port), app, _ThreadingWSGIServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server, int(server.server_address[1])
