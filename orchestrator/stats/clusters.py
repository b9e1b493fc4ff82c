"""Cluster-level scores over templated task variants.

WHY: a benchmark that contains 30 templated variants of one problem weighs
that problem 30 times in the per-item score. The provenance registry assigns
each task a ``cluster_id``; the cluster-level score (mean of per-cluster means)
gives each underlying problem one vote, and the worst-cluster score exposes a
family of tasks the agent systematically fails. Per-cluster means are means of
the member tasks' pass rates, so a task with more attempts does not outweigh
its siblings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ClusterScores:
    n_clusters: int
    cluster_score: float | None  # mean of per-cluster means
    worst_cluster_score: float | None
    worst_cluster_id: str | None
    worst_cluster_size: int | None  # tasks in the worst cluster

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cluster_scores(task_rates: np.ndarray, task_cluster: np.ndarray, cluster_names: list[str]) -> ClusterScores:
    """From per-task pass rates (NaN = task not run) and integer cluster codes.

    ``cluster_names[code]`` names cluster ``code``. Ties for the worst cluster
    go to the first in ``cluster_names`` order (deterministic).
    """
    rates = np.asarray(task_rates, float)
    codes = np.asarray(task_cluster, int)
    m = np.isfinite(rates)
    if not np.any(m):
        return ClusterScores(0, None, None, None, None)
    nc = len(cluster_names)
    sums = np.bincount(codes[m], weights=rates[m], minlength=nc)
    cnt = np.bincount(codes[m], minlength=nc)
    present = cnt > 0
    means = np.full(nc, np.nan)
    means[present] = sums[present] / cnt[present]
    worst = int(np.nanargmin(means))
    return ClusterScores(
        n_clusters=int(present.sum()),
        cluster_score=float(np.nanmean(means)),
        worst_cluster_score=float(means[worst]),
        worst_cluster_id=str(cluster_names[worst]),
        worst_cluster_size=int(cnt[worst]),
    )
