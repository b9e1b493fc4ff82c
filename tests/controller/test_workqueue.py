"""The work queue: deduplicated by key, one worker per key, delayed adds."""

from __future__ import annotations

import threading
import time

import pytest

from orchestrator.controller.workqueue import WorkQueue
from orchestrator.errors import ShutDown


def test_keys_added_many_times_are_processed_once() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert q.get(timeout=0.1) == "a"
    assert q.get(timeout=0.1) == "b"
    assert q.get(timeout=0.05) is None
    assert q.adds == 6


def test_a_key_is_never_handed_to_two_workers_at_once() -> None:
    q = WorkQueue()
    q.add("a")
    key = q.get(timeout=0.1)
    q.add("a")  # changed while being processed
    assert q.get(timeout=0.05) is None  # not handed out again yet
    q.done(key)
    assert q.get(timeout=0.1) == "a"  # and processed once more after done


def test_add_after_waits_and_earliest_deadline_wins() -> None:
    q = WorkQueue()
    q.add_after("slow", 5.0)
    q.add_after("slow", 0.1)
    t0 = time.monotonic()
    assert q.get(timeout=2.0) == "slow"
    assert 0.05 < time.monotonic() - t0 < 1.5
    q.done("slow")
    q.add_after("x", 0.05)
    q.add("x")  # an immediate add does not wait for the delayed one
    assert q.get(timeout=0.02) == "x"


def test_shut_down_wakes_blocked_workers() -> None:
    q = WorkQueue()
    raised = threading.Event()

    def worker() -> None:
        try:
            q.get()
        except ShutDown:
            raised.set()

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.05)
    q.shut_down()
    t.join(2)
    assert raised.is_set()
    with pytest.raises(ShutDown):
        q.get(timeout=0.1)


def test_concurrent_workers_see_each_key_once_per_round() -> None:
    q = WorkQueue()
    seen: list[str] = []
    lock = threading.Lock()
    active: set[str] = set()
    overlap = threading.Event()

    def worker() -> None:
        while True:
            try:
                key = q.get(timeout=0.3)
            except ShutDown:
                return
            if key is None:
                return
            with lock:
                if key in active:
                    overlap.set()
                active.add(key)
                seen.append(str(key))
            time.sleep(0.01)
            with lock:
                active.discard(key)
            q.done(key)

    for i in range(200):
        q.add(f"k{i % 10}")
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert not overlap.is_set()
    assert sorted(set(seen)) == sorted(f"k{i}" for i in range(10))
    assert len(seen) == 10  # every add happened before the workers started: one round each
