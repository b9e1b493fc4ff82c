"""The memory limits every workload holds on each node: what a trial ran beside that is not its run.

A trial pod shares its node with pods of other runs, other teams and the cluster itself;
their limits take from the same allocatable memory. One LIST+WATCH on the pods of all
namespaces that are bound and not ended (the field selector below: the same set the
scheduler and ``kubectl describe node`` count) keeps, per pod, only its node and the
memory limits it holds -- not the pod -- so a large cluster costs little memory.

A pod's limit is counted as ``kubectl describe node`` counts it: the sum of its
containers' memory limits (a container without one adds nothing; the pod is counted
as ``without_limit``), or its largest init container's when that is larger, plus the
pod overhead of its runtime class.

It needs ``list``/``watch`` on pods cluster-wide. A user without it (403) is told once:
:attr:`NodePods.forbidden` is set, the watch stops, and the records count the run's own
pods only, saying so.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from orchestrator.backends.kubernetes.runlease import RUN_LABEL
from orchestrator.kube.api import ApiException, parse_quantity
from orchestrator.kube.watch import ListWatch

#: Bound and not ended: what holds memory on a node.
FIELD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class Held:
    """What one pod holds on its node."""

    node: str
    limit_bytes: int
    without_limit: bool  # some container has no memory limit: it may take anything
    run: str | None  # the headroom run it belongs to (its label), if any


@dataclass(frozen=True)
class Beside:
    """The other workloads on a node at one moment."""

    pods: int
    limit_bytes: int
    without_limit: int


def container_limit(c: dict[str, Any]) -> int | None:
    """A container's memory limit in bytes, None without one."""
    value = ((c.get("resources") or {}).get("limits") or {}).get("memory")
    return int(parse_quantity(value)) if value is not None else None


def alive(pod: dict[str, Any]) -> bool:
    """Neither ended nor being deleted: it still holds what it was given."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not (
        pod.get("metadata") or {}
    ).get("deletionTimestamp")


def held(pod: dict[str, Any]) -> Held | None:
    """The pod's node and memory limits, or None when it holds nothing (not bound, ended, being deleted)."""
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if not node or not alive(pod):
        return None
    limits = [container_limit(c) for c in spec.get("containers") or []]
    init = [lim for c in spec.get("initContainers") or [] if (lim := container_limit(c)) is not None]
    overhead = (spec.get("overhead") or {}).get("memory")
    total = max(sum(lim or 0 for lim in limits), max(init, default=0))
    total += int(parse_quantity(overhead)) if overhead else 0
    run = ((pod.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL)
    return Held(node, total, any(lim is None for lim in limits), run)


def key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class NodePods:
    """Every bound, live pod's memory limits, by node; kept current by one cluster-wide watch."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._held: dict[str, Held] = {}
        self._stop = threading.Event()
        self._synced = threading.Event()  # the first list has arrived
        self._stream: ListWatch | None = None
        self.forbidden: str | None = None

    def _list(self, **kwargs: Any) -> Any:
        try:
            return self.core.list_pod_for_all_namespaces(**kwargs)
        except ApiException as exc:
            if exc.status in (401, 403):  # asking again would only repeat the refusal
                self.forbidden = f"{exc.status} {exc.reason}"
                self._stop.set()
            raise

    def _listed(self, items: list[dict[str, Any]]) -> None:
        fresh = {key(p): h for p in items if (h := held(p)) is not None}
        with self._lock:
            self._held = fresh
        self._synced.set()

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        h = None if kind == "DELETED" else held(obj)
        with self._lock:
            if h is None:
                self._held.pop(key(obj), None)
            else:
                self._held[key(obj)] = h

    def start(self) -> None:
        with self._lock:
            if self._stream is not None:
                return
            self._stream = ListWatch(
                "node-pods",
                self._list,
                {"field_selector": FIELD_SELECTOR},
                on_list=self._listed,
                on_event=self._event,
                stop=self._stop,
            )
            stream = self._stream
        stream.thread.start()

    @property
    def synced(self) -> bool:
        return self._synced.is_set() and self.forbidden is None

    @property
    def last_error(self) -> str | None:
        return self.forbidden or (self._stream.last_error if self._stream is not None else None)

    def threads(self) -> list[threading.Thread]:
        return [self._stream.thread] if self._stream is not None else []

    @property
    def stream(self) -> ListWatch | None:
        return self._stream

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.stop()
        self._stop.set()

    def beside(self, node: str, run: str) -> Beside:
        """The pods on ``node`` that are not of the run labelled ``run``, as the watch last saw them."""
        with self._lock:
            on = [h for h in self._held.values() if h.node == node and h.run != run]
        return Beside(len(on), sum(h.limit_bytes for h in on), sum(1 for h in on if h.without_limit))
