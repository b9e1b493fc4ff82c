"""A one-sided exact test of "fewer events under B than under A", stratified by task.

WHY stratified: tasks differ. A task that is OOM-killed on every attempt at both limits (its spec is
too low) adds the same errors to both sides of a pooled test and drowns the reduction the other tasks
show; the pooled test also mixes the tasks' different error rates. Conditioning on each task's
margins (its trials per side and its events on both sides together) takes every task's own rate
out of the question: a task whose infra state does not change across the two limits (no event, or
events on every trial) has a single possible table and carries no weight.

Test: the exact conditional test of a common odds ratio of 1 (the exact form of the
Cochran-Mantel-Haenszel test; Birch 1964, R's ``mantelhaen.test(exact=TRUE)``). Under the null, a
task's events on side A are hypergeometric given its margins (``scipy.stats.hypergeom``), the tasks
are independent, so the null distribution of the total on side A is the convolution of the tasks'
hypergeometric pmfs (``numpy.convolve``); p = P(total on A >= observed). With one task it is Fisher's
exact test (``scipy.stats.fisher_exact``), which is what a task's own calibration uses. Above
``EXACT_MAX_EVENTS`` informative events the convolution is long, the asymptotic CMH is accurate
there and is used instead (statsmodels ``StratifiedTable``, continuity-corrected, one-sided), and
``method`` says so. Exact means conservative with few events: its size was 0.5% at 10 tasks x 3
attempts, 1.8% with the tasks' infra rates differing (benchmarks/bench_calibration.py part 2, 400
seeds); a one-sided asymptotic CMH tried before was above nominal there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

#: Informative events (on both sides, in tasks that carry weight) up to which the convolution runs.
EXACT_MAX_EVENTS = 4_000

EXACT = "exact conditional, stratified by task (one-sided)"
ASYMPTOTIC = "Cochran-Mantel-Haenszel, stratified by task, continuity-corrected (one-sided; exact too long here)"


@dataclass(frozen=True)
class StratifiedExact:
    p: float
    method: str
    strata_used: int  # tasks whose table could vary: the ones that carry weight
    strata_dropped: int
    observed: int  # events on side A in the informative tasks
    expected: float  # their null expectation

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fewer_events(x_a: ArrayLike, n_a: ArrayLike, x_b: ArrayLike, n_b: ArrayLike) -> StratifiedExact:
    """p of "B has a lower event rate than A", arrays aligned by task (events, trials per side)."""
    xa, na, xb, nb = (np.asarray(v, dtype=np.int64) for v in (x_a, n_a, x_b, n_b))
    e = xa + xb
    m = na + nb
    used = (na > 0) & (nb > 0) & (e > 0) & (e < m)  # else one table only: no information
    k = int(used.sum())
    if k == 0:
        return StratifiedExact(1.0, "none (no task whose table can vary)", 0, int(len(xa)), 0, 0.0)
    xa, na, xb, nb, e, m = xa[used], na[used], xb[used], nb[used], e[used], m[used]
    observed = int(xa.sum())
    expected = float(np.sum(e * na / m))
    if int(e.sum()) > EXACT_MAX_EVENTS:
        return StratifiedExact(_cmh_one_sided(xa, na, xb, nb), ASYMPTOTIC, k, int(len(used) - k), observed, expected)
    lo, hi = np.maximum(0, na + e - m), np.minimum(e, na)
    grid = lo[:, None] + np.arange(int((hi - lo).max()) + 1)[None, :]  # every task's support, padded
    pmfs = stats.hypergeom.pmf(grid, m[:, None], e[:, None], na[:, None])  # one call for all tasks
    pmf = np.ones(1)
    for row, width in zip(pmfs, hi - lo + 1):
        pmf = np.convolve(pmf, row[:width])
    p = float(pmf[observed - int(lo.sum()) :].sum())
    return StratifiedExact(min(1.0, p), EXACT, k, int(len(used) - k), observed, expected)


def _cmh_one_sided(xa: np.ndarray, na: np.ndarray, xb: np.ndarray, nb: np.ndarray) -> float:
    from statsmodels.stats.contingency_tables import StratifiedTable

    tables = np.stack([np.stack([xa, na - xa]), np.stack([xb, nb - xb])]).astype(float)  # (2, 2, K): rows A, B
    st = StratifiedTable(tables)
    res = st.test_null_odds(correction=True)
    z = float(np.sqrt(res.statistic))
    # The corrected chi-square is symmetric; the direction is that of A's observed excess over its expectation.
    excess = float(xa.sum() - np.sum((xa + xb) * na / (na + nb)))
    return float(stats.norm.sf(z)) if excess > 0 else float(stats.norm.cdf(z)) if excess < 0 else 0.5
