"""One LIST+WATCH per run on its pods (by label selector) and one on the namespace's pod Events.

No per-pod GET loop: the backend reads this cache. The watch resumes from the last
``resourceVersion`` (bookmarks keep it fresh while nothing changes), survives an API
server restart (reconnect with backoff, same resourceVersion), and relists on
410 Gone. A pod that disappears (DELETED, or missing from a relist) is remembered
as gone, so the backend can tell "deleted" from "not seen yet".
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 240
MAX_EVENTS_PER_POD = 20
MAX_EVENT_PODS = 20_000


class ConnectionsInUse:
    """Which pooled HTTP connection each thread took last, so another thread can cut it.

    A WATCH request can wait a long time for its response headers (the API server sends
    them with the first event), and until then there is no response to shut down: a stop
    at that moment would wait for the server's watch timeout. The connection is known from
    the moment the pool hands it out, so its socket can be shut down at any point.
    """

    def __init__(self, api_client: Any) -> None:
        self._by_thread: dict[int, Any] = {}
        try:
            pool = api_client.rest_client.pool_manager.connection_from_url(api_client.configuration.host)
            take, give_back = pool._get_conn, pool._put_conn
        except AttributeError:  # another client or urllib3: interrupt() falls back to the response's socket
            return

        def taken(*args: Any, **kwargs: Any) -> Any:
            conn = take(*args, **kwargs)
            self._by_thread[threading.get_ident()] = conn
            return conn

        def returned(conn: Any) -> Any:
            # back in the pool, another thread may take it next: it is no longer this thread's to cut
            if self._by_thread.get(threading.get_ident()) is conn:
                self._by_thread.pop(threading.get_ident(), None)
            return give_back(conn)

        pool._get_conn, pool._put_conn = taken, returned

    def cut(self, thread: threading.Thread) -> None:
        conn = self._by_thread.get(thread.ident or -1)
        _shutdown(getattr(conn, "sock", None))


def _shutdown(sock: Any) -> None:
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Stream:
    """LIST then WATCH one collection forever, feeding ``apply``; relist on 410."""

    def __init__(self, name: str, list_fn: Callable[..., Any], kwargs: dict[str, Any],
                 on_list: Callable[[list[dict[str, Any]]], None], on_event: Callable[[str, dict[str, Any]], None],
                 stop: threading.Event, connections: ConnectionsInUse | None = None) -> None:
        self.name, self.list_fn, self.kwargs = name, list_fn, kwargs
        self.connections = connections
        self.on_list, self.on_event, self.stop = on_list, on_event, stop
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.relists = 0
        self.reconnects = 0
        self.bookmarks = 0
        self.last_error: str | None = None
        self._resp: Any = None
        self._forced_rv: str | None = None
        self.thread = threading.Thread(target=self._loop, name=f"informer-{name}", daemon=True)

    def force_resource_version(self, rv: str) -> None:
        """Tests: resume the next watch from ``rv`` (an old one draws a 410 and a relist).

        Kept apart from ``resource_version`` so that events still buffered in the current
        stream cannot overwrite it before the watch ends.
        """
        self._forced_rv = rv
        self.interrupt()

    def interrupt(self) -> None:
        """End the current watch from another thread.

        Not ``resp.close()``: that waits for the TLS object the reading thread holds until the
        server's watch timeout. Shutting the socket down wakes the reader at once.
        """
        resp = self._resp
        _shutdown(getattr(getattr(resp, "connection", None), "sock", None))
        if self.connections is not None and self.stop.is_set():  # maybe still waiting for the headers
            self.connections.cut(self.thread)

    def _list(self) -> None:
        resp = self.list_fn(**self.kwargs, _preload_content=False, _request_timeout=60)
        data = json.loads(resp.data)
        self.resource_version = (data.get("metadata") or {}).get("resourceVersion")
        self.on_list(data.get("items") or [])
        self.synced.set()

    def _loop(self) -> None:
        backoff = 0.2
        while not self.stop.is_set():
            try:
                if self.resource_version is None:
                    if self.synced.is_set():
                        self.relists += 1
                    self._list()
                self._watch()
                backoff = 0.2
            except ApiException as exc:
                if exc.status == 410:
                    self.resource_version = None
                    continue
                self.last_error = f"{exc.status} {exc.reason}"
            except Exception as exc:  # connection refused while the API server restarts, a reset stream
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            if self.stop.is_set():
                return
            self.reconnects += 1
            self.stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _watch(self) -> None:
        if self._forced_rv is not None:
            self.resource_version, self._forced_rv = self._forced_rv, None
        resp = self.list_fn(**self.kwargs, watch=True, resource_version=self.resource_version,
                            allow_watch_bookmarks=True, timeout_seconds=WATCH_TIMEOUT_S,
                            _preload_content=False, _request_timeout=(10, WATCH_TIMEOUT_S + 30))
        self._resp = resp
        try:
            if self.stop.is_set():  # stopped while the request was on its way: interrupt() saw no response
                return
            for line in iter_resp_lines(resp):
                if self.stop.is_set() or self._forced_rv is not None:
                    return
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        self.resource_version = None  # too old: relist
                        return
                    raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self.resource_version = rv
                if kind == "BOOKMARK":
                    self.bookmarks += 1
                    continue
                self.on_event(kind, obj)
        finally:
            self._resp = None
            # A watch left early still has a stream on its connection: back in the pool, the next
            # request on it would read the watch's chunks as its response. Close it (this thread
            # owns it); the pool opens a fresh one.
            resp.close()
            resp.release_conn()


class RunInformer:
    """The pods of one run and their Events, kept current by two watches."""

    def __init__(self, core: Any, namespace: str, selector: str, on_change: Callable[[], None],
                 on_pod: Callable[[str, dict[str, Any], dict[str, dict[str, Any]]], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._on_change = on_change
        self._on_pod = on_pod  # sees every pod as it arrives, with the cache (nodes.Nodes.pod_seen)
        self.pods: dict[str, dict[str, Any]] = {}
        self.gone: set[str] = set()
        self.interest: set[str] = set()
        self.events: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self.versions: dict[str, int] = {}  # per pod name: how many changes (pod or Event) seen
        self.stop_event = threading.Event()
        api_client = getattr(core, "api_client", None)
        connections = ConnectionsInUse(api_client) if api_client is not None else None
        self.pod_stream = _Stream(
            "pods", core.list_namespaced_pod, {"namespace": namespace, "label_selector": selector},
            self._pods_listed, self._pod_event, self.stop_event, connections)
        self.event_stream = _Stream(
            "events", core.list_namespaced_event, {"namespace": namespace, "field_selector": "involvedObject.kind=Pod"},
            self._events_listed, self._event_event, self.stop_event, connections)

    def start(self, sync_timeout: float = 60) -> None:
        self.pod_stream.thread.start()
        self.event_stream.thread.start()
        deadline = time.monotonic() + sync_timeout
        if not self.pod_stream.synced.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"could not list pods: {self.pod_stream.last_error}")
        self.event_stream.synced.wait(max(0.0, deadline - time.monotonic()))

    def stop(self, join_s: float = 10.0) -> None:
        """End both watches and wait for their threads (a stopped watch ends at once, see interrupt)."""
        self.stop_event.set()
        streams = (self.pod_stream, self.event_stream)
        for s in streams:
            s.interrupt()
        deadline = time.monotonic() + join_s
        for s in streams:
            # the client retries a request whose connection broke on a fresh connection: cut again
            while s.thread.is_alive() and time.monotonic() < deadline:
                s.thread.join(min(0.2, max(0.0, deadline - time.monotonic())))
                s.interrupt()
            if s.thread.is_alive():  # a read the socket shutdown did not wake: log it, never hang the caller
                log.warning("informer thread %s still running after stop", s.thread.name)

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
        return {s.name: {"relists": s.relists, "reconnects": s.reconnects, "bookmarks": s.bookmarks,
                         "last_error": s.last_error} for s in (self.pod_stream, self.event_stream)}
