"""Standard error of a pass rate when attempts are clustered by task.

WHY: repeated attempts of one task are not independent draws -- an easy task
passes almost every time, a hard one almost never. Treating all N trials as
i.i.d. Bernoulli understates the uncertainty of the pass rate whenever tasks are
heterogeneous. The honest standard error treats the *task* as the sampling unit.

Method: this is the cluster-robust (CR1) standard error of the intercept in an
OLS regression of the 0/1 outcome on a constant, exactly what
``statsmodels.OLS(y, 1).fit(cov_type="cluster", groups=task)`` reports. For a
constant-only model it has a closed form that only needs per-task counts, so we
never materialise a million-row design matrix:

    p = K / N,  S_g = k_g - n_g * p                 (cluster score sums)
    Var = G / (G - 1) * (N - 1) / (N - 1) * sum_g S_g^2 / N^2

(statsmodels' small-sample factor is G/(G-1) * (N-1)/(N-k) with k = 1 parameter,
so the second factor is 1). A test checks equality with statsmodels.

The i.i.d. contrast is the binomial sqrt(p (1 - p) / N). The ratio of variances
is the empirical design effect; the one-way ANOVA intra-task correlation is also
reported because the power calculation needs it to extrapolate to other numbers
of attempts per task.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ClusteredSE:
    estimate: float | None
    se_iid: float | None
    se_clustered: float | None
    design_effect: float | None  # (se_clustered / se_iid) ** 2
    icc: float | None  # one-way ANOVA intra-task correlation, clipped at 0
    n: int
    n_clusters: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def icc_anova(k: np.ndarray, n: np.ndarray) -> float | None:
    """One-way ANOVA estimator of the intra-cluster correlation of a 0/1 outcome.

    Uses per-cluster successes ``k`` and sizes ``n``; clusters with n == 0 are
    ignored. Negative estimates (less between-task variation than chance) are
    clipped to 0, the usual convention for a design effect.
    """
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    m = n > 0
    k, n = k[m], n[m]
    g = len(n)
    big_n = n.sum()
    if g < 2 or big_n <= g:
        return None
    p = k.sum() / big_n
    ssb = np.sum((k - n * p) ** 2 / n)
    ssw = np.sum(k - k**2 / n)  # sum over clusters of n_g p_g (1 - p_g)
    msb = ssb / (g - 1)
    msw = ssw / (big_n - g)
    n0 = (big_n - np.sum(n**2) / big_n) / (g - 1)
    denom = msb + (n0 - 1) * msw
    if denom <= 0:
        return None
    return float(max(0.0, (msb - msw) / denom))


def clustered_se(k: np.ndarray, n: np.ndarray) -> ClusteredSE:
    """Pass-rate SE clustered by task, from per-task successes k and attempts n."""
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    m = n > 0
    k, n = k[m], n[m]
    big_n = float(n.sum())
    g = int(len(n))
    if big_n == 0:
        return ClusteredSE(None, None, None, None, None, 0, 0)
    p = k.sum() / big_n
    se_iid = float(np.sqrt(p * (1 - p) / big_n))
    if g < 2:
        se_cl = None
    else:
        s = k - n * p
        se_cl = float(np.sqrt(g / (g - 1) * np.sum(s**2)) / big_n)
    deff = None
    if se_cl is not None and se_iid > 0:
        deff = float((se_cl / se_iid) ** 2)
    return ClusteredSE(float(p), se_iid, se_cl, deff, icc_anova(k, n), int(big_n), g)


#: What each headline interval is an interval *for*; every report format prints these words beside it.
THESE_TASKS = "these tasks: the rate over more attempts on the same tasks (trials independent given the tasks)"
NEW_TASKS = "new tasks: the rate on a new sample of tasks from the same population (tasks are the sampling unit)"


#: Fewest tasks a new-tasks interval is computed from. WHY 10: it is where the t(G - 1) interval is measured
#: to reach its 95% (benchmarks/bench_calibration.py); below it the between-task spread is barely estimated,
#: and a handful of tasks that happen to agree give a zero-width interval ([100.0, 100.0] from two tasks).
MIN_TASKS_NEW_INTERVAL = 10


def too_few_tasks_note(n_tasks: int) -> str:
    return (
        f"{n_tasks} task{'s' if n_tasks != 1 else ''}, fewer than the {MIN_TASKS_NEW_INTERVAL} a t interval over "
        "tasks needs to hold its 95% (a few tasks that agree give a zero-width interval)"
    )


def new_tasks_interval(k: np.ndarray, n: np.ndarray, level: float = 0.95) -> dict[str, Any]:
    """The pooled pass rate with a task-clustered, small-sample corrected interval.

    CR1 clustered SE (see :func:`clustered_se`) with a t quantile on G - 1 degrees of freedom
    instead of the normal one: with 10 tasks the normal quantile gives an interval that covers
    ~88%, t(G - 1) restores ~95% (benchmarks/bench_calibration.py measures it). Cut to [0, 1].
    From fewer than :data:`MIN_TASKS_NEW_INTERVAL` tasks there is no interval, and ``note`` says why.
    """
    se = clustered_se(k, n)
    out: dict[str, Any] = {
        "estimate": se.estimate,
        "low": None,
        "high": None,
        "se": se.se_clustered,
        "df": None,
        "level": level,
        "n_tasks": se.n_clusters,
        "method": "task-clustered (CR1) SE, t quantile with tasks - 1 df",
        "generalises_to": NEW_TASKS,
    }
    if se.estimate is not None and se.n_clusters < MIN_TASKS_NEW_INTERVAL:
        return {**out, "min_tasks": MIN_TASKS_NEW_INTERVAL, "note": too_few_tasks_note(se.n_clusters)}
    if se.estimate is None or se.se_clustered is None:
        return out
    from scipy import stats

    df = se.n_clusters - 1
    q = float(stats.t.ppf(0.5 + level / 2, df))
    out.update(low=max(0.0, se.estimate - q * se.se_clustered), high=min(1.0, se.estimate + q * se.se_clustered), df=df)
    return out
