"""pass@k and pass^k with their unbiased estimators, averaged over tasks.

WHY both: pass@k (at least one of k attempts succeeds) rewards an agent that
*sometimes* solves a task; pass^k (all k attempts succeed, tau-bench) rewards
one that solves it *reliably*. They move in opposite directions as k grows, so a
single pass@1 hides the reliability story.

WHY these estimators: with n attempts of which c passed, the plug-in (c/n)^k is
biased upward for pass^k (and 1-(1-c/n)^k biased for pass@k). Sampling k of the
n attempts without replacement gives the unbiased forms

    pass@k = 1 - C(n - c, k) / C(n, k)     (1.0 when n - c < k)
    pass^k =     C(c, k)     / C(n, k)     (0.0 when c < k)

pass@k is the Codex/HumanEval estimator (several libraries ship it); pass^k is
written by hand here because no maintained library provides it.

Numerics: ``scipy.special.comb`` in floating point overflows to inf beyond
n ~ 1020, where the ratio becomes inf/inf. Those entries are recomputed as
exp(log-gamma differences), which is stable for any n. ``pass_curves`` needs
every k at once (a million trials can mean 1,667 of them per task) and uses the
running product prod_{i<k} (top - i) / (n - i) instead: one cumulative product,
no special functions, equal to the closed forms within ~1e-13.
"""

from __future__ import annotations

import numpy as np
from scipy.special import comb, gammaln


def _comb_ratio(top: np.ndarray, n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """C(top, k) / C(n, k) elementwise (0 where top < k), overflow-safe."""
    top, n, k = np.broadcast_arrays(np.asarray(top, float), np.asarray(n, float), np.asarray(k, float))
    shape = top.shape
    top, n, k = (np.atleast_1d(x).copy() for x in (top, n, k))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        num = comb(top, k)
        den = comb(n, k)
        out = num / den
        bad = ~np.isfinite(num) | ~np.isfinite(den) | ~np.isfinite(out)
        if np.any(bad):
            t, nn, kk = top[bad], n[bad], k[bad]
            valid = t >= kk
            lg = np.where(
                valid,
                gammaln(t + 1) - gammaln(np.maximum(t - kk, 0) + 1) - gammaln(nn + 1) + gammaln(nn - kk + 1),
                -np.inf,
            )
            out[bad] = np.exp(lg)
    out[top < k] = 0.0
    return out.reshape(shape)[()]


def pass_at_k_per_task(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Unbiased pass@k; shape broadcast of (tasks, 1) with (1, ks) is typical."""
    n = np.asarray(n, float)
    c = np.asarray(c, float)
    return 1.0 - _comb_ratio(n - c, n, k)


def pass_hat_k_per_task(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Unbiased pass^k (tau-bench "all k succeed"). Hand-written: no library has it."""
    return _comb_ratio(np.asarray(c, float), np.asarray(n, float), k)


def pass_curves(n: np.ndarray, c: np.ndarray, k_max: int | None = None) -> tuple[list[float], list[float]]:
    """Average pass@k and pass^k over tasks for k = 1 .. k_max.

    ``n`` and ``c`` are per-task attempts and successes for one configuration.
    k_max defaults to the smallest number of attempts any task has, so every
    task contributes to every k (an estimator needs k <= n). Tasks with n == 0
    are ignored. Returns two lists; index i holds k = i + 1.
    """
    n = np.asarray(n, float)
    c = np.asarray(c, float)
    m = n > 0
    n, c = n[m], c[m]
    if len(n) == 0:
        return [], []
    kmax = int(n.min()) if k_max is None else min(int(k_max), int(n.min()))
    if kmax < 1:
        return [], []
    # C(top, k) / C(n, k) = prod_{i<k} (top - i) / (n - i): one running product over k gives
    # every k at once, with no factorial or gamma function (n - i > 0 because k <= min n).
    i = np.arange(kmax, dtype=float)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        fail_all = np.maximum(np.cumprod(((n - c)[:, None] - i) / (n[:, None] - i), axis=1), 0.0)
        pass_all = np.maximum(np.cumprod((c[:, None] - i) / (n[:, None] - i), axis=1), 0.0)
    at = (1.0 - fail_all).mean(axis=0)
    hat = pass_all.mean(axis=0)
    return [float(x) for x in at], [float(x) for x in hat]
