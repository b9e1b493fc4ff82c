"""A run's liveness signal: one coordination.k8s.io Lease per run executing in this process.

``headroom runs cleanup`` runs in another process, maybe on another machine, and must not take
the pods of a run that is still executing. The process running a sweep holds a Lease named
from the run id and labelled ``headroom.dev/run``, renews it every ``RENEW_S`` and deletes it
when the run's backend closes. A Lease whose ``renewTime + leaseDurationSeconds`` has passed
belongs to a process that died (kill -9, a lost machine): its run is fair game for cleanup.

Freshness is judged on the cleaning process's clock against the holder's renewTime, so the
two clocks must agree to within a few seconds (NTP); ``DURATION_S`` is four renewals long.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from orchestrator.kube.api import ApiException, client
from orchestrator.spec.names import dns_label, label_value

log = logging.getLogger(__name__)

RUN_LABEL = "headroom.dev/run"
MANAGED_BY = {"app.kubernetes.io/managed-by": "headroom"}
KIND_LABEL = "headroom.dev/lease"
RENEW_S = 5.0
DURATION_S = 20


def lease_name(run_id: str) -> str:
    return dns_label(f"headroom-run-{run_id}")


def _micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def is_fresh(lease: dict[str, Any], now: float) -> bool:
    """Held by a live process: renewed less than its own duration ago."""
    spec = lease.get("spec") or {}
    renewed = _parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds") or DURATION_S
    return renewed is not None and now < renewed + float(duration)


class RunLeases:
    """The Leases of the runs this process executes, renewed on one thread until ``close``."""

    def __init__(self, api_client: Any, namespace: str, clock: Callable[[], float]) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.clock = clock
        self.identity = f"{socket.gethostname()}/{os.getpid()}"
        self._held: dict[str, str] = {}  # lease name -> run label
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.last_error: str | None = None

    def _body(self, name: str, run_label: str) -> dict[str, Any]:
        now = _micro_time(self.clock())
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "labels": {**MANAGED_BY, RUN_LABEL: run_label, KIND_LABEL: "run"}},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": DURATION_S,
                "acquireTime": now,
                "renewTime": now,
            },
        }

    def hold(self, run_id: str) -> None:
        """Create (or take over, on resume) the run's Lease and keep it renewed."""
        name, run_label = lease_name(run_id), label_value(run_id)
        with self._lock:
            if name in self._held:
                return
            self._held[name] = run_label
        self._put(name, run_label)
        if self.thread is None:
            self.thread = threading.Thread(target=self._renew_loop, name="k8s-run-lease", daemon=True)
            self.thread.start()

    def _put(self, name: str, run_label: str) -> None:
        body = self._body(name, run_label)
        try:
            try:
                self.api.create_namespaced_lease(self.namespace, body)  # type: ignore[arg-type]  # the client serialises a plain dict body
            except ApiException as exc:
                if exc.status != 409:
                    raise
                # a previous process of this run (resume) left it: it is ours now
                self.api.patch_namespaced_lease(
                    name, self.namespace, {"metadata": {"labels": body["metadata"]["labels"]}, "spec": body["spec"]}
                )
            self.last_error = None
        except Exception as exc:  # the API server is away, or Leases are forbidden: the run goes on
            self.last_error = f"{getattr(exc, 'status', type(exc).__name__)}: {str(exc).splitlines()[0][:200]}"
            log.warning("could not write the run lease %s: %s", name, self.last_error)

    def _renew_loop(self) -> None:
        while not self._stop.wait(RENEW_S):
            with self._lock:
                held = list(self._held.items())
            for name, _run_label in held:
                try:
                    self.api.patch_namespaced_lease(
                        name, self.namespace, {"spec": {"renewTime": _micro_time(self.clock())}}
                    )
                except ApiException as exc:
                    if exc.status == 404:  # removed from outside (cleanup --force): put it back
                        self._put(name, _run_label)
                    else:
                        self.last_error = f"{exc.status} {exc.reason}"
                except Exception as exc:  # noqa: BLE001 - the API server is away: renew next time
                    self.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"

    def close(self) -> None:
        """Stop renewing and delete the Leases: the runs no longer execute here."""
        self._stop.set()
        if self.thread is not None:
            self.thread.join(10)
        with self._lock:
            held, self._held = list(self._held), {}
        for name in held:
            try:
                self.api.delete_namespaced_lease(name, self.namespace)
            except Exception:  # noqa: BLE001, S110 - gone already, or the API is away: it goes stale on its own
                pass


def live_runs(api_client: Any, namespace: str, now: float) -> tuple[dict[str, str], list[str]]:
    """The run labels whose Lease is fresh (-> holder identity), and the names of stale run Leases.

    Raises ApiException when Leases cannot be listed (the caller then cannot tell).
    """
    api = client.CoordinationV1Api(api_client)
    selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items()) + f",{KIND_LABEL}=run"
    resp = api.list_namespaced_lease(namespace, label_selector=selector)
    live: dict[str, str] = {}
    stale: list[str] = []
    for lease in resp.items:
        body = api_client.sanitize_for_serialization(lease)
        run_label = (body["metadata"].get("labels") or {}).get(RUN_LABEL)
        if not run_label:
            continue
        if is_fresh(body, now):
            live[run_label] = (body.get("spec") or {}).get("holderIdentity") or "?"
        else:
            stale.append(body["metadata"]["name"])
    return live, stale
