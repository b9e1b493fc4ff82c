"""Paired comparisons by task between two configurations (or two runs).

WHY paired: both sides ran the *same* tasks, so most of the variation in pass
rate (easy vs hard tasks) is shared and cancels in a within-task comparison.
Unpaired tests on the two pooled rates waste that and are badly miscalibrated
when tasks differ a lot.

Definitions (a task may have several attempts per side):

* per-task pass rate r = passes / attempts on that side.
* a task is **solved** on a side when a strict majority of its attempts pass
  (r > 1/2). With one attempt per task this is just "passed". A 50/50 task is
  *not* solved (the conservative reading of "solves it").
* **discordant** tasks are solved on exactly one side: ``a_only`` (only A) and
  ``b_only`` (only B). The exact two-sided sign test is binomtest(a_only,
  a_only + b_only, 0.5). Fewer than 6 discordant tasks can never give p < 0.05.
* the **mean per-task difference** mean_t(r_B - r_A) uses every attempt and is
  reported with a t interval over tasks (tasks are the sampling unit; cut to
  [-1, 1], the only values a difference of rates can take -- with 2 tasks the
  t quantile is 12.7 and the raw interval reaches far past +-1), the
  **paired t-test** over tasks (scipy ttest_1samp of the per-task differences
  against 0) and a **bootstrap** percentile interval that resamples tasks
  (scipy.stats.bootstrap, 2,000 resamples, fixed seed). This is the test for a
  claim about the benchmark's *population* of tasks ("would B beat A on new
  tasks like these?"): tasks are the sampling unit. CMH below conditions on
  these tasks and answers a narrower question ("on these tasks, do B's
  attempts pass more often?"); it is far more powerful and does not generalise.
* the **CMH test** (Cochran-Mantel-Haenszel via statsmodels StratifiedTable)
  stratifies by task and uses every attempt: each task is a 2x2 table
  [[pass_B, fail_B], [pass_A, fail_A]]. It is the *primary* paired test for
  pass rates because it keeps all attempts (the sign test throws away
  everything but the majority verdict). Tasks whose table has zero variance
  under the null (all attempts pass, or all fail, on both sides, or a side
  with no attempts) carry no information and are dropped, and counted; if no
  informative task is left the test is not run (p = 1.0, statistic None).
* **infra-error rates** compare trials, not tasks, with an exact unconditional
  test (scipy boschloo_exact; scipy treats COLUMNS as the two groups, so the
  table is [[x_A, x_B], [n_A - x_A, n_B - x_B]]). Boschloo's cost grows with
  (n_A + 1)(n_B + 1); above ``boschloo_max_cells`` we fall back to Fisher's exact
  test (also exact and valid, slightly conservative; at those sample sizes the
  two agree closely) and say so in ``method``. Note this test treats trials as
  independent; the clustered trend test is the cross-check for task clustering.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.contingency_tables import StratifiedTable

# Boschloo's cost grows with (n_A + 1)(n_B + 1). Measured on this project's 2-core machine:
# 40k cells 0.7 s, 90k 2.3 s, 160k 4.7 s per test. Up to 100k cells a test takes seconds at most.
BOSCHLOO_MAX_CELLS = 100_000
BOOTSTRAP_RESAMPLES = 2_000


def _f(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if np.isfinite(x) else None


@dataclass(frozen=True)
class SignTest:
    a_only: int
    b_only: int
    n_discordant: int
    p: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sign_test(a_only: int, b_only: int) -> SignTest:
    """Exact two-sided sign test on discordant pairs; p = 1 with none."""
    d = int(a_only) + int(b_only)
    p = 1.0 if d == 0 else float(stats.binomtest(int(a_only), d, 0.5).pvalue)
    return SignTest(int(a_only), int(b_only), d, p)


def expanded_level(n: int, level: float = 0.95) -> float:
    """Hesterberg's expanded percentile level: the plain percentile interval of a mean over n tasks is too
    narrow by about sqrt((n - 1) / n) and a normal-for-t quantile (it covered 91-92% at 10 tasks); percentiles
    taken at 2 Phi(sqrt(n / (n - 1)) t_{n-1}) - 1 instead make its width match the t interval's."""
    if n < 2:
        return level
    q = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(np.sqrt(n / (n - 1)))
    return float(min(0.9999, 2 * stats.norm.cdf(q) - 1))


@dataclass(frozen=True)
class TaskPaired:
    n_tasks: int  # tasks with attempts on both sides
    solved_a: int
    solved_b: int
    sign: SignTest
    mean_task_diff: float | None  # mean over tasks of r_B - r_A
    mean_task_diff_se: float | None
    mean_task_diff_low: float | None  # 95% t interval, intersected with [-1, 1]
    mean_task_diff_high: float | None
    t_statistic: float | None = None  # paired t-test over tasks (H0: mean per-task difference = 0)
    t_p: float | None = None
    bootstrap_low: float | None = None  # 95% percentile interval, tasks resampled
    bootstrap_high: float | None = None
    method: str = (
        "paired t-test over tasks (scipy ttest_1samp); expanded bootstrap percentile interval over tasks "
        "(Hesterberg's small-sample expansion)"
    )
    mean_task_diff_clipped: bool = False  # the t interval reached past +-1 and was cut to the possible range

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def task_paired(passed_a: np.ndarray, n_a: np.ndarray, passed_b: np.ndarray, n_b: np.ndarray) -> TaskPaired:
    """Majority-solved sign test and mean per-task difference (B - A).

    Arrays are aligned by task; tasks without attempts on both sides are skipped.
    """
    pa, na, pb, nb = (np.asarray(x, float) for x in (passed_a, n_a, passed_b, n_b))
    m = (na > 0) & (nb > 0)
    pa, na, pb, nb = pa[m], na[m], pb[m], nb[m]
    ra, rb = pa / na, pb / nb
    sa, sb = ra > 0.5, rb > 0.5
    sign = sign_test(int(np.sum(sa & ~sb)), int(np.sum(sb & ~sa)))
    t = int(m.sum())
    mean = se = lo = hi = t_stat = t_p = b_lo = b_hi = None
    clipped = False
    if t >= 1:
        d = rb - ra
        mean = float(d.mean())
        if t >= 2:
            se = float(d.std(ddof=1) / np.sqrt(t))
            q = float(stats.t.ppf(0.975, t - 1))
            lo, hi = mean - q * se, mean + q * se
            # A difference of two rates lies in [-1, 1]; with few tasks the t quantile (12.7 at 2 tasks)
            # throws the interval far past that. Intersecting it with [-1, 1] drops only impossible
            # values, so coverage is unchanged: whenever the t interval holds the true mean, so does
            # the clipped one. ``mean_task_diff_clipped`` says when this happened.
            clipped = lo < -1.0 or hi > 1.0
            lo, hi = max(lo, -1.0), min(hi, 1.0)
            if se > 0:
                res = stats.ttest_1samp(d, 0.0)
                t_stat, t_p = float(res.statistic), float(res.pvalue)
                boot = stats.bootstrap(
                    (d,),
                    np.mean,
                    n_resamples=BOOTSTRAP_RESAMPLES,
                    confidence_level=expanded_level(t),
                    method="percentile",
                    random_state=np.random.default_rng(0),
                )
                b_lo, b_hi = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
            else:  # every task moved by the same amount: no spread to test against
                t_p = 1.0 if mean == 0 else None
                b_lo = b_hi = mean
    return TaskPaired(
        t, int(sa.sum()), int(sb.sum()), sign, mean, se, lo, hi, t_stat, t_p, b_lo, b_hi, mean_task_diff_clipped=clipped
    )


@dataclass(frozen=True)
class CMHResult:
    statistic: float | None
    p: float
    odds_ratio_mh: float | None  # pooled Mantel-Haenszel odds of passing, B vs A
    strata_used: int
    strata_dropped: int  # zero-variance strata (no information)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cmh_test(passed_a: np.ndarray, n_a: np.ndarray, passed_b: np.ndarray, n_b: np.ndarray) -> CMHResult:
    """Cochran-Mantel-Haenszel test of equal pass odds, stratified by task."""
    pa, na, pb, nb = (np.asarray(x, float) for x in (passed_a, n_a, passed_b, n_b))
    fa, fb = na - pa, nb - pb
    tot = na + nb
    col_pass = pa + pb
    col_fail = fa + fb
    informative = (na > 0) & (nb > 0) & (col_pass > 0) & (col_fail > 0) & (tot > 1)
    used = int(informative.sum())
    dropped = int(len(na) - used)
    if used == 0:
        return CMHResult(None, 1.0, None, 0, dropped)
    tables = np.stack(
        [np.stack([pb[informative], fb[informative]]), np.stack([pa[informative], fa[informative]])]
    )  # shape (2, 2, K)
    st = StratifiedTable(tables)
    res = st.test_null_odds(correction=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        orr = st.oddsratio_pooled
    return CMHResult(_f(res.statistic), float(res.pvalue), _f(orr), used, dropped)


@dataclass(frozen=True)
class TwoRateTest:
    x_a: int
    n_a: int
    x_b: int
    n_b: int
    rate_a: float | None
    rate_b: float | None
    diff: float | None  # rate_b - rate_a
    method: str
    p: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Above this Fisher p Boschloo's is not computed when a caller gives a decision window: over every table of up to
#: 30 trials a side, the largest Fisher p whose Boschloo p was below 0.05 was 0.0996 ([[11, 15], [4, 0]]: 0.043);
#: Boschloo is uniformly the more powerful, so its p is never above Fisher's.
BOSCHLOO_GATE_HIGH = 0.2


def two_rate_exact(
    x_a: int,
    n_a: int,
    x_b: int,
    n_b: int,
    boschloo_max_cells: int = BOSCHLOO_MAX_CELLS,
    boschloo_between: tuple[float, float] | None = None,
) -> TwoRateTest:
    """Exact unconditional (Boschloo) two-sided test of equal rates, Fisher above a size cap.

    ``boschloo_between`` (low, high): Boschloo only where it can change a decision. Fisher runs first (cheap);
    below ``low`` (the family's first Holm level, alpha / tests) the difference is significant whatever
    Boschloo says, since Boschloo's p is never above Fisher's; above ``high`` Boschloo does not reach alpha
    (see ``BOSCHLOO_GATE_HIGH``). Between them Boschloo runs. ``method`` names the test whose p is reported.
    """
    x_a, n_a, x_b, n_b = int(x_a), int(n_a), int(x_b), int(n_b)
    ra = x_a / n_a if n_a else None
    rb = x_b / n_b if n_b else None
    diff = (rb - ra) if (ra is not None and rb is not None) else None
    if n_a == 0 or n_b == 0:
        return TwoRateTest(x_a, n_a, x_b, n_b, ra, rb, diff, "none (empty group)", 1.0)
    if x_a + x_b == 0 or x_a + x_b == n_a + n_b:
        return TwoRateTest(x_a, n_a, x_b, n_b, ra, rb, diff, "none (no variation)", 1.0)
    table = [[x_a, x_b], [n_a - x_a, n_b - x_b]]  # COLUMNS are the groups
    if boschloo_between is not None and (n_a + 1) * (n_b + 1) <= boschloo_max_cells:
        p = min(1.0, float(stats.fisher_exact(table, alternative="two-sided").pvalue))
        low, high = boschloo_between
        if p < low or p > high:
            where = "below the first Holm level" if p < low else f"above {high:g}"
            return TwoRateTest(
                x_a, n_a, x_b, n_b, ra, rb, diff, f"fisher_exact (Boschloo cannot change the decision: p {where})", p
            )
    if (n_a + 1) * (n_b + 1) <= boschloo_max_cells:
        p = float(stats.boschloo_exact(table, alternative="two-sided").pvalue)
        method = "boschloo_exact"
    else:
        p = float(stats.fisher_exact(table, alternative="two-sided").pvalue)
        method = "fisher_exact (Boschloo too costly at this n)"
    return TwoRateTest(x_a, n_a, x_b, n_b, ra, rb, diff, method, min(1.0, p))
