"""Minimum detectable difference (MDD) for a pass-rate comparison.

WHY: "not significant" is only informative if the design could have detected a
difference that matters. The MDD is the smallest true difference between two
configurations' pass rates that this design detects with 80% power at
two-sided alpha 0.05. A score change smaller than the MDD is "within noise";
leaderboard gaps below it deserve skepticism.

Method (statsmodels.stats.power): ``NormalIndPower().solve_power`` is solved for
the effect size h (Cohen's arcsine effect, the one ``proportion_effectsize``
produces, h = 2 asin sqrt(p2) - 2 asin sqrt(p1)) at the effective sample size per
configuration, then converted back to a rate: p2 = sin^2(asin sqrt(p1) + h/2).
Both directions are reported (they differ near 0 and 1).

Design effect: attempts of one task are correlated (intra-task correlation
rho), so n = tasks x attempts trials carry the information of only
n / (1 + (m - 1) rho) independent ones, with m attempts per task. This treats
the two configurations as independent samples and ignores the pairing the CMH
test exploits, so the MDD is conservative (an honest upper bound on the noise
level). It also shows why more attempts alone cannot go below a floor: as
m -> infinity the effective n tends to tasks / rho, so more *tasks* are needed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

ALPHA = 0.05
POWER = 0.80


@dataclass(frozen=True)
class MDD:
    n_per_config: int
    n_tasks: int | None
    attempts_per_task: float | None
    baseline: float
    icc: float
    design_effect: float
    n_effective: float
    effect_size_h: float
    mdd_up: float | None  # baseline -> baseline + mdd_up is detectable
    mdd_down: float | None
    mdd: float | None  # max(mdd_up, mdd_down): the noise level quoted in reports
    alpha: float = ALPHA
    power: float = POWER

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def design_effect(attempts_per_task: float, icc: float) -> float:
    """Kish design effect 1 + (m - 1) rho for clusters of m correlated attempts."""
    return 1.0 + max(0.0, attempts_per_task - 1.0) * max(0.0, icc)


def effect_size_for(n_eff: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Cohen's h detectable with n_eff per group (equal groups, two-sided)."""
    return float(
        NormalIndPower().solve_power(
            effect_size=None, nobs1=n_eff, alpha=alpha, power=power, ratio=1.0, alternative="two-sided"
        )
    )


def _shift(p: float, h: float) -> float | None:
    a = math.asin(math.sqrt(min(max(p, 0.0), 1.0))) + h / 2.0
    if a < 0 or a > math.pi / 2:
        return None  # not reachable: no rate that far away exists
    return math.sin(a) ** 2


def mdd(
    n_per_config: int,
    baseline: float,
    n_tasks: int | None = None,
    icc: float = 0.0,
    alpha: float = ALPHA,
    power: float = POWER,
) -> MDD:
    """Minimum detectable rate difference at 80% power, alpha 0.05 two-sided.

    With ``n_tasks`` and ``icc`` the design effect for n_per_config / n_tasks
    attempts per task is applied; otherwise trials are taken as independent.
    """
    m = (n_per_config / n_tasks) if n_tasks else None
    deff = design_effect(m, icc) if m is not None else 1.0
    n_eff = n_per_config / deff
    h = effect_size_for(n_eff, alpha, power)
    up = _shift(baseline, h)
    down = _shift(baseline, -h)
    d_up = None if up is None else up - baseline
    d_down = None if down is None else baseline - down
    vals = [v for v in (d_up, d_down) if v is not None]
    return MDD(
        n_per_config=int(n_per_config),
        n_tasks=n_tasks,
        attempts_per_task=m,
        baseline=float(baseline),
        icc=float(icc),
        design_effect=float(deff),
        n_effective=float(n_eff),
        effect_size_h=h,
        mdd_up=d_up,
        mdd_down=d_down,
        mdd=max(vals) if vals else None,
        alpha=alpha,
        power=power,
    )


def n_effective_needed(p1: float, p2: float, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Independent trials per config needed to detect p1 vs p2 (None if p1 == p2)."""
    h = abs(float(proportion_effectsize(p1, p2)))
    if h == 0 or not np.isfinite(h):
        return None
    return float(NormalIndPower().solve_power(effect_size=h, nobs1=None, alpha=alpha, power=power, ratio=1.0))


def attempts_per_task_needed(n_eff: float, n_tasks: int, icc: float) -> int | None:
    """Attempts per task m such that n_tasks * m / (1 + (m - 1) icc) >= n_eff.

    None when no number of attempts suffices (n_eff >= n_tasks / icc): then more
    tasks, not more attempts, are needed.
    """
    icc = max(0.0, icc)
    if n_tasks <= 0:
        return None
    denom = n_tasks - n_eff * icc
    if denom <= 0:
        return None
    m = n_eff * (1.0 - icc) / denom
    return max(1, int(math.ceil(m - 1e-9)))
