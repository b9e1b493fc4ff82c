"""Monotone trend of a rate across ordered resource configurations.

Configurations are scored by their rank in the canonical order (limit
multiplier with unbounded last, then request multiplier): 0, 1, 2, ...
Ranks, not raw multipliers, because "unbounded" has no number and the study's
question is ordinal ("does more headroom move the rate?").

Two tests are reported:

* **Cochran-Armitage** (plain): statsmodels ``Table(...).test_ordinal_association``
  with row scores = rank and column scores = (0, 1). statsmodels computes the
  linear-by-linear association statistic, which equals the classical
  Cochran-Armitage z multiplied by sqrt((N-1)/N); we report statsmodels' z and p
  and also the classical z (= z * sqrt(N/(N-1))) for comparison with sources
  that print it, with its p (``p_classic``, two-sided normal). Reports print the
  classical pair and name it; ``variant`` says which is which. ``Table`` is built with ``shift_zeros=False`` so a config with
  zero infra errors is not given 0.5 phantom errors. It treats every trial as
  independent, which is wrong when some tasks are far more error-prone (or
  harder) than others.
* **Clustered** (PRIMARY): a binomial GLM (logistic) of the rate on the rank
  with cluster-robust (sandwich) standard errors grouped by task -- i.e. a GEE
  with independence working correlation and robust SE, valid under any
  within-task correlation. It is fitted on per-task x config binomial counts
  (endog = k/n, var_weights = n): the likelihood score of an aggregated cell
  equals the sum of its trials' scores, so estimates and sandwich are those of
  the per-trial logistic model (up to the negligible (N-1)/(N-K) small-sample
  factor, which uses the number of cells), at a cost independent of the number
  of attempts. It is primary because the trials are clustered by task.
  Its sandwich z is anti-conservative with few tasks (13.7% size for infra,
  7.5% for pass at 10 tasks x 3 attempts), so its **p is a permutation p**:
  under "no trend" the trials of one task are exchangeable across its configurations, so
  the trials' ranks are permuted within each task (``PERMUTATIONS`` draws, fixed
  seed) and the stratified linear-by-linear statistic sum(rank x events), centred
  within each task, is compared with its permutation distribution (two-sided,
  (1 + hits) / (1 + draws)). The
  sandwich p stays in ``p_sandwich``; the slope and odds ratio are the GLM's.
  Trials, not cells, are permuted (the task's events spread over its cells as a
  multivariate hypergeometric draw with the cells' sizes), so cells holding
  different numbers of trials -- an interrupted or imported run -- keep the
  test exact under the null; permuting whole cells would not (a cell of 10
  trials and one of 2 are not exchangeable). With equal cells whole cells are
  exchangeable and their permutation (cheaper) is used, as before.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.contingency_tables import Table


@dataclass(frozen=True)
class TrendCA:
    z: float | None  # statsmodels linear-by-linear z (= CA z * sqrt((N-1)/N))
    z_classic: float | None  # classical Cochran-Armitage z
    p: float | None  # of z (linear-by-linear)
    direction: str | None  # "increasing" | "decreasing" | "flat"
    note: str | None = None
    p_classic: float | None = None  # of z_classic, two-sided
    variant: str = (
        "classical Cochran-Armitage (z_classic, p_classic; variance with N); "
        "z, p: statsmodels linear-by-linear association (variance with N - 1)"
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrendClustered:
    slope_log_odds_per_step: float | None
    se: float | None
    z: float | None
    p: float | None
    odds_ratio_per_step: float | None
    direction: str | None
    n_clusters: int
    note: str | None = None
    p_sandwich: float | None = None
    method: str = "GLM slope with task-clustered SE; p by permutation of ranks within tasks"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _direction(z: float) -> str:
    return "increasing" if z > 0 else "decreasing" if z < 0 else "flat"


def cochran_armitage(events: np.ndarray, n: np.ndarray, scores: np.ndarray | None = None) -> TrendCA:
    """Cochran-Armitage trend test over ordered groups (events of n per group)."""
    k = np.asarray(events, float)
    n = np.asarray(n, float)
    sc = np.arange(len(n), dtype=float) if scores is None else np.asarray(scores, float)
    m = n > 0
    k, n, sc = k[m], n[m], sc[m]
    big_n = n.sum()
    if len(n) < 2 or k.sum() == 0 or k.sum() == big_n:
        return TrendCA(None, None, None, None, "not testable (fewer than 2 groups or no variation)")
    tab = Table(np.column_stack([n - k, k]), shift_zeros=False)
    res = tab.test_ordinal_association(row_scores=sc, col_scores=np.array([0.0, 1.0]))
    z = float(res.zscore)
    z_classic = z * float(np.sqrt(big_n / (big_n - 1)))
    p_classic = float(2 * stats.norm.sf(abs(z_classic)))
    return TrendCA(z, z_classic, float(res.pvalue), _direction(z), None, p_classic)


def clustered_trend(events: np.ndarray, n: np.ndarray, score: np.ndarray, groups: np.ndarray) -> TrendClustered:
    """Cluster-robust logistic trend from per (task, config) cell counts.

    ``events``, ``n``, ``score`` (config rank) and ``groups`` (task code) are
    aligned 1-D arrays, one entry per cell. Empty cells are dropped.
    """
    k = np.asarray(events, float)
    n = np.asarray(n, float)
    x = np.asarray(score, float)
    g = np.asarray(groups)
    m = n > 0
    k, n, x, g = k[m], n[m], x[m], g[m]
    n_cl = int(len(np.unique(g)))
    if len(np.unique(x)) < 2 or k.sum() == 0 or k.sum() == n.sum():
        return TrendClustered(None, None, None, None, None, None, n_cl, "not testable (no variation)")
    if n_cl < 2:
        return TrendClustered(None, None, None, None, None, None, n_cl, "not testable (fewer than 2 tasks)")
    # The GLM's own modules, not statsmodels.api: that one also loads the formula, graphics and time-series
    # packages (about a second on an idle machine), which no report uses.
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    from statsmodels.tools.tools import add_constant

    exog = add_constant(x, has_constant="add")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = GLM(k / n, exog, family=Binomial(), var_weights=n).fit(cov_type="cluster", cov_kwds={"groups": g})
        b, se = float(fit.params[1]), float(fit.bse[1])
    except Exception as exc:  # separation / singular design: say so instead of crashing
        return TrendClustered(None, None, None, None, None, None, n_cl, f"fit failed: {type(exc).__name__}")
    if not (np.isfinite(b) and np.isfinite(se)) or se == 0 or abs(b) > 25:
        return TrendClustered(None, None, None, None, None, None, n_cl, "not estimable (separation)")
    z = b / se
    p = permutation_p(k, x, g, n)
    return TrendClustered(b, se, float(z), p, float(np.exp(b)), _direction(z), n_cl, None, float(fit.pvalues[1]))


PERMUTATIONS = 1999


def permutation_p(
    events: np.ndarray, score: np.ndarray, groups: np.ndarray, n: np.ndarray, draws: int = PERMUTATIONS
) -> float:
    """Two-sided permutation p of sum(score x events), the trials' scores permuted within each group.

    Under "no trend" a task's trials are exchangeable across its configurations, whatever the number of
    trials each cell holds (interrupted and imported runs leave them unequal). Permuting the trials' labels
    within a task spreads its events over its cells as a multivariate hypergeometric draw with the cells'
    sizes (drawn cell after cell with numpy's ``hypergeometric``); the statistic is centred by its null mean
    within each task. Where every task's cells hold the same number of trials, whole cells are exchangeable
    too, and permuting the cells' scores (a subgroup of the trials' permutations, 4-5x cheaper) is used.
    """
    if _equal_cells(n, groups):
        return _cell_permutation_p(events, score, groups, draws)
    rng = np.random.default_rng(0)
    codes, g = np.unique(groups, return_inverse=True)
    m = np.asarray(n, dtype=np.int64)
    t_n = len(codes)
    size = np.bincount(g, weights=m, minlength=t_n)
    centre = score - np.bincount(g, weights=score * m, minlength=t_n)[g] / size[g]  # E[stat] = 0 under the null
    observed = float(centre @ events)
    total = np.rint(np.bincount(g, weights=events, minlength=t_n)).astype(np.int64)
    # Informative tasks only (events on some trials, not all): the others' statistic is constant.
    live = (total > 0) & (total < size)
    keep = live[g] & (m > 0)
    gi, mi, ci = np.unique(g[keep], return_inverse=True)[1], m[keep], centre[keep]
    null = np.zeros(draws)
    if len(gi):
        # A (task, position) grid: position = the cell's rank among its task's cells.
        order = np.argsort(gi, kind="stable")
        gi, mi, ci = gi[order], mi[order], ci[order]
        first = np.searchsorted(gi, np.arange(gi.max() + 1))
        pos = np.arange(len(gi)) - first[gi]
        grid_m = np.zeros((gi.max() + 1, pos.max() + 1), dtype=np.int64)
        grid_c = np.zeros(grid_m.shape)
        grid_m[gi, pos], grid_c[gi, pos] = mi, ci
        left_n = grid_m.sum(axis=1)
        left_k = np.broadcast_to(total[live], (draws, len(left_n))).copy()
        # One position after another, vectorised over the tasks: the events a cell draws from what its task
        # has left are hypergeometric, so together they are the task's multivariate hypergeometric spread.
        for j in range(grid_m.shape[1]):
            mj = grid_m[:, j]
            rest = left_n - mj
            x = rng.hypergeometric(mj, rest, left_k) if j < grid_m.shape[1] - 1 else left_k
            null += x @ grid_c[:, j]
            left_k = left_k - x
            left_n = rest
    hits = int(np.sum(np.abs(null) >= abs(observed) - 1e-9 * max(1.0, abs(observed))))
    return (1 + hits) / (1 + draws)


def _equal_cells(n: np.ndarray, groups: np.ndarray) -> bool:
    """Every task's non-empty cells hold the same number of trials."""
    m = np.asarray(n, float)
    live = m > 0
    _, g = np.unique(np.asarray(groups)[live], return_inverse=True)
    m = m[live]
    if not len(m):
        return True
    lo = np.full(g.max() + 1, np.inf)
    hi = np.zeros(g.max() + 1)
    np.minimum.at(lo, g, m)
    np.maximum.at(hi, g, m)
    return bool(np.all(lo == hi))


def _cell_permutation_p(events: np.ndarray, score: np.ndarray, groups: np.ndarray, draws: int) -> float:
    """The permutation p with equal cells: the cells' scores permuted within each task."""
    rng = np.random.default_rng(0)
    order = np.argsort(groups, kind="stable")
    k, x, g = events[order], score[order], groups[order]
    _, starts, sizes = np.unique(g, return_index=True, return_counts=True)
    centred = np.empty_like(x)
    perms = np.empty((draws, len(x)))
    for s0, m in zip(starts, sizes):
        seg = x[s0 : s0 + m]
        centred[s0 : s0 + m] = seg - seg.mean()
        perms[:, s0 : s0 + m] = rng.permuted(np.broadcast_to(seg - seg.mean(), (draws, m)), axis=1)
    observed = abs(float(centred @ k))
    hits = int(np.sum(np.abs(perms @ k) >= observed - 1e-9 * max(1.0, observed)))
    return (1 + hits) / (1 + draws)
