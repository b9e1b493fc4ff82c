"""The calibration's per-task results as plain dataclasses (:mod:`orchestrator.stats.bands` computes them).

Apart from the rule so that ``runs calibrate`` can write a stored calibration's patches without importing the
statistics (numpy, pandas, scipy): see :mod:`orchestrator.report.stored`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class LimitTest:
    """One tested limit against the task's strict (smallest) limit."""

    label: str
    limit_multiplier: float | None  # None: unbounded
    request_multiplier: float
    infra: dict[str, Any]  # Wilson proportion at this limit
    test: str  # the infra test, one-sided: fewer infra errors than at the strict limit
    p: float
    diff: float | None  # infra rate here minus at the strict limit
    diff_low: float | None  # 95% Newcombe interval of that difference
    diff_high: float | None
    significant: bool  # infra reduced: Holm-adjusted p < alpha
    within_margin: bool  # score shown within the margin of the strict limit's (TOST)
    within_noise: bool  # eligible as the ceiling: infra reduced, bounded, below the first score change
    p_holm: float | None = None
    score: dict[str, Any] = field(default_factory=dict)  # pass rate among finished trials (Wilson)
    score_p: float | None = None  # two-sided exact test vs the strict limit
    score_p_holm: float | None = None
    score_changed: bool = False
    tost_p: float | None = None
    finished_only_here: bool = False  # no trial finished at the strict limit, some here: a change, never equivalence
    cpu: dict[str, Any] = field(default_factory=dict)  # CPU use and throttling at this limit (empty: not recorded)


@dataclass(frozen=True)
class OracleCheck:
    """A task's oracle run at each tested limit (the oracle check, where it ran): the smallest limit multiplier
    at which the oracle passed, None when it passed at none. Passing only above the strict limit means the
    task's own solution needs more than its spec: the spec is too low, whatever the agent does."""

    passes_from: float | None


@dataclass
class TaskBand:
    task_id: str
    status: str  # "recommended" | "refused"
    spec_memory_mb: int
    spec_cpus: float
    floor_memory_mb: int | None = None
    floor_cpus: float | None = None
    ceiling_memory_mb: int | None = None
    ceiling_cpus: float | None = None
    ceiling_label: str | None = None
    ceiling_limit_multiplier: float | None = None
    peaks: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, Any] = field(default_factory=dict)  # per-trial average CPU use at the generous limits
    cpu_floor_source: str | None = None
    unbounded_infra: dict[str, Any] | None = None
    limits: list[LimitTest] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    attempts_needed: int | None = None
    reference_label: str | None = None
    ceiling_reason: str | None = None
    unbounded_test: dict[str, Any] | None = None  # unbounded against the strict limit: evidence, never a ceiling
    spec_too_low: str | None = None  # "needs more than the largest limit tested" / "its oracle fails below 3x"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
