"""Binomial proportions with Wilson 95% score intervals.

WHY Wilson: the normal ("Wald") interval collapses to zero width at 0/n and
undercovers at small n and extreme rates -- exactly the regime of infra-error
rates (a few percent) and small golden sets (20 tasks). The Wilson score interval
keeps nominal coverage there and is what the evaluation-methods references print.

We call statsmodels' vectorised ``proportion_confint(method="wilson")`` (plain
Wilson, no continuity correction) so that many intervals cost one numpy call;
the tests check it against ``scipy.stats.binomtest(...).proportion_ci`` digit for
digit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportion_confint

ALPHA = 0.05


@dataclass(frozen=True)
class Proportion:
    """k successes out of n with a Wilson interval; estimate/low/high are None when n == 0."""

    k: int
    n: int
    estimate: float | None
    low: float | None
    high: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilson_arrays(k: np.ndarray, n: np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised Wilson interval. Returns (estimate, low, high); NaN where n == 0.

    Bounds are clipped to [0, 1] because floating-point evaluation can leave a
    -1e-17 at k == 0, which would print as "-0.0".
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    est = np.full(np.broadcast(k, n).shape, np.nan)
    low = est.copy()
    high = est.copy()
    ok = n > 0
    if np.any(ok):
        kk = np.broadcast_to(k, est.shape)[ok]
        nn = np.broadcast_to(n, est.shape)[ok]
        lo, hi = proportion_confint(kk, nn, alpha=alpha, method="wilson")
        est[ok] = kk / nn
        low[ok] = np.clip(lo, 0.0, 1.0)
        high[ok] = np.clip(hi, 0.0, 1.0)
    return est, low, high


def _f(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def wilson(k: int, n: int, alpha: float = ALPHA) -> Proportion:
    """Wilson interval for a single k/n."""
    est, low, high = wilson_arrays(np.array([k]), np.array([n]), alpha)
    return Proportion(int(k), int(n), _f(est[0]), _f(low[0]), _f(high[0]))


def wilson_many(k: np.ndarray, n: np.ndarray, alpha: float = ALPHA) -> list[Proportion]:
    """Wilson intervals for many k/n pairs in one vectorised call."""
    est, low, high = wilson_arrays(k, n, alpha)
    return [
        Proportion(int(ki), int(ni), _f(e), _f(lo), _f(hi))
        for ki, ni, e, lo, hi in zip(np.asarray(k), np.asarray(n), est, low, high)
    ]
