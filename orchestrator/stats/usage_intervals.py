"""95% intervals for cost, tokens and latency per trial and per solved task: a bootstrap over tasks.

WHAT each interval is for: the figure a configuration would show on new tasks drawn like these,
with each task's attempts kept together. Attempts of one task are not independent (a hard task
is expensive every time), so the unit resampled is the task, as the headline's interval for new
tasks treats it (:func:`orchestrator.stats.clustered.new_tasks_interval`).

HOW: ``scipy.stats.bootstrap`` with ``paired=True`` over the tasks, each task carrying its sum of
the figure, its count of trials that reported it and its passes among them; the statistic is the
ratio of the resampled sums (sum of the figure / trials, or / passes), the same ratio estimator
:mod:`orchestrator.stats.cost` prints. Percentile method (the ratio of two random sums has no
usable jackknife when a resample holds no pass, which BCa needs), 2,000 resamples, a fixed seed
so a comparison prints the same numbers every time. A per-solved resample without a pass has no
value; when any has none (the passes sit in too few tasks to bound a cost per solved task), or fewer
than two tasks reported the figure, there is no interval (None): too few to say.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from .aggregate import _col

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20260101
METHOD = (
    "bootstrap over tasks (scipy.stats.bootstrap, paired, percentile, 2,000 resamples, fixed seed): each task "
    "with all its trials, the ratio of resampled sums; 95%"
)


@dataclass(frozen=True)
class UsageIntervals:
    cost_per_attempt: tuple[float, float] | None
    cost_per_solved: tuple[float, float] | None
    tokens_per_attempt: tuple[float, float] | None
    tokens_per_solved: tuple[float, float] | None
    latency_per_attempt: tuple[float, float] | None

    def to_dict(self) -> dict[str, list[float] | str | None]:
        def pair(x: tuple[float, float] | None) -> list[float] | None:
            return None if x is None else [x[0], x[1]]

        return {
            "cost_per_attempt_ci": pair(self.cost_per_attempt),
            "cost_per_solved_ci": pair(self.cost_per_solved),
            "tokens_per_attempt_ci": pair(self.tokens_per_attempt),
            "tokens_per_solved_ci": pair(self.tokens_per_solved),
            "latency_per_attempt_ci": pair(self.latency_per_attempt),
            "usage_interval_method": METHOD,
        }


def _ratio(numerator: np.ndarray, denominator: np.ndarray, axis: int = -1) -> np.ndarray:
    top, bottom = np.sum(numerator, axis=axis), np.sum(denominator, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)


def _interval(sums: np.ndarray, counts: np.ndarray) -> tuple[float, float] | None:
    """The bootstrap interval of sum(sums) / sum(counts) over tasks (arrays of one entry per task)."""
    if len(counts) < 2 or not np.isfinite(_ratio(sums, counts)):  # fewer than two tasks reported it
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate sample (every task the same) or an undefined resample
        res = stats.bootstrap(
            (sums, counts),
            _ratio,
            paired=True,
            vectorized=True,
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            method="percentile",
            random_state=np.random.default_rng(SEED),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):  # a resample without a denominator: no interval
        return None
    return low, high


def usage_intervals(df: pd.DataFrame, label: str) -> UsageIntervals:
    """The intervals of one configuration (``config_label == label``) of a trial frame."""
    sub = df[df["config_label"].astype(str) == label]
    task = sub["task_id"].astype(str).to_numpy()
    passed = (sub["outcome"].astype(str) == "passed").to_numpy()
    cost, duration = _col(sub, "cost_usd"), _col(sub, "duration_s")
    tokens = _col(sub, "tokens_in") + _col(sub, "tokens_out")  # NaN unless both were reported

    def per_task(x: np.ndarray, denominator: str) -> tuple[np.ndarray, np.ndarray]:
        ok = np.isfinite(x)
        frame = pd.DataFrame({"task": task[ok], "x": x[ok], "n": 1, "passed": passed[ok].astype(int)})
        grouped = frame.groupby("task", sort=True)[["x", "n", "passed"]].sum()
        return grouped["x"].to_numpy(float), grouped[denominator].to_numpy(float)

    return UsageIntervals(
        cost_per_attempt=_interval(*per_task(cost, "n")),
        cost_per_solved=_interval(*per_task(cost, "passed")),
        tokens_per_attempt=_interval(*per_task(tokens, "n")),
        tokens_per_solved=_interval(*per_task(tokens, "passed")),
        latency_per_attempt=_interval(*per_task(duration, "n")),
    )
