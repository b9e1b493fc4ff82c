"""The backend's API workers (real threads): creates go first and paced, releases beside them, nothing lost."""

from __future__ import annotations

import threading
import time

import pytest

from orchestrator.backends.kubernetes.api_workers import CREATE, RELEASE, ApiWorkers, CreatePace


def test_a_create_runs_before_releases_queued_ahead_of_it() -> None:
    workers = ApiWorkers(1)
    gate = threading.Event()
    order: list[str] = []
    try:
        workers.submit(gate.wait, priority=RELEASE)  # holds the only worker while the rest is queued
        for i in range(3):
            workers.submit(order.append, f"release-{i}", priority=RELEASE)
        workers.submit(order.append, "create", priority=CREATE)
        gate.set()
    finally:
        workers.shutdown(wait=True)
    assert order == ["create", "release-0", "release-1", "release-2"]


def test_shutdown_runs_everything_queued_then_ends_every_thread() -> None:
    workers = ApiWorkers(3)
    done: list[int] = []
    lock = threading.Lock()

    def note(i: int) -> None:
        with lock:
            done.append(i)

    for i in range(50):
        workers.submit(note, i, priority=CREATE if i % 2 else RELEASE)
    workers.shutdown(wait=True)
    assert sorted(done) == list(range(50))
    assert not any(t.is_alive() for t in workers.threads())


def test_a_failing_call_does_not_take_its_worker_away() -> None:
    workers = ApiWorkers(1)
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("a bug in one call")

    workers.submit(boom)
    workers.submit(done.set)
    workers.shutdown(wait=True)
    assert done.is_set()


class _Concurrency:
    """Counts how many calls run at once (real threads, real sleeps)."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self.lock = threading.Lock()

    def call(self, seconds: float) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(seconds)
        with self.lock:
            self.now -= 1


@pytest.mark.parametrize(
    ("create_s", "ceiling", "calls", "at_once"),
    [
        # 5 ms a create reaches 50 creates a second alone: more at once would only queue in the scheduler.
        pytest.param(0.005, 6, 20, 1, id="fast creates run one at a time on any number of workers"),
        # 100 ms a create (a distant API server) needs five at once for 50 a second; the ceiling is four.
        pytest.param(0.1, 4, 16, 4, id="slow creates run several at once up to the ceiling"),
    ],
)
def test_creates_run_as_many_at_once_as_the_pace_allows(
    create_s: float, ceiling: int, calls: int, at_once: int
) -> None:
    workers = ApiWorkers(6, pace=CreatePace(ceiling=ceiling, per_s=50))
    seen = _Concurrency()
    for _ in range(calls):
        workers.submit(seen.call, create_s, priority=CREATE)
    workers.shutdown(wait=True)
    assert seen.most == at_once
    assert workers.pace.limit() == at_once


def test_a_release_runs_beside_a_create_that_holds_the_only_create_slot() -> None:
    workers = ApiWorkers(2, pace=CreatePace(ceiling=2))
    gate, released = threading.Event(), threading.Event()
    try:
        workers.submit(gate.wait, priority=CREATE)
        workers.submit(lambda: None, priority=CREATE)  # waits: one create at a time until one is timed
        workers.submit(released.set, priority=RELEASE)
        assert released.wait(5), "the release waited for the create"
    finally:
        gate.set()
        workers.shutdown(wait=True)


def test_the_pace_follows_the_fastest_recent_create_not_the_slow_ones() -> None:
    pace = CreatePace(ceiling=8, per_s=50, window=4)
    assert pace.limit() == 1  # nothing timed yet
    for s in (0.1, 0.1, 0.1):
        pace.observe(s)
    assert pace.limit() == 5
    pace.observe(0.01)  # contention makes creates slower, never faster: the fast one is the round trip
    assert pace.limit() == 1
    for s in (0.3, 0.3, 0.3, 0.3):  # the fast one has left the window: the round trip itself grew
        pace.observe(s)
    assert pace.limit() == 8


def test_a_stalled_create_stops_holding_up_the_creates_behind_it() -> None:
    # One hung connection must not stop every create until its request times out.
    workers = ApiWorkers(2, pace=CreatePace(ceiling=2), stalled_s=0.2)
    gate, second = threading.Event(), threading.Event()
    try:
        workers.submit(gate.wait, priority=CREATE)  # holds the only slot (nothing timed yet: one at a time)
        workers.submit(second.set, priority=CREATE)
        assert not second.wait(0.1), "the second create ran beside the first before it counted as stalled"
        assert second.wait(5), "the second create waited for the stalled one"
    finally:
        gate.set()
        workers.shutdown(wait=True)
