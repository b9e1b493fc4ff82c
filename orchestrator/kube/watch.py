"""The one LIST+WATCH loop, on the kubernetes client's own ``kubernetes.watch.Watch``.

:class:`ListWatch` lists one collection (a page at a time), then watches it from the list's
resourceVersion with bookmarks. A watch that ends (the server's ``timeoutSeconds``, a broken
connection, an API server restart) resumes from the last resourceVersion seen, with backoff; a
410 Gone (that version is compacted away) relists. ``stop`` ends a blocked watch at once
(``Watch.stop`` shuts the response's socket down), also one whose request is still on its way.

Objects stay the API server's JSON (dicts): the watch is given a list function without a model
return type, so nothing is deserialised into client models (the cost of that dominated a busy run).

:class:`Informer` is a cache on top of it: the controller's Experiments and Trials.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

Obj = dict[str, Any]
ListFn = Callable[..., Any]  # a *_list_* API method taking the usual keyword arguments
WATCH_TIMEOUT_S = 240
PAGE_SIZE = 500


class ListWatch:
    """LIST then WATCH one collection until stopped, feeding ``on_list`` and ``on_event``."""

    def __init__(
        self,
        name: str,
        list_fn: ListFn,
        kwargs: dict[str, Any] | None = None,
        *,
        on_list: Callable[[list[Obj]], None],
        on_event: Callable[[str, Obj], None],
        on_restart: Callable[[str], None] | None = None,
        watch_timeout: int = WATCH_TIMEOUT_S,
        page_size: int = PAGE_SIZE,
        stop: threading.Event | None = None,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self.name, self.list_fn, self.kwargs = name, list_fn, dict(kwargs or {})
        self.transform = transform  # applied to listed items page by page: a big list is never held whole
        self.on_list, self.on_event, self.on_restart = on_list, on_event, on_restart
        self.watch_timeout, self.page_size = watch_timeout, page_size
        self.stop_event = stop or threading.Event()
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.lists = 0
        self.relists = 0
        self.reconnects = 0
        self.bookmarks = 0
        self.last_error: str | None = None
        self._forced_rv: str | None = None
        self._watch: k8s_watch.Watch | None = None
        self._resp: Any = None
        self.thread = threading.Thread(target=self._loop, name=f"informer-{name}", daemon=True)

    # -- control --------------------------------------------------------------------------
    def start(self) -> threading.Thread:
        self.thread.start()
        return self.thread

    def stop(self) -> None:
        self.stop_event.set()
        self.interrupt()

    def join(self, deadline: float) -> bool:
        """Wait for the thread until ``deadline`` (monotonic); True when it ended."""
        while self.thread.is_alive() and time.monotonic() < deadline:
            self.thread.join(min(0.2, max(0.0, deadline - time.monotonic())))
            self.interrupt()  # a stop that came between the response and the watch taking it: cut again
        return not self.thread.is_alive()

    def interrupt(self) -> None:
        """End the current watch from another thread (its loop then resumes, unless stopped)."""
        w = self._watch
        if w is not None:
            w.stop()
        _shutdown(self._resp)

    def force_resource_version(self, rv: str) -> None:
        """Tests: resume the next watch from ``rv`` (an old one draws a 410 and a relist)."""
        self._forced_rv = rv
        self.interrupt()

    # -- loop -----------------------------------------------------------------------------
    def _loop(self) -> None:
        backoff = 0.2
        while not self.stop_event.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch_once()
                backoff = 0.2
                continue
            except ApiException as exc:
                if exc.status == 410:
                    self._restart("gone")
                    self.resource_version = None
                    continue
                self.last_error = f"{exc.status} {exc.reason}"
                if exc.status == 403:
                    log.info("watch %s forbidden: %s", self.name, self.last_error)
            except Exception as exc:  # connection refused while the API server restarts, a reset stream
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            if self.stop_event.is_set():
                return
            self._restart("error")
            self.reconnects += 1
            self.stop_event.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _restart(self, reason: str) -> None:
        if self.on_restart is not None:
            self.on_restart(reason)

    def _list(self) -> None:
        items: list[Obj] = []
        token: str | None = None
        while True:
            extra: dict[str, Any] = {"limit": self.page_size}
            if token:
                extra["_continue"] = token
            resp = self.list_fn(**self.kwargs, **extra, _preload_content=False, _request_timeout=60)
            raise_for_status(resp)
            body = json.loads(resp.data)
            page = body.get("items") or []
            items.extend(map(self.transform, page) if self.transform else page)
            meta = body.get("metadata") or {}
            del body, resp
            token = meta.get("continue")
            if not token:
                break
        if self.synced.is_set():
            self.relists += 1
        self.lists += 1
        self.resource_version = meta.get("resourceVersion")
        self.on_list(items)
        self.synced.set()

    def _watch_once(self) -> None:
        if self._forced_rv is not None:
            self.resource_version, self._forced_rv = self._forced_rv, None
        w = k8s_watch.Watch()
        self._watch = w
        if self.stop_event.is_set():
            return

        def call(**kw: Any) -> Any:
            # No model return type on this function: the watch hands back the server's JSON as is.
            resp = self.list_fn(**kw)
            raise_for_status(resp)
            self._resp = resp
            if self.stop_event.is_set() or self._forced_rv is not None:
                _shutdown(resp)  # stopped while the request was on its way: there was nothing to cut yet
            return resp

        try:
            for event in w.stream(
                call,
                **self.kwargs,
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_timeout,
                _request_timeout=(10, self.watch_timeout + 30),
            ):
                if self.stop_event.is_set() or self._forced_rv is not None:
                    return
                kind, obj = event.get("type"), event.get("raw_object") or {}
                if kind is None and event.get("kind") == "Status":  # a bare Status instead of an event
                    raise ApiException(status=event.get("code"), reason=event.get("reason"))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if kind == "BOOKMARK":
                    self.bookmarks += 1
                    self.resource_version = rv or self.resource_version
                    continue
                if rv:
                    self.resource_version = rv
                self.on_event(str(kind), obj)
        finally:
            self._watch, self._resp = None, None
        if not self.stop_event.is_set():
            self._restart("timeout")


def raise_for_status(resp: Any) -> None:
    """A raw (``_preload_content=False``) response does not raise by itself, a 410 included."""
    status = getattr(resp, "status", 200)
    if isinstance(status, int) and not 200 <= status <= 299:
        try:
            body = json.loads(resp.data)
        except (ValueError, TypeError):
            body = {}
        raise ApiException(status=status, reason=body.get("reason") or getattr(resp, "reason", ""))


def _shutdown(resp: Any) -> None:
    """Wake a thread blocked reading ``resp`` (urllib3's documented ``HTTPResponse.shutdown``)."""
    shutdown = getattr(resp, "shutdown", None)
    if shutdown is not None:
        try:
            shutdown()
        except Exception:  # noqa: S110 - already closed, or never opened: nothing left to wake
            pass


def stop_all(streams: list[ListWatch], join_s: float = 10.0) -> None:
    """Stop several watches and wait for their threads (a stopped watch ends at once)."""
    for s in streams:
        s.stop()
    deadline = time.monotonic() + join_s
    for s in streams:
        if s.thread.ident is not None and not s.join(deadline):
            log.warning("watch thread %s still running after stop", s.thread.name)


class Informer:
    """A cache of one kind, kept by a :class:`ListWatch`; ``handler`` sees each change.

    The cache holds a slim projection of each object (``transform``), so 10,000 Trials fit in
    a few megabytes. After a relist, objects gone meanwhile are reported DELETED and changed
    ones ADDED, so the handler never misses an ending.
    """

    def __init__(
        self,
        kind: str,
        list_fn: ListFn,
        *,
        label_selector: str | None = None,
        transform: Callable[[Obj], Obj] = lambda o: o,
        handler: Callable[[str, Obj], None] | None = None,
        metrics: Any = None,
        watch_timeout: int = WATCH_TIMEOUT_S,
        page_size: int = 250,
    ) -> None:
        self.kind = kind
        self.transform = transform
        self.handler = handler
        self.metrics = metrics
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self.stream = ListWatch(
            kind,
            list_fn,
            {"label_selector": label_selector} if label_selector else {},
            on_list=self._listed,
            on_event=self._event,
            on_restart=self._restart,
            watch_timeout=watch_timeout,
            page_size=page_size,
            transform=transform,
        )
        self.synced = self.stream.synced

    @property
    def relists(self) -> int:
        return self.stream.lists

    @property
    def bookmarks(self) -> int:
        return self.stream.bookmarks

    def get(self, name: str) -> Obj | None:
        with self._lock:
            return self._items.get(name)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def upsert(self, obj: Obj) -> None:
        """Put an object this process just wrote into the cache before its watch event arrives."""
        slim = self.transform(obj)
        name = slim["metadata"]["name"]
        with self._lock:
            old = self._items.get(name)
            if old is None or _rv(old) <= _rv(slim):
                self._items[name] = slim

    def start(self) -> threading.Thread:
        return self.stream.start()

    def stop(self) -> None:
        stop_all([self.stream])

    def _restart(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.watch_restarts.labels(self.kind, reason).inc()

    def _listed(self, items: list[Obj]) -> None:
        fresh = {o["metadata"]["name"]: o for o in items}  # already slim (ListWatch's transform)
        with self._lock:
            gone = [o for n, o in self._items.items() if n not in fresh]
            changed = [o for n, o in fresh.items() if _rv(self._items.get(n)) != _rv(o)]
            self._items = fresh
        for o in gone:
            self._emit("DELETED", o)
        for o in changed:
            self._emit("ADDED", o)

    def _event(self, kind: str, obj: Obj) -> None:
        slim = self.transform(obj)
        name = slim["metadata"]["name"]
        with self._lock:
            if kind == "DELETED":
                self._items.pop(name, None)
            else:
                self._items[name] = slim
        self._emit(kind, slim)

    def _emit(self, kind: str, obj: Obj) -> None:
        if self.handler is not None:
            try:
                self.handler(kind, obj)
            except Exception:  # a handler bug must not kill the watch
                log.exception("informer handler failed (%s)", self.kind)


def _rv(obj: Obj | None) -> int:
    try:
        return int((obj or {}).get("metadata", {}).get("resourceVersion", 0))
    except (TypeError, ValueError):
        return 0


def wait_synced(informers: list[Informer], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in informers)
