"""One LIST+WATCH per kind, with bookmarks, feeding a local cache and the work queue.

The cache holds a slim projection of each object (``transform``), so 10,000 Trials fit in
a few megabytes. The watch resumes from the last resourceVersion it saw (bookmarks keep
that fresh when nothing changes), and relists when the server answers 410 Gone.
Handlers only enqueue keys: the reconcile loop reads the cache, never the event.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from urllib3.exceptions import HTTPError, ProtocolError, ReadTimeoutError

from orchestrator.controller.metrics import Metrics

log = structlog.get_logger("headroom.informer")

Obj = dict[str, Any]
ListFn = Callable[..., Any]  # a *_list_* API method taking the usual keyword arguments
Handler = Callable[[str, Obj], None]  # (event type, object)


class Informer:
    def __init__(
        self,
        kind: str,
        list_fn: ListFn,
        *,
        label_selector: str | None = None,
        transform: Callable[[Obj], Obj] = lambda o: o,
        handler: Handler | None = None,
        metrics: Metrics | None = None,
        watch_timeout: int = 240,
        page_size: int = 250,
    ) -> None:
        self.kind = kind
        self.list_fn = list_fn
        self.label_selector = label_selector
        self.transform = transform
        self.handler = handler
        self.metrics = metrics
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._resp: Any = None
        self.relists = 0
        self.bookmarks = 0

    # -- cache --------------------------------------------------------------------------
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

    # -- loop ---------------------------------------------------------------------------
    def start(self) -> threading.Thread:
        t = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.close()
            except Exception:  # closing a half-read socket may raise; it is being abandoned anyway
                pass

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch()
                backoff = 0.5
            except ApiException as exc:
                if exc.status == 410:
                    self._restart("gone")
                    self.resource_version = None  # relist
                    continue
                self._restart("error")
                log.warning("watch failed", kind=self.kind, status=exc.status, reason=exc.reason)
            except (HTTPError, ProtocolError, ReadTimeoutError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                self._restart("error")
                log.warning("watch connection lost", kind=self.kind, error=f"{type(exc).__name__}: {exc}")
            except Exception as exc:  # a closed or half-read response: the informer must outlive it
                if self._stop.is_set():
                    return
                self._restart("error")
                log.warning("watch failed unexpectedly", kind=self.kind, error=f"{type(exc).__name__}: {exc}")
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 10.0)

    def _restart(self, reason: str) -> None:
        if self.metrics:
            self.metrics.watch_restarts.labels(self.kind, reason).inc()

    def _list(self) -> None:
        """A paginated LIST: a page at a time is parsed and slimmed, never the whole collection at once."""
        fresh: dict[str, Obj] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size}
            if token:
                kwargs["_continue"] = token
            resp = self.list_fn(label_selector=self.label_selector, _preload_content=False, _request_timeout=60,
                                **kwargs)
            _raise_for_status(resp)
            body = json.loads(resp.data)
            del resp
            for o in body.get("items", []):
                fresh[o["metadata"]["name"]] = self.transform(o)
            token = body.get("metadata", {}).get("continue")
            if not token:
                break
            body = None
        with self._lock:
            gone = [o for n, o in self._items.items() if n not in fresh]
            changed = [o for n, o in fresh.items() if _rv(self._items.get(n)) != _rv(o)]
            self._items = fresh
        self.resource_version = body["metadata"]["resourceVersion"]
        self.relists += 1
        self.synced.set()
        for o in gone:
            self._emit("DELETED", o)
        for o in changed:
            self._emit("ADDED", o)

    def _watch(self) -> None:
        resp = self.list_fn(
            label_selector=self.label_selector, watch=True, allow_watch_bookmarks=True,
            resource_version=self.resource_version, timeout_seconds=self.watch_timeout,
            _preload_content=False, _request_timeout=(10, self.watch_timeout + 30),
        )
        self._resp = resp
        try:
            _raise_for_status(resp)  # raw responses do not raise by themselves (a 410 comes back this way too)
            for line in iter_resp_lines(resp):
                if self._stop.is_set():
                    return
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind is None and event.get("kind") == "Status":  # a bare Status instead of an event
                    raise ApiException(status=event.get("code"), reason=event.get("reason"))
                if kind == "ERROR":
                    raise ApiException(status=obj.get("code"), reason=obj.get("reason"))
                rv = obj.get("metadata", {}).get("resourceVersion")
                if kind == "BOOKMARK":
                    self.bookmarks += 1
                    self.resource_version = rv or self.resource_version
                    continue
                slim = self.transform(obj)
                name = slim["metadata"]["name"]
                with self._lock:
                    if kind == "DELETED":
                        self._items.pop(name, None)
                    else:
                        self._items[name] = slim
                if rv:
                    self.resource_version = rv
                self._emit(kind, slim)
        finally:
            self._resp = None
            resp.close()
            resp.release_conn()
        self._restart("timeout")

    def _emit(self, kind: str, obj: Obj) -> None:
        if self.handler is not None:
            try:
                self.handler(kind, obj)
            except Exception:  # a handler bug must not kill the watch
                log.exception("informer handler failed", kind=self.kind)


def _raise_for_status(resp: Any) -> None:
    status = getattr(resp, "status", 200)
    if isinstance(status, int) and not 200 <= status <= 299:
        try:
            body = json.loads(resp.data)
        except (ValueError, TypeError):
            body = {}
        raise ApiException(status=status, reason=body.get("reason") or getattr(resp, "reason", ""))


def _rv(obj: Obj | None) -> int:
    try:
        return int((obj or {}).get("metadata", {}).get("resourceVersion", 0))
    except (TypeError, ValueError):
        return 0


def wait_synced(informers: list[Informer], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in informers)
