"""Overcommit made visible: what each trial ran beside, against what the machine has.

WHY: limits are promises the machine may not be able to keep all at once. When
the limits of the trials running together add up to more than the host (or
node) has, a trial can be killed by memory pressure it did not cause, and such
kills grow with the multiplier -- exactly the effect a sweep measures.

* Every trial records ``extra.overcommit``: the largest sum of the memory
  limits of the tries running at the same time during its life (itself
  included), the capacity it is compared with, their ratio, how many tries ran
  together at most, and whether another try without a limit (it may take
  anything) ran beside it. Locally the engine fills it (scope ``host``,
  capacity = host memory). In a cluster the backend fills the same keys with
  scope ``node``: the sum of memory limits on the trial's node at scheduling
  time, the node's allocatable memory, and ``node_memory_pressure`` (the
  node's MemoryPressure condition) -- the engine leaves a record the backend
  has already set alone.
* :func:`warnings_for` says, before a run, which configurations' limits can
  exceed the capacity at the run's concurrency.
* ``placement = "limit-aware"`` (``--placement limit-aware``) caps the sum of
  the limits of concurrently running tries locally at the capacity: a try
  waits until it fits, an unbounded try runs alone, and a try larger than the
  capacity runs alone rather than never.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.spec.resources import MIB

if TYPE_CHECKING:  # a report reads observed_by_config and needs none of the spec models (their import is costly)
    import pandas as pd

    from orchestrator.spec.backend import BackendFacts
    from orchestrator.spec.evidence import Overcommit
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.launch import Launch
    from orchestrator.spec.provenance import OvercommitPlan
    from orchestrator.spec.task import Task

PlacementMode = Literal["default", "limit-aware"]


@dataclass
class _Life:
    limit_bytes: int | None
    max_sum: int = 0
    max_count: int = 0
    unbounded_beside: bool = False


class Placement:
    """Tracks the limits of in-flight tries; with ``limit_aware``, admits a try only if it fits."""

    def __init__(self, capacity_bytes: int | None, mode: PlacementMode = "default", scope: str = "host") -> None:
        self.capacity = capacity_bytes
        self.mode = mode
        self.scope = scope
        self._lock = threading.Lock()
        self._live: dict[str, _Life] = {}

    def _reserved(self, limit: int | None) -> int:
        """What a try holds against the cap: its limit, or everything when it has none."""
        assert self.capacity is not None
        return self.capacity if limit is None else limit

    def admit(self, launch: Launch) -> bool:
        if self.mode != "limit-aware" or self.capacity is None:
            return True
        with self._lock:
            if not self._live:
                return True
            held = sum(self._reserved(life.limit_bytes) for life in self._live.values())
            return held + self._reserved(launch.amounts.limit_memory_bytes) <= self.capacity

    def started(self, name: str, launch: Launch) -> None:
        with self._lock:
            self._live[name] = _Life(launch.amounts.limit_memory_bytes)
            total = sum(life.limit_bytes or 0 for life in self._live.values())
            n_unbounded = sum(1 for life in self._live.values() if life.limit_bytes is None)
            for life in self._live.values():
                life.max_sum = max(life.max_sum, total)
                life.max_count = max(life.max_count, len(self._live))
                others_unbounded = n_unbounded - (1 if life.limit_bytes is None else 0)
                life.unbounded_beside = life.unbounded_beside or others_unbounded > 0

    def finished(self, name: str) -> Overcommit | None:
        from orchestrator.spec.evidence import Overcommit  # already loaded by the sweep that calls this

        with self._lock:
            life = self._live.pop(name, None)
        if life is None:
            return None
        return Overcommit(
            scope=self.scope,
            placement=self.mode,
            capacity_bytes=self.capacity,
            concurrent_limit_bytes_max=life.max_sum,
            ratio_max=(life.max_sum / self.capacity) if self.capacity else None,
            concurrent_tries_max=life.max_count,
            unbounded_in_flight=life.unbounded_beside,
        )


def observed_by_config(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per configuration, what its final tries ran beside: the trial frame's ``overcommit_*`` columns."""
    if frame.empty or "overcommit_ratio" not in frame.columns:
        return {}
    recorded = frame["overcommit_beside_unbounded"].notna() | frame["overcommit_ratio"].notna()
    per = (
        frame.assign(recorded=recorded)
        .groupby("config_label", sort=True)
        .agg(
            trials_recorded=("recorded", "sum"),
            ratio_max=("overcommit_ratio", "max"),
            ratio_mean=("overcommit_ratio", "mean"),
            beside=("overcommit_beside_unbounded", "sum"),
            pressure=("overcommit_memory_pressure", "sum"),
        )
    )
    return {
        str(label): {
            "trials_recorded": int(r.trials_recorded),
            "ratio_max": _finite(r.ratio_max),
            "ratio_mean": _finite(r.ratio_mean),
            "trials_beside_unbounded": int(r.beside),
            "trials_under_memory_pressure": int(r.pressure),
        }
        for label, r in per.iterrows()
    }


def _finite(v: Any) -> float | None:
    import pandas as pd  # a report's import: the engine (Placement) never needs it

    return None if v is None or pd.isna(v) else float(v)


def capacity_of(backend_facts: BackendFacts) -> int | None:
    """The memory trials share: the host's (local, docker); None where a backend reports per node."""
    value = backend_facts.memory_bytes
    return value if value is not None and value > 0 else None


def node_capacities(backend_facts: BackendFacts) -> dict[str, int] | str | None:
    """A cluster backend's candidate nodes and their allocatable memory; why not, when it could not list them.

    None for a backend without nodes (local, docker)."""
    if backend_facts.kubernetes is None:
        return None
    nodes = backend_facts.kubernetes.nodes
    if isinstance(nodes, str):
        return nodes  # "not readable (403 Forbidden)"
    from orchestrator.kube.api import parse_quantity

    return {n.name: int(parse_quantity(n.allocatable["memory"])) for n in nodes if n.allocatable.get("memory")}


def fill_by_request(amounts: list[tuple[int, int]], room: int, k: int, copies: int) -> tuple[int, int]:
    """At most ``k`` trials (each of ``amounts`` up to ``copies`` times: its attempts) whose memory requests
    fit ``room``, chosen for a large sum of limits: (how many, that sum).

    The scheduler places by request, so such a set can share a node. Greedy (most limit per
    request first) rather than the exact knapsack: the set it finds is one the scheduler could
    make, so a sum above the node's memory is an overcommit that can happen.
    """
    n = used = held = 0
    for request, limit in sorted(amounts, key=lambda a: (a[1] / max(a[0], 1), a[1]), reverse=True):
        for _ in range(copies):
            if n >= k or used + request > room:
                break
            n, used, held = n + 1, used + request, held + limit
    return n, held


def warnings_for(
    experiment: Experiment, tasks: list[Task], capacity: int | None, nodes: dict[str, int] | str | None = None
) -> OvercommitPlan:
    """Per configuration, the worst sum of limits at the run's concurrency, and warnings where it exceeds capacity.

    ``capacity`` is the host's memory (local, docker). In a cluster (``nodes``: each candidate
    node's allocatable memory) the worst case is per node: the trials that fit one node by
    their requests, and the limits they then hold there.
    """
    from orchestrator.engine.launch import trial_amounts
    from orchestrator.spec.provenance import NodeFill, OvercommitPlan
    from orchestrator.spec.trial import Trial

    per_config: dict[str, int | None] = {}
    per_node: dict[str, NodeFill] = {}
    warnings: list[str] = []
    k = experiment.concurrency
    for config in experiment.configurations:
        amounts = [
            trial_amounts(t, Trial(trial_id="", task_id=t.id, config=config, attempt=0, seed=0, order=0)) for t in tasks
        ]
        limits = [a.limit_memory_bytes for a in amounts]
        if isinstance(nodes, dict) and nodes and all(lim is not None for lim in limits):
            fullest = max(
                (
                    (
                        name,
                        room,
                        *fill_by_request(
                            [(a.request_memory_bytes, a.limit_memory_bytes or 0) for a in amounts],
                            room,
                            k,
                            experiment.attempts,
                        ),
                    )
                    for name, room in nodes.items()
                ),
                key=lambda w: w[3] / max(w[1], 1),
            )
            name, room, n, held = fullest
            per_node[config.label] = NodeFill(node=name, capacity_bytes=room, trials=n, limit_bytes=held)
            if held > room and experiment.placement != "limit-aware":
                warnings.append(
                    f"{config.label}: {n} trials fit node {name} ({room / MIB:.0f} MiB allocatable) by "
                    f"their requests, and their limits then add up to {held / MIB:.0f} MiB; use "
                    "--placement limit-aware (after `headroom cluster nodes advertise`) or lower --concurrency"
                )
        if any(lim is None for lim in limits):
            per_config[config.label] = None
            if k > 1:
                warnings.append(
                    f"{config.label}: trials without a memory limit run {k} at a time and can together "
                    "take more memory than the machine has"
                )
            continue
        worst = sum(sorted((lim or 0 for lim in limits), reverse=True)[:k])
        per_config[config.label] = worst
        if capacity is not None and worst > capacity and experiment.placement != "limit-aware":
            warnings.append(
                f"{config.label}: {k} trials at once can hold {worst / MIB:.0f} MiB of limits, more than "
                f"the {capacity / MIB:.0f} MiB available; use --placement limit-aware or lower --concurrency"
            )
    out = OvercommitPlan(
        capacity_bytes=capacity,
        placement=experiment.placement,
        concurrency=k,
        worst_concurrent_limit_bytes=per_config,
        warnings=warnings,
    )
    if nodes is not None:
        out.worst_node = per_node
        out.nodes_checked = len(nodes) if isinstance(nodes, dict) else f"nodes {nodes}: not checked per node"
    return out
