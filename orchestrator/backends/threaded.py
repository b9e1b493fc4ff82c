"""Adapter: drive a backend whose natural unit is "run this try to the end" through submit/observe.

The local backend runs a try as a blocking call (processes, cgroups, timers).
This adapter gives it the non-blocking interface the engine and a controller
speak: ``submit`` starts ``run(launch)`` on a worker thread (once per launch
name), ``observe`` returns its facts when the thread is done, ``wait`` sleeps
until some try ends. A process tree dies with the process that started it, so
nothing can be adopted after a crash.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from orchestrator.backends.base import ClosesOnExit, Handle
from orchestrator.spec.backend import BackendAbilities
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch


class ThreadedBackend(ClosesOnExit):
    name = "threaded"
    abilities = BackendAbilities()  # nothing; a subclass declares its own

    def __init__(self, max_workers: int = 256) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"{self.name}-try")
        self._lock = threading.Lock()
        self._futures: dict[str, Future[TrialFacts]] = {}
        self._changed = threading.Event()

    # -- to implement ------------------------------------------------------------------
    def run(self, launch: Launch) -> TrialFacts:  # pragma: no cover - abstract
        raise NotImplementedError

    def kill(self, name: str) -> None:  # pragma: no cover - abstract
        """Stop the try called ``name`` now (its thread then returns)."""
        raise NotImplementedError

    # -- the engine's interface ----------------------------------------------------------
    def submit(self, launch: Launch) -> Handle:
        with self._lock:
            if launch.name not in self._futures:
                fut = self._pool.submit(self.run, launch)
                fut.add_done_callback(lambda _f: self._changed.set())
                self._futures[launch.name] = fut
        return Handle(
            name=launch.name,
            run_id=launch.run_id,
            trial_id=launch.trial_id,
            try_index=launch.try_index,
            backend=self.name,
        )

    def observe(self, handle: Handle) -> TrialFacts | None:
        with self._lock:
            fut = self._futures.get(handle.name)
        if fut is None:
            raise LookupError(f"no try {handle.name} was submitted to this process")
        if not fut.done():
            return None
        with self._lock:
            self._futures.pop(handle.name, None)
        return fut.result()  # an exception in run() reaches the engine, which records it as our error

    def adopt(self, launch: Launch) -> Handle | None:
        return None

    def cancel(self, handle: Handle) -> None:
        self.kill(handle.name)

    def wait(self, handles: Sequence[Handle], timeout: float) -> None:
        self._changed.wait(timeout)
        self._changed.clear()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
