"""The backend's API workers (real threads): creates go before queued releases, nothing queued is lost."""

from __future__ import annotations

import threading

from orchestrator.backends.kubernetes.api_workers import CREATE, RELEASE, ApiWorkers


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
