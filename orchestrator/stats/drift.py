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
else) the test is the score test for a slope on the block index in a logistic
model with a fixed effect per (configuration, task) stratum -- each stratum has
its own baseline, so task difficulty and the configuration's effect cancel and
only change over time within a stratum is measured. Strata whose outcome never
varies carry no information about a slope and are dropped. The trials of one
task and attempt share a seed in every configuration (common random numbers),
so they are not independent: the score's variance is the robust (sandwich)
one clustered on (task, attempt), with the G/(G-1) small-sample factor. The two
p values are Bonferroni-adjusted together (for "any drift" the same decision
as Holm), and the run is flagged when either adjusted p is below ``alpha``, so
a stationary run is flagged at about ``alpha`` or less.

Why a score test and not the fitted model: the fitted GEE needs one dummy column
per stratum, so its design is rows x strata dense -- a 1M-trial sweep of 600
strata is a 4.8 GB matrix and an OOM kill, and 12,000 trials took minutes. Under
the null the stratum baselines are just the stratum means, and the score and its
sandwich reduce to group sums, so this is O(rows). It is the same statistic as
statsmodels' ``GEE.compare_score_test`` (Rotnitzky-Jewell generalized score test,
independence working correlation); ``tests/stats/test_drift.py`` checks the two agree.
The reported slope is the one-step estimate from the null (score / information),
which is what a report needs: a direction and a size in odds per block.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
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


def _codes(*columns: pd.Series) -> np.ndarray:
    """One dense integer code per distinct combination of the columns (strings never concatenated)."""
    code = np.zeros(len(columns[0]), dtype=np.int64)
    for col in columns:
        c, uniques = pd.factorize(col, sort=False)
        code = code * max(len(uniques), 1) + c
    return pd.factorize(code, sort=False)[0]


def _trend(y: np.ndarray, block: np.ndarray, strata: np.ndarray, units: np.ndarray) -> dict[str, Any]:
    """``strata`` and ``units`` are dense integer codes (see :func:`_codes`)."""
    n_per = np.bincount(strata)
    p_null = (np.bincount(strata, weights=y) / np.maximum(n_per, 1))[strata]  # stratum baselines under no drift
    keep = (p_null > 0) & (p_null < 1)  # a stratum whose outcome never varies carries no slope information
    blocks_kept = block[keep]
    y, b, strata, units, p_null = y[keep], blocks_kept.astype(float), strata[keep], units[keep], p_null[keep]
    # Distinct values counted on the dense codes (bincount, linear) rather than np.unique (a sort of a million).
    distinct = lambda codes: int(np.count_nonzero(np.bincount(codes))) if len(codes) else 0  # noqa: E731
    n_strata, clusters = distinct(strata), distinct(units)
    none = {
        "slope_log_odds_per_block": None,
        "odds_ratio_per_block": None,
        "z": None,
        "p": None,
        "informative_strata": n_strata,
        "clusters": clusters,
    }
    if n_strata == 0 or distinct(blocks_kept) < 2 or clusters < 2:
        return {**none, "note": "not testable: no stratum whose outcome varies over time"}
    b_centred = b - (np.bincount(strata, weights=b) / np.maximum(np.bincount(strata), 1))[strata]
    contribution = b_centred * (y - p_null)  # the slope's efficient score, per trial
    score = float(contribution.sum())
    per_cluster = np.bincount(units, weights=contribution)
    variance = float((per_cluster**2).sum()) * clusters / (clusters - 1)
    information = float((b_centred**2 * p_null * (1 - p_null)).sum())
    if variance <= 0 or information <= 0:
        return {**none, "note": "not testable: the time blocks do not vary within any informative stratum"}
    z = score / np.sqrt(variance)
    p = float(2 * stats.norm.sf(abs(z)))
    slope = score / information
    return {
        **none,
        "slope_log_odds_per_block": slope,
        "odds_ratio_per_block": float(np.exp(slope)),
        "z": float(z),
        "p": p,
        "direction": "increasing" if slope > 0 else "decreasing" if slope < 0 else "flat",
        "note": None,
    }


def _times(col: pd.Series) -> pd.Series:
    """Start times as UTC timestamps; a missing or unparseable time is NaT (never a block index)."""
    if pd.api.types.is_datetime64_any_dtype(col):
        return pd.to_datetime(col, utc=True)
    text = col.astype(object).where(col.notna() & (col.astype(str).str.strip() != ""), None)
    return pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce")


def drift_check(
    df: pd.DataFrame, *, n_blocks: int = N_BLOCKS, alpha: float = ALPHA, min_trials: int = MIN_TRIALS
) -> dict[str, Any]:
    """Drift of the pass and infra-error rates across time blocks, within (configuration, task) strata.

    ``df`` is the trial frame; it needs ``started_at`` (ISO time) or ``plan_order`` to order trials.
    Trials without a start time are left out (``n_without_time`` says how many).
    """
    out: dict[str, Any] = {
        "method": "score test for a logistic slope on the time-block index with a fixed effect per "
        "configuration x task, sandwich clustered on task x attempt; Bonferroni over the "
        "two rates",
        "alpha": alpha,
        "n_blocks": n_blocks,
        "flagged": False,
        "blocks": [],
        "n_trials": int(len(df)),
        "n_without_time": 0,
    }
    if "started_at" in df.columns:
        # A trial without a recorded start time (an imported one, or '' in a store written before schema 5)
        # has no place in time: it is left out, and the report says how many were.
        when = _times(df["started_at"])
        has_time = when.notna().to_numpy()
        out["n_without_time"] = int((~has_time).sum())
        if not has_time.any():
            out["note"] = f"not testable: none of the {len(df)} trials recorded a start time"
            return out
        df, when = df[has_time], when[has_time]
        out["ordered_by"] = "start time" + (
            f" ({out['n_without_time']} trial(s) without one left out)" if out["n_without_time"] else ""
        )
    elif "plan_order" in df.columns:
        when = pd.to_datetime(df["plan_order"], unit="s", utc=True)
        out["ordered_by"] = "plan order (no start times recorded)"
    else:
        out["note"] = "not testable: trials carry no start time or plan order"
        return out
    if len(df) < min_trials:
        out["note"] = f"not testable: {len(df)} trials with a start time, need {min_trials}"
        return out
    rank = when.rank(method="first").to_numpy() - 1
    block = np.floor(rank * n_blocks / len(df)).astype(int)
    strata = _codes(df["config_label"], df["task_id"])
    passed = (df["outcome"] == "passed").to_numpy(float)
    infra = (df["outcome"] == "infra_error").to_numpy(float)
    for b in range(n_blocks):
        m = block == b
        out["blocks"].append(
            {
                "block": b,
                "n": int(m.sum()),
                "pass_rate": float(passed[m].mean()) if m.any() else None,
                "infra_error_rate": float(infra[m].mean()) if m.any() else None,
                "first_start_utc": when[m].min().isoformat() if m.any() else None,
                "last_start_utc": when[m].max().isoformat() if m.any() else None,
            }
        )
    # Trials of one task and attempt share a seed in every configuration (common random numbers), so
    # they are correlated: the sandwich is clustered on (task, attempt), the independent unit.
    units = _codes(df["task_id"], df["attempt"]) if "attempt" in df.columns else np.arange(len(df))
    tests = {"pass": _trend(passed, block, strata, units), "infra_error": _trend(infra, block, strata, units)}
    adjusted = bonferroni([tests["pass"]["p"], tests["infra_error"]["p"]])
    for t, a in zip(tests.values(), adjusted):
        t["p_adjusted"] = a
        t["drift"] = a is not None and a < alpha
    out.update(tests)
    out["flagged"] = any(t["drift"] for t in tests.values())
    return out
