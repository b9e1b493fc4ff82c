"""Drift over a run: a drifting run is flagged; a stationary one at no more than about the nominal rate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from orchestrator.stats.drift import ALPHA, drift_check


def simulated_run(
    seed: int, pass_drift: float = 0.0, tasks: int = 8, configs: int = 3, attempts: int = 6
) -> pd.DataFrame:
    """A plan-ordered run like the engine's: attempt rounds, shuffled tasks, interleaved configurations.

    As in a real sweep, one (task, attempt) draws one seed for every configuration: a memory spike
    OOM-kills it under the two tight configurations at once, and its difficulty is shared. That
    correlation is what the test must not mistake for drift. ``pass_drift`` moves the log-odds of
    passing by that much from the first trial to the last.
    """
    rng = np.random.default_rng(seed)
    easy = rng.normal(0.8, 1.5, size=tasks)
    cfg = rng.normal(0.0, 0.5, size=configs)
    n = tasks * configs * attempts
    rows = []
    for a in range(attempts):
        for t in rng.permutation(tasks):
            spike, hard = rng.random() < 0.25, rng.normal(0.0, 1.5)
            for c in rng.permutation(configs):
                when = len(rows) / n - 0.5
                p_infra = 0.7 if (spike and c < 2) else 0.02
                p_pass = 1 / (1 + np.exp(-(easy[t] + cfg[c] + hard + pass_drift * when)))
                outcome = "infra_error" if rng.random() < p_infra else ("passed" if rng.random() < p_pass else "failed")
                rows.append(
                    {
                        "task_id": f"t{t}",
                        "config_label": f"c{c}",
                        "attempt": a,
                        "outcome": outcome,
                        "started_at": pd.Timestamp("2026-11-30T09:00:00Z") + pd.Timedelta(seconds=30 * len(rows)),
                    }
                )
    return pd.DataFrame(rows).assign(started_at=lambda d: d["started_at"].map(lambda x: x.isoformat()))


@pytest.mark.slow
def test_drift_check_is_calibrated_over_many_seeds() -> None:
    stationary = [drift_check(simulated_run(seed))["flagged"] for seed in range(150)]
    k = int(np.sum(stationary))
    # At most about the nominal rate: the flag rate is not significantly above alpha.
    assert binomtest(k, len(stationary), ALPHA, alternative="greater").pvalue > 0.05, k
    drifting = [drift_check(simulated_run(seed, pass_drift=-6.0))["flagged"] for seed in range(1000, 1030)]
    assert np.mean(drifting) >= 0.7, np.mean(drifting)


def test_a_strong_drift_is_flagged_with_its_direction_and_time_blocks() -> None:
    got = drift_check(simulated_run(7, pass_drift=-8.0))
    assert got["flagged"] and got["pass"]["drift"] and got["pass"]["direction"] == "decreasing"
    assert len(got["blocks"]) == got["n_blocks"] and got["blocks"][0]["first_start_utc"].startswith("2026-11-30T09:00")
    assert got["blocks"][0]["pass_rate"] > got["blocks"][-1]["pass_rate"]


def test_too_few_trials_is_not_testable() -> None:
    got = drift_check(simulated_run(1).head(20))
    assert not got["flagged"] and "not testable" in got["note"]


@pytest.mark.parametrize("seed,pass_drift", [(3, 0.0), (11, -4.0)])
def test_the_score_test_is_statsmodels_gee_score_test(seed: int, pass_drift: float) -> None:
    """The O(rows) statistic is the generalized score test of the stratum-dummy GEE, computed by statsmodels."""
    import statsmodels.api as sm

    df = simulated_run(seed, pass_drift=pass_drift)
    got = drift_check(df)
    when = pd.to_datetime(df["started_at"], format="ISO8601").rank(method="first").to_numpy() - 1
    frame = df.assign(
        b=np.floor(when * got["n_blocks"] / len(df)),
        y=(df["outcome"] == "passed").astype(float),
        s=df["config_label"] + "/" + df["task_id"],
        u=df["task_id"] + "/" + df["attempt"].astype(str),
    )
    frame = frame[frame.groupby("s")["y"].transform("nunique") > 1].reset_index(drop=True)
    dummies = pd.get_dummies(frame["s"], dtype=float).to_numpy()
    groups = pd.factorize(frame["u"])[0]
    family, independence = sm.families.Binomial(), sm.cov_struct.Independence()
    null = sm.GEE(frame["y"].to_numpy(), dummies, groups=groups, family=family, cov_struct=independence).fit()
    full = sm.GEE(
        frame["y"].to_numpy(),
        np.column_stack([frame["b"].to_numpy(), dummies]),
        groups=groups,
        family=family,
        cov_struct=independence,
    )
    reference = full.compare_score_test(null)
    clusters = frame["u"].nunique()
    # statsmodels' robust variance has no G/(G-1) factor; ours does.
    assert got["pass"]["z"] ** 2 * clusters / (clusters - 1) == pytest.approx(reference["statistic"], rel=1e-6)
