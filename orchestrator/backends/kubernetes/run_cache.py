"""The cache of one run: its pods (by label selector) and the namespace's pod Events.

No per-pod GET loop: the backend reads this cache. Each is kept by one
:class:`orchestrator.kube.watch.ListWatch` (resumes from the last resourceVersion,
survives an API server restart, relists on 410 Gone). A pod that disappears (DELETED, or missing from a relist) is remembered
as gone, so the backend can tell "deleted" from "not seen yet".
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from orchestrator.kube.watch import ListWatch, stop_all

MAX_EVENTS_PER_POD = 20
MAX_EVENT_PODS = 20_000


class RunCache:
    """The pods of one run and their Events, kept current by two watches."""

    def __init__(
        self,
        core: Any,
        namespace: str,
        selector: str,
        on_change: Callable[[], None],
        on_pod: Callable[[str, dict[str, Any], dict[str, dict[str, Any]]], None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._on_change = on_change
        self._on_pod = on_pod  # sees every pod as it arrives, with the cache (nodes.Nodes.pod_seen)
        self.pods: dict[str, dict[str, Any]] = {}
        self.gone: set[str] = set()
        self.interest: set[str] = set()
        self.events: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self.versions: dict[str, int] = {}  # per pod name: how many changes (pod or Event) seen
        self.changed: set[str] = set()  # pod names changed since the last take_changed()
        self.stop_event = threading.Event()
        self.pod_stream = ListWatch(
            "pods",
            core.list_namespaced_pod,
            {"namespace": namespace, "label_selector": selector},
            on_list=self._pods_listed,
            on_event=self._pod_event,
            stop=self.stop_event,
        )
        self.event_stream = ListWatch(
            "events",
            core.list_namespaced_event,
            {"namespace": namespace, "field_selector": "involvedObject.kind=Pod"},
            on_list=self._events_listed,
            on_event=self._event_event,
            stop=self.stop_event,
        )

    def start(self, sync_timeout: float = 60) -> None:
        self.pod_stream.thread.start()
        self.event_stream.thread.start()
        deadline = time.monotonic() + sync_timeout
        if not self.pod_stream.synced.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"could not list pods: {self.pod_stream.last_error}")
        self.event_stream.synced.wait(max(0.0, deadline - time.monotonic()))

    def stop(self, join_s: float = 10.0) -> None:
        """End both watches and wait for their threads (a stopped watch ends at once)."""
        stop_all([self.pod_stream, self.event_stream], join_s)

    def threads(self) -> list[threading.Thread]:
        return [self.pod_stream.thread, self.event_stream.thread]

    # -- cache -------------------------------------------------------------------------
    def expect(self, name: str) -> None:
        with self._lock:
            self.interest.add(name)
            self.gone.discard(name)

    def forget(self, name: str) -> None:
        with self._lock:
            self.interest.discard(name)
            self.gone.discard(name)
            self.events.pop(name, None)
            self.versions.pop(name, None)

    def version(self, name: str) -> int:
        with self._lock:
            return self.versions.get(name, 0)

    def _bump(self, name: str) -> None:
        self.versions[name] = self.versions.get(name, 0) + 1
        self.changed.add(name)

    def take_changed(self) -> set[str]:
        """The pod names whose pod or Events changed since the last call."""
        with self._lock:
            names, self.changed = self.changed, set()
        return names

    def pod(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self.pods.get(name)

    def is_gone(self, name: str) -> bool:
        with self._lock:
            return name in self.gone

    def events_of(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events.get(name, ()))

    def _pods_listed(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            fresh = {p["metadata"]["name"]: p for p in items}
            self.gone |= set(self.pods) - set(fresh)
            self.gone -= set(fresh)
            for name in set(self.pods) | set(fresh):
                self._bump(name)
            self.pods = fresh
            if self._on_pod:
                for name, pod in fresh.items():
                    self._on_pod(name, pod, fresh)
        self._on_change()

    def _pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        with self._lock:
            self._bump(name)
            if kind == "DELETED":
                self.pods.pop(name, None)
                self.gone.add(name)
            else:
                self.pods[name] = obj
                self.gone.discard(name)
                if self._on_pod:
                    self._on_pod(name, obj, self.pods)
        self._on_change()

    def _keep_event(self, obj: dict[str, Any]) -> None:
        name = (obj.get("involvedObject") or {}).get("name")
        if not name or (name not in self.interest and name not in self.pods):
            return
        evs = self.events.setdefault(name, [])
        uid = (obj.get("metadata") or {}).get("uid")
        evs[:] = [e for e in evs if (e.get("metadata") or {}).get("uid") != uid]
        evs.append(obj)
        del evs[:-MAX_EVENTS_PER_POD]
        self._bump(name)
        self.events.move_to_end(name)
        while len(self.events) > MAX_EVENT_PODS:
            self.events.popitem(last=False)

    def _events_listed(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self.events.clear()
            for obj in items:
                self._keep_event(obj)
        self._on_change()

    def _event_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            return  # an expired Event is still evidence
        with self._lock:
            self._keep_event(obj)
        self._on_change()

    def stats(self) -> dict[str, Any]:
        return {
            s.name: {
                "relists": s.relists,
                "reconnects": s.reconnects,
                "bookmarks": s.bookmarks,
                "last_error": s.last_error,
            }
            for s in (self.pod_stream, self.event_stream)
        }
