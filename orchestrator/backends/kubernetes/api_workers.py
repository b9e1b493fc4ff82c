"""The backend's API workers: a fixed set of threads taking calls by priority, then in order.

A pod create is on the run's critical path (a try does not start until its pod exists), a
finalizer release or a collection delete is not (the result is already recorded). In one FIFO
pool a burst of finished tries queued its releases ahead of the next creates, and the creates
waited for them; here a create always goes before any release still waiting. Releases still
run on every worker that has no create to do, so none is starved while creates are not queued.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: Lower runs first.
CREATE = 0
RELEASE = 1

_Job = tuple[int, int, Callable[..., Any] | None, tuple[Any, ...]]


class ApiWorkers:
    """``submit(fn, *args, priority=...)`` runs ``fn(*args)`` on one of ``workers`` threads."""

    def __init__(self, workers: int, name: str = "k8s-api") -> None:
        self._queue: queue.PriorityQueue[_Job] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._closed = False
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"{name}_{i}", daemon=True) for i in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., Any], *args: Any, priority: int = RELEASE) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit after shutdown")
            self._queue.put((priority, next(self._seq), fn, args))

    def pending(self) -> int:
        return self._queue.qsize()

    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def shutdown(self, wait: bool = True) -> None:
        """Run what is queued, then stop every worker (with ``wait``, return when they have)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                for _ in self._threads:  # after every queued job: the sequence orders equal priorities
                    self._queue.put((RELEASE + 1, next(self._seq), None, ()))
        if wait:
            for t in self._threads:
                if t is not threading.current_thread():
                    t.join()

    def _run(self) -> None:
        while True:
            _prio, _seq, fn, args = self._queue.get()
            if fn is None:
                return
            try:
                fn(*args)
            except Exception:  # one call's bug must not take a worker away from the others
                log.exception("kubernetes API worker: %s failed", getattr(fn, "__qualname__", fn))
