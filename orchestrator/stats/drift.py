"""Drift over the course of a run: do the pass rate or the infra-error rate move with time?

WHY: a sweep runs for hours; API latency, node load and the time of day change
underneath it. The plan interleaves configurations in time (every block of
the plan holds each configuration once), so a drift lands on all of them alike
and does not masquerade as a configuration effect -- but it widens every
interval and can mean the run measured two different worlds. This makes it
visible.

Method: trials are put in time order (their recorded start) and cut into
``n_blocks`` blocks of equal size; the block index 0..B-1 is the time score.
For each rate (pass: passed vs anything else; infra: infra_error vs anything
else) a logistic regression of the outcome on the block index is fitted with a
fixed effect per (configuration, task) stratum -- each stratum has its own
baseline, so task difficulty and the configuration's effect cancel and only
change over time within a stratum is measured. Strata whose outcome never
varies carry no information about a slope and are dropped (their effects would
diverge). The trials of one task and attempt share a seed in every
configuration (common random numbers), so they are not independent: the fit is
a GEE (statsmodels, independence working correlation) with the sandwich
clustered on (task, attempt) and the Mancl-DeRouen bias-reduced covariance,
which keeps the Wald test near its nominal level with few clusters. The two
p values are Bonferroni-adjusted together (for "any drift" the same decision
as Holm), and the run is flagged when either adjusted p is below ``alpha``, so
a stationary run is flagged at about ``alpha`` or less.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
import statsmodels.api as sm

from statsmodels.stats.multitest import multipletests

ALPHA = 0.05
N_BLOCKS = 4
MIN_TRIALS = 40


def bonferroni(pvalues: list[float | None]) -> list[float | None]:
    """Bonferroni over the tests that ran. For "is any rate drifting?" this is Holm's decision exactly
    (Holm's first step is Bonferroni on the smallest p), without statsmodels' Holm path, which runs
    a full garbage collection per call -- too slow for the many-seed calibration test."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if idx:
        adj = multipletests([pvalues[i] for i in idx], method="bonferroni")[1]
        for i, a in zip(idx, adj):
            out[i] = float(a)
    return out


def _trend(y: np.ndarray, block: np.ndarray, strata: np.ndarray, units: np.ndarray) -> dict[str, Any]:
    frame = pd.DataFrame({"y": y, "b": block, "s": strata, "u": units})
    frame = frame[frame.groupby("s")["y"].transform("nunique").to_numpy() > 1]
    n_strata = int(frame["s"].nunique())
    none = {"slope_log_odds_per_block": None, "odds_ratio_per_block": None, "z": None, "p": None,
            "informative_strata": n_strata, "clusters": int(frame["u"].nunique())}
    if n_strata == 0 or frame["b"].nunique() < 2:
        return {**none, "note": "not testable: no stratum whose outcome varies over time"}
    exog = pd.get_dummies(frame["s"], dtype=float)
    exog.insert(0, "block", frame["b"].astype(float))
    codes = pd.factorize(frame["u"])[0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = sm.GEE(frame["y"].to_numpy(float), exog.to_numpy(), groups=codes, family=sm.families.Binomial(),
                         cov_struct=sm.cov_struct.Independence()).fit(cov_type="bias_reduced", maxiter=100)
        slope, se = float(fit.params[0]), float(fit.bse[0])
    except (np.linalg.LinAlgError, ValueError) as exc:
        return {**none, "note": f"fit failed: {type(exc).__name__}"}
    if not (np.isfinite(slope) and np.isfinite(se)) or se == 0 or abs(slope) > 25:
        return {**none, "note": "not estimable (separation)"}
    z = slope / se
    p = float(2 * stats.norm.sf(abs(z)))
    return {**none, "slope_log_odds_per_block": slope, "odds_ratio_per_block": float(np.exp(slope)), "z": z, "p": p,
            "direction": "increasing" if slope > 0 else "decreasing" if slope < 0 else "flat", "note": None}


def drift_check(df: pd.DataFrame, *, n_blocks: int = N_BLOCKS, alpha: float = ALPHA,
                min_trials: int = MIN_TRIALS) -> dict[str, Any]:
    """Drift of the pass and infra-error rates across time blocks, within (configuration, task) strata.

    ``df`` is the trial frame; it needs ``started_at`` (ISO time) or ``plan_order`` to order trials.
    """
    out: dict[str, Any] = {"method": "logistic GEE on time-block index with a fixed effect per configuration x task, "
                                     "sandwich clustered on task x attempt (bias-reduced); Bonferroni over the two rates",
                           "alpha": alpha, "n_blocks": n_blocks, "flagged": False, "blocks": []}
    if "started_at" in df.columns and df["started_at"].notna().all():
        when = pd.to_datetime(df["started_at"], utc=True, format="ISO8601")
        out["ordered_by"] = "start time"
    elif "plan_order" in df.columns:
        when = pd.to_datetime(df["plan_order"], unit="s", utc=True)
        out["ordered_by"] = "plan order (no start times recorded)"
    else:
        out["note"] = "not testable: trials carry no start time or plan order"
        return out
    if len(df) < min_trials:
        out["note"] = f"not testable: {len(df)} trials, need {min_trials}"
        return out
    rank = when.rank(method="first").to_numpy() - 1
    block = np.floor(rank * n_blocks / len(df)).astype(int)
    strata = (df["config_label"].astype(str) + "\0" + df["task_id"].astype(str)).to_numpy()
    passed = (df["outcome"] == "passed").to_numpy(float)
    infra = (df["outcome"] == "infra_error").to_numpy(float)
    for b in range(n_blocks):
        m = block == b
        out["blocks"].append({
            "block": b, "n": int(m.sum()), "pass_rate": float(passed[m].mean()) if m.any() else None,
            "infra_error_rate": float(infra[m].mean()) if m.any() else None,
            "first_start_utc": when[m].min().isoformat() if m.any() else None,
            "last_start_utc": when[m].max().isoformat() if m.any() else None,
        })
    # Trials of one task and attempt share a seed in every configuration (common random numbers), so
    # they are correlated: the sandwich is clustered on (task, attempt), the independent unit.
    units = (df["task_id"].astype(str) + "\0" + df["attempt"].astype(str)).to_numpy() if "attempt" in df.columns \
        else np.arange(len(df)).astype(str)
    tests = {"pass": _trend(passed, block, strata, units), "infra_error": _trend(infra, block, strata, units)}
    adjusted = bonferroni([tests["pass"]["p"], tests["infra_error"]["p"]])
    for t, a in zip(tests.values(), adjusted):
        t["p_adjusted"] = a
        t["drift"] = a is not None and a < alpha
    out.update(tests)
    out["flagged"] = any(t["drift"] for t in tests.values())
    return out
