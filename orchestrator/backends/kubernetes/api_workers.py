"""The backend's API workers: a fixed set of threads taking creates first, creates paced, then the rest in order.

A pod create is on the run's critical path (a try does not start until its pod exists), a
finalizer release or a collection delete is not (the result is already recorded). In one FIFO
pool a burst of finished tries queued its releases ahead of the next creates, and the creates
waited for them; here a create always goes before any release still waiting. Releases still
run on every worker that has no create to do, so none is starved while creates are not queued.

Creates are also paced (:class:`CreatePace`): only as many run at once as it takes to create pods
about as fast as a scheduler binds them. Pods created faster only queue in the scheduler and the
kubelets, and on a control plane that shares its cores with them they slow everything down: on
the test plane (2 cores, 50 kwok nodes, 200 pods in flight) eight creates at once made a pod take
2.3-3.1 s from its create to Running against 0.3-0.7 s one at a time, and the run 12-19% longer.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: Which queue a call joins: every queued create goes first.
CREATE = 0
RELEASE = 1

#: The pace creates aim at: kube-scheduler binds with a client limited to 50 requests a second by
#: default (KubeSchedulerConfiguration ``clientConnection.qps``), so pods created faster than that wait
#: in its queue whatever the creates' concurrency.
CREATES_PER_S = 50.0
#: The creates whose fastest one estimates the API server's round trip.
PACE_WINDOW = 50
#: A create running this long no longer holds its place in the pace: one stalled connection must not hold up
#: every other create until its request times out (the others then run beside it, as they would unpaced).
STALLED_S = 5.0

_Job = tuple[Callable[..., Any], tuple[Any, ...]]


class CreatePace:
    """How many creates may run at once: enough to reach :data:`CREATES_PER_S` over the API's round trip.

    The round trip is the fastest of the last :data:`PACE_WINDOW` creates: what a create costs when
    nothing queues in front of it (the network and the server's own work). A slow network asks for
    more creates at once (100 ms a create: five); contention does not, since it lengthens the slow
    creates and leaves the fastest alone, so a loaded plane is never handed more concurrent creates
    for being loaded. One at a time until a create has been timed; never more than ``ceiling``.
    """

    def __init__(self, ceiling: int, per_s: float = CREATES_PER_S, window: int = PACE_WINDOW) -> None:
        self.ceiling = max(1, ceiling)
        self.per_s = per_s
        self._recent: deque[float] = deque(maxlen=max(1, window))

    def observe(self, seconds: float) -> None:
        self._recent.append(max(0.0, seconds))

    def limit(self) -> int:
        if not self._recent:
            return 1
        return max(1, min(self.ceiling, math.ceil(min(self._recent) * self.per_s)))


class ApiWorkers:
    """``submit(fn, *args, priority=...)`` runs ``fn(*args)`` on one of ``workers`` threads."""

    def __init__(
        self, workers: int, name: str = "k8s-api", pace: CreatePace | None = None, stalled_s: float = STALLED_S
    ) -> None:
        self.pace = pace or CreatePace(workers)
        self.stalled_s = stalled_s
        self._creates: deque[_Job] = deque()
        self._others: deque[_Job] = deque()
        self._started: dict[int, float] = {}  # a running create's token -> when it started
        self._tokens = itertools.count()
        self._closed = False
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._run, name=f"{name}_{i}", daemon=True) for i in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., Any], *args: Any, priority: int = RELEASE) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot submit after shutdown")
            (self._creates if priority == CREATE else self._others).append((fn, args))
            self._cond.notify()

    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def shutdown(self, wait: bool = True) -> None:
        """Run what is queued, then stop every worker (with ``wait``, return when they have)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if wait:
            for t in self._threads:
                if t is not threading.current_thread():
                    t.join()

    def _next(self) -> tuple[int | None, _Job] | None:
        """The next call (with its token when it is a create), or None once closed with nothing left to run."""
        with self._cond:
            while True:
                now = time.monotonic()
                pacing = [at for at in self._started.values() if now - at < self.stalled_s]
                if self._creates and len(pacing) < self.pace.limit():
                    token = next(self._tokens)
                    self._started[token] = now
                    return token, self._creates.popleft()
                if self._others:
                    return None, self._others.popleft()
                if self._closed and not self._creates:
                    return None
                # Woken by a submit or a create's end; or when the oldest running create counts as stalled.
                self._cond.wait(self.stalled_s - (now - min(pacing)) if self._creates and pacing else None)

    def _run(self) -> None:
        while (job := self._next()) is not None:
            token, (fn, args) = job
            try:
                fn(*args)
            except Exception:  # one call's bug must not take a worker away from the others
                log.exception("kubernetes API worker: %s failed", getattr(fn, "__qualname__", fn))
            finally:
                if token is not None:
                    with self._cond:
                        self.pace.observe(time.monotonic() - self._started.pop(token))
                        self._cond.notify_all()
