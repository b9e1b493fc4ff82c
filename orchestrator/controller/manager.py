"""The controller process: informers, a work queue, workers, leader election, /metrics.

Crash-only: there is no shutdown protocol to get right. SIGTERM, a lost Lease or kill -9
all end the process the same way; the next leader lists the Experiments and Trials and
carries on from what the API holds.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import structlog

from orchestrator.controller import engine
from orchestrator.controller.events import EventRecorder
from orchestrator.controller.finished import FinishedTrial
from orchestrator.controller.metrics import Metrics, TrialCounts, serve
from orchestrator.controller.reconcile import Reconciler
from orchestrator.controller.resources import (
    EXPERIMENT_PLURAL,
    GROUP,
    TRIAL_PLURAL,
    VERSION,
)
from orchestrator.controller.workqueue import WorkQueue
from orchestrator.errors import ShutDown
from orchestrator.kube.api import client
from orchestrator.kube.client import KubeClient, connect
from orchestrator.kube.raw import LazyCoreV1Api
from orchestrator.kube.watch import Informer, wait_synced
from orchestrator.spec.kubernetes import KubernetesOptions

log = structlog.get_logger("headroom.controller")

PodHook = Callable[[Any, dict[str, Any]], dict[str, Any]]
#: (API client, the Experiment's kubernetes options, a hook that edits each pod body) -> backend
BackendFactory = Callable[[KubeClient, KubernetesOptions, PodHook], engine.Backend]


@dataclass
class ControllerConfig:
    namespace: str
    kubeconfig: Path | None = None
    metrics_address: str = "127.0.0.1:8080"
    workers: int = 2
    resync_seconds: float = 30.0
    leader_elect: bool = False
    lease_name: str = "headroom-controller"
    lease_namespace: str | None = None
    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2
    identity: str = field(default_factory=lambda: os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}")
    keep_pods: bool = False


#: Shared read-only parts of finished Trials (a status, a configuration): there are few distinct ones.
_SHARED: dict[tuple[Any, ...], dict[str, Any]] = {}
_SHARED_MAX = 4096  # distinct values seen; past it sharing starts over (memory stays bounded)


def _shared(d: dict[str, Any]) -> dict[str, Any]:
    """One dict object for every finished Trial with these (small, scalar) contents.

    Nothing mutates a cached Trial (readers only), so 100,000 finished Trials can point at a
    handful of status and configuration dicts instead of holding one each.
    """
    key = tuple(d.items())
    try:
        got = _SHARED.get(key)
    except TypeError:  # a value that is not a scalar (the CRD schema forbids it): keep it unshared
        return d
    if got is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        got = _SHARED.setdefault(key, d)
    return got


def _intern(v: Any) -> Any:
    # Run ids, experiment names, labels and outcomes repeat across Trials: one string each.
    return sys.intern(v) if isinstance(v, str) else v


def slim_trial(obj: dict[str, Any]) -> dict[str, Any]:
    """What the loop keeps of a Trial (100,000 of them must fit in the chart's memory).

    A finished try is only counted: its id, try number, configuration and result, held in slots
    (``FinishedTrial``) with its repeated parts shared (``_shared``, ``_intern``). A try in flight keeps its whole spec
    and status (without the evidence), which the loop needs to launch, observe and settle it.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    keep_meta = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    if status.get("phase") in ("Finished", "Abandoned") and "name" in meta and "resourceVersion" in meta:
        finished = FinishedTrial(
            meta["name"],
            meta["resourceVersion"],
            _intern(spec.get("experiment")),
            _intern(spec.get("runId")),
            spec.get("trialId"),
            spec.get("try"),
            _shared({"label": _intern((spec.get("configuration") or {}).get("label"))}),
            _shared({k: _intern(status[k]) for k in ("phase", "outcome", "reason", "final") if k in status}),
        )
        # One read-only record in slots instead of three dicts (controller/finished.py): the cache's readers only
        # read a cached Trial, and a finished one is never written back, so it stands in for the dict.
        return cast("dict[str, Any]", finished)
    return {
        "metadata": {k: meta[k] for k in keep_meta if k in meta},
        "spec": spec,
        "status": {k: v for k, v in status.items() if k != "evidence"},
    }


def slim_experiment(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    return {**obj, "metadata": meta}


class Controller:
    def __init__(
        self, cfg: ControllerConfig, backend_factory: BackendFactory, *, metrics: Metrics | None = None
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics or Metrics()
        self.api = connect(cfg.kubeconfig, metrics=self.metrics)
        self.custom = client.CustomObjectsApi(self.api)
        # Made on first use (kube/raw.py): the controller's own core calls are JSON, so one that only counts
        # finished Trials never imports the typed core API (20 MB); its Pod backend makes its own.
        self.core = cast("client.CoreV1Api", LazyCoreV1Api(self.api))
        self.queue = WorkQueue()
        self.leading = threading.Event()
        self.stopping = threading.Event()
        self._backend_factory = backend_factory
        ns = cfg.namespace
        self.experiments = Informer(
            "experiment",
            lambda **kw: self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, **kw),
            transform=slim_experiment,
            handler=self._on_experiment,
            metrics=self.metrics,
        )
        self.trials = Informer(
            "trial",
            lambda **kw: self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, TRIAL_PLURAL, **kw),
            transform=slim_trial,
            handler=self._on_trial,
            metrics=self.metrics,
        )
        self.informers = [self.experiments, self.trials]
        self.reconciler: Reconciler | None = None
        self._threads: list[threading.Thread] = []
        self.metrics.observe_state(self._state)
        self.metrics_port: int | None = None

    # -- event handlers: keys only --------------------------------------------------------------
    def _enqueue(self, name: str | None) -> None:
        if name:
            self.metrics.workqueue_adds.inc()
            self.queue.add(name)
            self.metrics.workqueue_depth.set(len(self.queue))

    def _on_experiment(self, kind: str, obj: dict[str, Any]) -> None:
        self._enqueue(obj["metadata"]["name"])

    def _on_trial(self, kind: str, obj: dict[str, Any]) -> None:
        self._enqueue(obj.get("spec", {}).get("experiment"))

    # -- one backend per Experiment ------------------------------------------------------------
    def make_backend(self, name: str, spec: Any) -> engine.Backend:
        """The Experiment's backend: its own kubernetes options, in this namespace, with this client.

        A thread waits on it (the backend's own watch of the run's pods and events) and
        enqueues the Experiment whenever something may have changed.
        """
        base = getattr(spec, "kubernetes", None) or KubernetesOptions()
        options = base.model_copy(
            update={
                "namespace": self.cfg.namespace,
                "kubeconfig": None,
                "context": None,
                "keep_pods": base.keep_pods or self.cfg.keep_pods,
                "task_set_image": getattr(getattr(spec, "task_source", None), "image", None),
            }
        )
        assert self.reconciler is not None
        reconciler = self.reconciler
        # Its own client: a backend closes its client when it is closed (its Experiment completed).
        backend = self._backend_factory(
            connect(self.cfg.kubeconfig, metrics=self.metrics), options, reconciler.owner_hook
        )

        def wake() -> None:
            while not self.stopping.is_set():
                try:
                    backend.wait([], 5.0)
                except Exception:  # noqa: S112 - closed under us: the loop below notices
                    time.sleep(1.0)
                if reconciler.current_backend(name) is not backend:
                    return  # dropped (its Experiment completed or was deleted)
                self._enqueue(name)

        threading.Thread(target=wake, name=f"wake-{name}", daemon=True).start()
        return backend

    # -- metrics over the cache -----------------------------------------------------------------
    def _state(self) -> tuple[TrialCounts, dict[tuple[str, str], int]]:
        counts: TrialCounts = defaultdict(int)
        flight: dict[tuple[str, str], int] = defaultdict(int)
        ns = self.cfg.namespace
        for t in self.trials.items():
            spec, status = t["spec"], t.get("status") or {}
            exp = spec.get("experiment", "")
            if status.get("phase") == "Finished":
                if status.get("final"):
                    key = (
                        ns,
                        exp,
                        spec["configuration"]["label"],
                        status.get("outcome") or "",
                        status.get("reason") or "",
                    )
                    counts[key] += 1
            else:
                flight[(ns, exp)] += 1
        return dict(counts), dict(flight)

    # -- running ------------------------------------------------------------------------------------
    def healthy(self) -> bool:
        if not self.leading.is_set():
            return True  # a standby is healthy while it waits
        return all(t.is_alive() for t in self._threads)

    def start_metrics(self) -> int:
        _, port = serve(self.metrics, self.cfg.metrics_address, self.healthy)
        self.metrics_port = port
        log.info("metrics listening", address=self.cfg.metrics_address, port=port)
        return port

    def lead(self) -> None:
        """Run the loop (as the leader): informers, workers, periodic resync. Blocks until stopped."""
        self.leading.set()
        self.metrics.leader.set(1)
        self.reconciler = Reconciler(
            namespace=self.cfg.namespace,
            custom=self.custom,
            core=self.core,
            experiments=self.experiments,
            trials=self.trials,
            make_backend=self.make_backend,
            metrics=self.metrics,
            events=EventRecorder(self.core, self.cfg.namespace, self.cfg.identity),
        )
        for inf in self.informers:
            self._threads.append(inf.start())
        if not wait_synced(self.informers, timeout=120):
            raise RuntimeError("informers did not sync within 120 s")
        log.info("caches synced", experiments=len(self.experiments.items()), trials=len(self.trials.items()))
        for i in range(self.cfg.workers):
            t = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        while not self.stopping.wait(self.cfg.resync_seconds):
            for exp in self.experiments.items():
                self._enqueue(exp["metadata"]["name"])

    def _work(self) -> None:
        assert self.reconciler is not None
        failures: dict[str, int] = defaultdict(int)
        while True:
            try:
                key = self.queue.get()
            except ShutDown:
                return
            self.metrics.workqueue_depth.set(len(self.queue))
            name = str(key)
            structlog.contextvars.bind_contextvars(experiment=name)
            t0 = time.perf_counter()
            try:
                again = self.reconciler.reconcile(name)
                failures.pop(name, None)
                self.metrics.reconcile_duration.labels("ok").observe(time.perf_counter() - t0)
                if again is not None:
                    self.queue.add_after(name, again)
            except Exception:
                self.metrics.reconcile_duration.labels("error").observe(time.perf_counter() - t0)
                self.metrics.reconcile_errors.inc()
                failures[name] += 1
                delay = min(0.5 * 2 ** failures[name], 60.0)
                log.exception("reconcile failed; requeued", retry_in_s=delay)
                self.queue.add_after(name, delay)
            finally:
                structlog.contextvars.unbind_contextvars("experiment")
                self.queue.done(key)

    def run(self) -> None:
        """The whole process: metrics server, then lead (directly, or after winning the Lease)."""
        signal.signal(signal.SIGTERM, lambda *_: _exit_now("SIGTERM", 0))
        self.start_metrics()
        if not self.cfg.leader_elect:
            self.lead()
            return
        from orchestrator.kube.leader import lead_when_elected

        log.info("waiting for the leader Lease", lease=self.cfg.lease_name, identity=self.cfg.identity)

        def started() -> None:
            log.info("became leader", lease=self.cfg.lease_name, identity=self.cfg.identity)
            self.lead()

        def stopped() -> None:
            # Another replica may already be leading: stop at once rather than race it.
            _exit_now("lost the leader Lease", 1)

        lead_when_elected(
            self.api,
            lease_name=self.cfg.lease_name,
            namespace=self.cfg.lease_namespace or self.cfg.namespace,
            identity=self.cfg.identity,
            lease_duration=self.cfg.lease_duration,
            renew_deadline=self.cfg.renew_deadline,
            retry_period=self.cfg.retry_period,
            started=started,
            stopped=stopped,
        )
        _exit_now("leader election ended", 1)


def _exit_now(why: str, code: int) -> None:
    log.info("exiting", why=why, code=code)
    os._exit(code)
