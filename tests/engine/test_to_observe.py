"""The engine observes what a backend says changed, and every try once per ``FULL_SWEEP_S``.

A backend without ``changed()`` (local, Docker) has every in-flight try observed on every wake-up, as before.
The Pod backend's ``changed()`` is checked against the real API server in tests/cluster/test_kubernetes_changed.py.
"""

from __future__ import annotations

from typing import Any

from orchestrator.engine.execute import FULL_SWEEP_S, to_observe


class Named:
    """Stands in for a backend's ``changed()`` alone: the selection is the engine's, not a backend's."""

    def __init__(self) -> None:
        self.pending: set[str] = set()
        self.asked = 0

    def changed(self) -> set[str]:
        self.asked += 1
        names, self.pending = self.pending, set()
        return names


def test_a_backend_without_changed_has_every_try_observed() -> None:
    backend: Any = object()
    names, last = to_observe(backend, 123.0)
    assert names is None and last == 123.0


def test_only_the_named_tries_are_observed_between_sweeps_of_all() -> None:
    backend: Any = Named()
    names, last = to_observe(backend, 0.0)  # the first call: a sweep of all
    assert names is None and last > 0
    backend.pending = {"try-a"}
    names, last2 = to_observe(backend, last)
    assert names == {"try-a"} and last2 == last
    names, _ = to_observe(backend, last)
    assert names == set()  # nothing changed since: nothing is observed
    # a sweep of all is due: every try is observed, and what was named meanwhile is taken (the sweep covers it)
    backend.pending = {"try-b"}
    names, last3 = to_observe(backend, last - FULL_SWEEP_S)
    assert names is None and last3 >= last and backend.pending == set()
