"""Typed records for writing a whole finished run at once (imports, bundles).

A sweep writes its run row by row as trials finish; a run produced elsewhere
(a Harbor job, a Terminal-Bench run, a verified bundle) arrives complete. These
records carry everything the store needs for such a run, so no caller writes SQL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.spec.provenance import Provenance

#: What a run's configurations are. ``resources``: resource levels of a sweep
#: (ordered by headroom; trend tests and calibration apply). ``labels``: agents,
#: models or imported submissions (kept in the user's order; no resource axis).
AXES = ("resources", "labels")


@dataclass(frozen=True)
class TaskRecord:
    task_id: str
    digest: str
    cluster_id: str
    spec: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecutionRecord:
    """One try of a trial. ``final`` marks the try that is the trial's result."""

    try_index: int
    status: str  # finished | abandoned | running
    final: bool
    started_at: str | None  # None: not recorded (imported results without times); stored as NULL, never ''
    finished_at: str | None
    outcome: str | None
    reason: str | None = None
    reward: float | None = None
    enforcement: str | None = None
    qos_class: str | None = None
    request_cpus: float | None = None
    request_memory_bytes: int | None = None
    limit_cpus: float | None = None
    limit_memory_bytes: int | None = None
    peak_memory_bytes: int | None = None
    cpu_time_s: float | None = None
    duration_s: float | None = None
    tokens_in: float | None = None
    tokens_out: float | None = None
    cost_usd: float | None = None
    evidence: dict[str, Any] | None = None
    usage_source: str | None = None  # gateway | self-reported | None (no usage recorded)


@dataclass(frozen=True)
class TrialRecord:
    trial_id: str
    task_id: str
    config_label: str
    request_multiplier: float
    limit_multiplier: float | None
    attempt: int
    seed: int
    order: int
    executions: list[ExecutionRecord] = field(default_factory=list)
    source_run: str | None = None  # imported trials: the source run (job, run directory) they came from


@dataclass(frozen=True)
class RunRecord:
    name: str
    backend: str
    enforcement: str
    axis: str
    spec: dict[str, Any]
    provenance: Provenance
    status: str = "finished"
    created_at: str | None = None
    finished_at: str | None = None
    run_id: str | None = None  # None: a new id is minted


def content_digest(file_digests: Iterable[str]) -> str:
    """What identifies an imported source: sha256 over the sorted sha256s of the files read from it.

    Content only, so a copied or renamed folder is still the same source. Import provenance written before
    sources carried this digest records the per-file digests, so it is computed from those alone.
    """
    joined = "\n".join(sorted(str(d) for d in file_digests))
    return "sha256:" + hashlib.sha256(joined.encode()).hexdigest()
