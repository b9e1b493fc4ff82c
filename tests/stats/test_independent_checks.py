"""The calibration's statistics against independent computations: each figure is computed a second way here.

The stratified infra test against Fisher's exact test and against a brute-force enumeration of every
relabelling of trials within tasks; the TOST p against two one-sided t-tests from scipy; the new-tasks
interval against statsmodels' cluster-robust OLS; the permutation trend test with unequal cells against
the exact permutation distribution, enumerated.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import StratifiedTable

from orchestrator.stats import stratified
from orchestrator.stats.aggregate import FAILED, HARNESS, INFRA, N_OUTCOMES, PASSED
from orchestrator.stats.calibration import score_tests
from orchestrator.stats.clustered import new_tasks_interval
from orchestrator.stats.paired import BOSCHLOO_GATE_HIGH, two_rate_exact
from orchestrator.stats.stratified import fewer_events
from orchestrator.stats.trend import PERMUTATIONS, permutation_p


def test_one_task_is_fishers_exact_test() -> None:
    for xa, na, xb, nb in ((3, 10, 0, 10), (5, 12, 1, 9), (2, 6, 2, 6), (0, 8, 3, 8)):
        want = stats.fisher_exact([[xa, xb], [na - xa, nb - xb]], alternative="greater").pvalue
        assert fewer_events([xa], [na], [xb], [nb]).p == pytest.approx(want)


def brute_force(xa: list[int], na: list[int], xb: list[int], nb: list[int]) -> float:
    """P(events on side A >= observed) over every equally likely relabelling of each task's trials."""
    per_task = []
    for a, n_a, b, n_b in zip(xa, na, xb, nb):
        trials = [1] * (a + b) + [0] * (n_a + n_b - a - b)
        sides = list(itertools.combinations(range(n_a + n_b), n_a))  # every relabelling, equally likely
        spread = Counter(sum(trials[i] for i in side) for side in sides)
        per_task.append([(v, c / len(sides)) for v, c in spread.items()])
    observed = sum(xa)
    return sum(
        float(np.prod([q for _, q in combo]))
        for combo in itertools.product(*per_task)
        if sum(v for v, _ in combo) >= observed
    )


def test_stratified_exact_equals_the_enumerated_relabelling_of_trials_within_tasks() -> None:
    xa, na, xb, nb = [2, 1, 3, 0, 4], [4, 3, 4, 3, 4], [0, 1, 1, 0, 4], [4, 3, 3, 3, 4]
    r = fewer_events(xa, na, xb, nb)
    assert r.p == pytest.approx(brute_force(xa, na, xb, nb))
    # Task 4 (no event on either side) and task 5 (events on every trial) cannot vary: no weight.
    assert (r.strata_used, r.strata_dropped) == (3, 2)


def test_tasks_whose_infra_state_does_not_change_carry_no_weight() -> None:
    """Ten tasks lose their one infra error in twelve trials; six more are OOM-killed on every trial at both
    limits. Each informative task puts its one event on side A with probability 1/2 under the null, so the
    exact p is 0.5 ** 10 -- with or without the six; the pooled test they drown does not reject."""
    xa, na = [1] * 10 + [6] * 6, [6] * 16
    xb, nb = [0] * 10 + [6] * 6, [6] * 16
    r = fewer_events(xa, na, xb, nb)
    assert r.p == pytest.approx(0.5**10) and r.strata_used == 10
    assert fewer_events(xa[:10], na[:10], xb[:10], nb[:10]).p == pytest.approx(r.p)
    pooled = stats.fisher_exact([[46, 36], [50, 60]], alternative="greater").pvalue
    assert pooled > 0.05


def test_above_the_exact_cap_the_one_sided_cmh_of_statsmodels(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    na = nb = np.full(40, 30)
    xa, xb = rng.binomial(30, 0.3, 40), rng.binomial(30, 0.26, 40)
    exact = fewer_events(xa, na, xb, nb)
    monkeypatch.setattr(stratified, "EXACT_MAX_EVENTS", 0)
    approx = fewer_events(xa, na, xb, nb)
    assert approx.method == stratified.ASYMPTOTIC and exact.method == stratified.EXACT
    table = np.stack([np.stack([xa, na - xa]), np.stack([xb, nb - xb])]).astype(float)
    two_sided = StratifiedTable(table).test_null_odds(correction=True).pvalue
    assert approx.p == pytest.approx(two_sided / 2)  # A's excess is observed: one side of the symmetric test
    assert 1e-4 < exact.p < 0.2 and approx.p == pytest.approx(exact.p, rel=0.1)  # agrees with the exact test here


def counts(rows: list[tuple[int, int, int]]) -> np.ndarray:
    """(T, N_OUTCOMES) from (infra, passed, failed) per task."""
    c = np.zeros((len(rows), N_OUTCOMES), dtype=np.int64)
    for t, (i, p, f) in enumerate(rows):
        c[t, INFRA], c[t, PASSED], c[t, FAILED] = i, p, f
    return c


def test_tost_p_is_two_one_sided_t_tests_and_a_task_finished_only_at_one_side_scores_zero_there() -> None:
    ref = [(2, 4, 4), (2, 5, 3), (2, 3, 5), (2, 6, 2), (2, 4, 4), (2, 5, 3), (10, 0, 0), (10, 0, 0)]
    hi = [(0, 5, 5), (0, 6, 4), (0, 4, 6), (0, 6, 4), (0, 5, 5), (0, 5, 5), (0, 9, 1), (0, 0, 10)]
    sc = score_tests(counts(ref), counts(hi), margin=0.2, alpha=0.05, k=1)
    ra = np.array([4 / 8, 5 / 8, 3 / 8, 6 / 8, 4 / 8, 5 / 8, 0.0, 0.0])  # the two unfinished tasks score 0
    rb = np.array([0.5, 0.6, 0.4, 0.6, 0.5, 0.5, 0.9, 0.0])
    assert (sc["n_tasks"], sc["only_b"], sc["only_a"]) == (8, 2, 0)

    def tost(d: np.ndarray) -> float:
        low = stats.ttest_1samp(d + 0.2, 0.0, alternative="greater").pvalue
        high = stats.ttest_1samp(d - 0.2, 0.0, alternative="less").pvalue
        return float(max(low, high))

    every, finished_both = tost(rb - ra), tost((rb - ra)[:6])
    assert sc["tost_p"] == pytest.approx(max(every, finished_both))
    assert every > finished_both  # the task that finishes only with more memory takes equivalence away
    assert sc["change_p"] == pytest.approx(stats.ttest_1samp(rb - ra, 0.0).pvalue)
    assert sc["diff"] == pytest.approx(np.mean(rb - ra))


def test_new_tasks_interval_is_statsmodels_cluster_robust_ols_with_a_t_quantile() -> None:
    # 12 tasks: the interval is given from MIN_TASKS_NEW_INTERVAL (10) tasks on (below, a note says why not)
    k, n = np.array([3, 0, 5, 2, 4, 1, 6, 2, 7, 0, 3, 5]), np.array([6, 4, 8, 5, 6, 3, 7, 4, 9, 2, 5, 6])
    y = np.concatenate([[1.0] * ki + [0.0] * (ni - ki) for ki, ni in zip(k, n)])
    g = np.repeat(np.arange(len(n)), n)
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": g})
    q = stats.t.ppf(0.975, len(n) - 1)
    got = new_tasks_interval(k, n)
    assert got["se"] == pytest.approx(fit.bse[0])
    assert (got["low"], got["high"]) == pytest.approx((fit.params[0] - q * fit.bse[0], fit.params[0] + q * fit.bse[0]))
    few = new_tasks_interval(k[:7], n[:7])
    assert (few["low"], few["high"]) == (None, None)


def exact_trend_p(events: list[int], n: list[int], score: list[float], groups: list[int]) -> float:
    """Two-sided p of sum(score x events), every relabelling of each task's trials enumerated."""
    ev, nn, sc, gr = (np.asarray(v) for v in (events, n, score, groups))
    per_task = []
    for t in np.unique(gr):
        idx = np.flatnonzero(gr == t)
        labels = np.repeat(idx, nn[idx])  # one entry per trial: its cell
        k = int(ev[idx].sum())
        outcomes: dict[float, int] = {}
        for chosen in itertools.combinations(range(len(labels)), k):
            s = float(sum(sc[labels[i]] for i in chosen))
            outcomes[s] = outcomes.get(s, 0) + 1
        total = sum(outcomes.values())
        mean = sum(s * c for s, c in outcomes.items()) / total
        per_task.append([(s - mean, c / total) for s, c in outcomes.items()])
    # Centre the observed statistic the same way: minus each task's null mean.
    observed = 0.0
    for t in np.unique(gr):
        idx = np.flatnonzero(gr == t)
        k = int(ev[idx].sum())
        cells = np.repeat(idx, nn[idx])
        mean = k * float(np.mean(sc[cells]))
        observed += float(sc[idx] @ ev[idx]) - mean
    p = 0.0
    for combo in itertools.product(*per_task):
        if abs(sum(s for s, _ in combo)) >= abs(observed) - 1e-9:
            p += float(np.prod([q for _, q in combo]))
    return p


def test_the_trend_permutation_with_unequal_cells_matches_the_exact_permutation_distribution() -> None:
    # Three tasks, three configurations, cells of 1 to 5 trials (an interrupted run).
    n = [5, 2, 1, 1, 4, 3, 3, 1, 4]
    events = [0, 1, 1, 1, 2, 3, 0, 1, 3]
    score = [0.0, 1.0, 2.0] * 3
    groups = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    want = exact_trend_p(events, n, score, groups)
    got = permutation_p(np.array(events, float), np.array(score), np.array(groups), np.array(n, float))
    # A Monte Carlo p from 1,999 draws with a fixed seed: within 4 of its standard errors of the exact value.
    assert abs(got - want) <= 4 * np.sqrt(want * (1 - want) / PERMUTATIONS) + 1 / PERMUTATIONS
    assert 0.001 < want < 0.5  # a case with a trend worth testing, not a trivial one


def test_boschloo_runs_only_where_it_can_change_the_decision() -> None:
    """Fisher first; Boschloo (never above Fisher's p) only between the first Holm level and 0.2."""
    window = (0.05 / 12, BOSCHLOO_GATE_HIGH)
    clear = two_rate_exact(30, 100, 5, 100, boschloo_between=window)  # Fisher p ~ 1e-6: significant either way
    assert clear.method.startswith("fisher_exact") and clear.p == pytest.approx(
        stats.fisher_exact([[30, 5], [70, 95]]).pvalue
    )
    far = two_rate_exact(10, 40, 9, 40, boschloo_between=window)
    assert far.method.startswith("fisher_exact") and far.p > BOSCHLOO_GATE_HIGH
    # The table where Boschloo's p is furthest below Fisher's among those it pulls under 0.05: it runs there.
    near = two_rate_exact(11, 15, 15, 15, boschloo_between=window)
    want = stats.boschloo_exact([[11, 15], [4, 0]], alternative="two-sided").pvalue
    assert near.method == "boschloo_exact" and near.p == pytest.approx(want) and want < 0.05
    assert two_rate_exact(11, 15, 15, 15).p == pytest.approx(want)  # the same as without a window


def test_a_task_with_no_trial_on_one_side_is_left_out_not_scored_zero() -> None:
    """Only the infrastructure's kills score a side 0: a task an interrupted run never ran at the reference, or
    that ended there in harness errors only, says nothing about the limit."""
    ref = counts([(2, 4, 4), (2, 5, 3), (2, 3, 5), (0, 0, 0), (0, 0, 0)])
    ref[4, HARNESS] = 10  # task 5: harness errors only
    hi = counts([(0, 5, 5), (0, 6, 4), (0, 4, 6), (0, 9, 1), (0, 9, 1)])
    sc = score_tests(ref, hi, margin=0.2, alpha=0.05, k=1)
    assert (sc["n_tasks"], sc["only_b"]) == (3, 0)
    d = np.array([0.5 - 0.5, 0.6 - 5 / 8, 0.4 - 3 / 8])
    assert sc["diff"] == pytest.approx(d.mean())
