"""A work queue deduplicated by key, in the manner of client-go's workqueue.

* a key added many times before a worker takes it is processed once;
* a key is never processed by two workers at once: added while being processed, it is
  queued again when the worker calls :meth:`done`;
* :meth:`add_after` schedules a key for later (requeue with a delay); the earliest
  deadline wins.

Level-triggered: a key says "look at this object again", never "this happened".
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Hashable

from orchestrator.errors import ShutDown


class WorkQueue:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()  # queued, not yet taken
        self._processing: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._delayed_at: dict[Hashable, float] = {}
        self._seq = 0
        self._shutdown = False
        self.adds = 0  # every add() call, for the deduplication ratio in metrics and tests

    def add(self, key: Hashable) -> None:
        with self._cond:
            self.adds += 1
            if self._shutdown or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            at = time.monotonic() + delay
            current = self._delayed_at.get(key)
            if current is not None and current <= at:
                return
            self._delayed_at[key] = at
            self._seq += 1
            heapq.heappush(self._delayed, (at, self._seq, key))
            self._cond.notify()

    def get(self, timeout: float | None = None) -> Hashable | None:
        """The next key, or None after ``timeout``; raises ShutDown once shut down."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._shutdown:
                    raise ShutDown
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return None
                waits = [
                    w for w in (self._next_due_in(), None if deadline is None else deadline - now) if w is not None
                ]
                self._cond.wait(max(0.0, min(waits)) if waits else None)

    def done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shut_down(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def _promote_due(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            at, _, key = heapq.heappop(self._delayed)
            if self._delayed_at.get(key) != at:
                continue  # superseded by an earlier deadline
            del self._delayed_at[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)

    def _next_due_in(self) -> float | None:
        return self._delayed[0][0] - time.monotonic() if self._delayed else None
