"""Per-task resource bands: the floor (request) and the ceiling (limit) a maintainer can publish.

WHY per task: one band for a whole set either starves the heavy tasks (their
legitimate strategies are OOM-killed) or reserves for every plain task the
memory only the heaviest one needs. A task's band is read from its own trials.

Floor (request, Harbor's ``memory_mb``/``cpus``): the 95th percentile of the
task's peak memory at the *generous* limits (the unbounded configuration, else
the highest limit tested), over trials that were not OOM-killed (an OOM-killed
trial's peak is cut off at its limit). Percentiles are numpy's (linear
interpolation); with fewer than 20 peaks the p95/p99 are close to the maximum,
and the evidence says how many there were.

CPU floor: the 95th percentile, over the same trials, of each trial's average CPU
use -- its CPU time (the backend's cgroup or container counter) divided by the wall
time its agent and verifier steps ran (see orchestrator.store.cpu for why that span)
-- rounded up to ``CPU_STEP`` cpu, at least ``MIN_CPUS``, capped at the CPU ceiling.
An average over the trial is what one counter per trial can give: the floor is the
sustained use a trial should be guaranteed; bursts above it are what the ceiling is
for. Where fewer than ``min_peaks`` trials have a CPU time (the Kubernetes backend
records none), the floor falls back to the spec's ``cpus`` times the chosen
configuration's request multiplier, and ``cpu_floor_source`` says so.

Ceiling (limit, headroom's ``memory_limit_mb``/``cpus_limit``): the smallest
tested limit L such that L *and every larger tested limit* are within noise of
unbounded for infra errors. "Within noise" means both:

* the exact unconditional test (Boschloo; Fisher above the size cap) of the
  infra-error rates at L and unbounded is not significant at ``alpha``, and
* the upper end of the 95% Newcombe (hybrid score) interval of the rate
  difference (L minus unbounded, statsmodels ``confint_proportions_2indep``)
  is at most ``margin``: a non-inferiority reading, so a ceiling is never
  recommended merely because too few attempts were run to see a difference.

Requiring the larger limits too keeps a lucky small limit (no spike drawn) from
being published below a limit that did show errors.

Refusal: with no unbounded configuration, with too few peaks for the floor, or
when no tested limit is within noise. If some limit is not significantly worse
than unbounded but its interval is still wider than the margin, the refusal
says how many attempts per configuration would be needed: the smallest n at
which the same observed rates give a Newcombe upper bound within the margin
(statsmodels' interval evaluated at the rates seen; a planning figure, not a
power guarantee). If every tested limit is significantly worse, the answer is
"test higher limits", with the largest peak seen as a multiple of the spec.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import confint_proportions_2indep

from .paired import two_rate_exact
from .proportions import wilson

ALPHA = 0.05
MARGIN = 0.10
MIN_PEAKS = 5
MAX_PLANNED_ATTEMPTS = 10_000
MIB = 1024 * 1024
CPU_STEP = 0.05  # a measured CPU floor is rounded up to this (50 millicores)
MIN_CPUS = 0.1  # and is never below this: a request of a few millicores starves any process under contention
CPU_MEASURED = "measured"
CPU_FALLBACK = "spec x request multiplier"


@dataclass
class LimitTest:
    """One tested limit against unbounded."""

    label: str
    limit_multiplier: float
    request_multiplier: float
    infra: dict[str, Any]  # Wilson proportion at this limit
    test: str
    p: float
    diff: float | None
    diff_low: float | None
    diff_high: float | None
    significant: bool
    within_margin: bool
    within_noise: bool
    cpu: dict[str, Any] = field(default_factory=dict)  # CPU use and throttling at this limit (empty: not recorded)


@dataclass
class TaskBand:
    task_id: str
    status: str  # "recommended" | "refused"
    spec_memory_mb: int
    spec_cpus: float
    floor_memory_mb: int | None = None
    floor_cpus: float | None = None
    ceiling_memory_mb: int | None = None
    ceiling_cpus: float | None = None
    ceiling_label: str | None = None
    ceiling_limit_multiplier: float | None = None
    peaks: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, Any] = field(default_factory=dict)  # per-trial average CPU use at the generous limits
    cpu_floor_source: str | None = None
    unbounded_infra: dict[str, Any] | None = None
    limits: list[LimitTest] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    attempts_needed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _peaks(sample: np.ndarray, basis: str) -> dict[str, Any]:
    out: dict[str, Any] = {"basis": basis, "n": int(len(sample))}
    if len(sample):
        q = np.quantile(sample, [0.5, 0.95, 0.99])
        out.update(median_bytes=float(q[0]), p95_bytes=float(q[1]), p99_bytes=float(q[2]), max_bytes=float(sample.max()))
    return out


def cpu_use(rows: pd.DataFrame) -> pd.Series:
    """Per trial, its average CPU use in cpus (CPU time / the steps' wall time); NaN where not recorded."""
    if "cpu_time_s" not in rows.columns or "busy_s" not in rows.columns:
        return pd.Series(np.nan, index=rows.index, dtype=float)
    cpu, busy = rows["cpu_time_s"].astype(float), rows["busy_s"].astype(float)
    return (cpu / busy).where((busy > 0) & (cpu >= 0))


def _cpu_evidence(rows: pd.DataFrame, use: pd.Series, basis: str) -> dict[str, Any]:
    sample = use.dropna().to_numpy()
    out: dict[str, Any] = {"basis": basis, "n": int(len(sample)), "not_measured": int(use.isna().sum())}
    if len(sample):
        q = np.quantile(sample, [0.5, 0.95, 0.99])
        out.update(median_cpus=float(q[0]), p95_cpus=float(q[1]), p99_cpus=float(q[2]), max_cpus=float(sample.max()))
        if "enforcement" in rows.columns:  # where the counters came from (a cgroup, a container, rusage)
            seen = rows.loc[use.notna(), "enforcement"].value_counts()
            out["enforcement"] = {str(k): int(v) for k, v in seen.items()}
    return out


def _limit_cpu(rows: pd.DataFrame) -> dict[str, Any]:
    """CPU use and quota throttling of the trials at one tested limit: did the CPU limit bite?"""
    out: dict[str, Any] = {}
    use = cpu_use(rows).dropna()
    if len(use):
        out.update(n_use=int(len(use)), median_cpus=float(use.median()))
    if "nr_periods" in rows.columns:
        t = rows[rows["nr_periods"].astype(float) > 0]
        if len(t):
            share = t["nr_throttled"].astype(float) / t["nr_periods"].astype(float)
            out.update(n_throttling=int(len(t)), throttled_trials=int((t["nr_throttled"].astype(float) > 0).sum()),
                       median_throttled_share=float(share.median()))
            secs = t["throttled_s"].astype(float).dropna()
            if len(secs):
                out["median_throttled_s"] = float(secs.median())
    return out


def measured_cpu_floor(p95_cpus: float, ceiling_cpus: float | None) -> tuple[float, bool]:
    """The p95 rounded up to the step, at least the minimum, capped at the ceiling; and whether the cap bit."""
    steps = math.ceil(round(p95_cpus / CPU_STEP, 6))  # round first: 0.30000000000000004 / 0.05 is 6, not 7
    floor = round(max(MIN_CPUS, steps * CPU_STEP), 3)
    if ceiling_cpus is not None and floor > ceiling_cpus:
        return ceiling_cpus, True
    return floor, False


def _diff_interval(x_l: int, n_l: int, x_u: int, n_u: int, alpha: float) -> tuple[float, float]:
    low, high = confint_proportions_2indep(x_l, n_l, x_u, n_u, method="newcomb", compare="diff", alpha=alpha)
    return float(low), float(high)


def attempts_needed(rate_l: float, rate_u: float, margin: float, alpha: float = ALPHA) -> int | None:
    """Smallest n per configuration at which these rates give a Newcombe upper bound <= margin."""
    if rate_l - rate_u >= margin:
        return None

    def ok(n: int) -> bool:
        return _diff_interval(round(rate_l * n), n, round(rate_u * n), n, alpha)[1] <= margin

    lo, hi = 1, 2
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > MAX_PLANNED_ATTEMPTS:
            return None
    while lo < hi:  # the bound shrinks with n up to rounding wiggles; bisect on the doubling bracket
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def task_band(task_id: str, rows: pd.DataFrame, spec_memory_mb: int, spec_cpus: float, *, alpha: float = ALPHA,
              margin: float = MARGIN, min_peaks: int = MIN_PEAKS) -> TaskBand:
    """The band of one task from its trial rows (the store's trial frame, this task only)."""
    band = TaskBand(task_id=task_id, status="refused", spec_memory_mb=spec_memory_mb, spec_cpus=spec_cpus)
    lim = rows["limit_multiplier"].astype(float)
    unb = rows[lim.isna() & (rows["config_label"] != "task-band")]
    bounded = rows[lim.notna() & (rows["config_label"] != "task-band")]
    oom = (rows["outcome"] == "infra_error") & (rows["reason"] == "oom_killed")

    if len(unb):
        generous, basis = unb, "unbounded"
    elif len(bounded):
        top = bounded["limit_multiplier"].max()
        generous, basis = bounded[bounded["limit_multiplier"] == top], f"highest tested limit ({top:g}x)"
    else:
        generous, basis = rows.iloc[:0], "none"
    kept = generous.loc[~oom.loc[generous.index]]  # the memory and the CPU floor read the same trials
    peak = kept["peak_memory_bytes"].astype(float).dropna().to_numpy()
    band.peaks = _peaks(peak, basis)
    band.cpu = _cpu_evidence(kept, cpu_use(kept), basis)
    if len(peak) < min_peaks:
        band.reasons.append(f"floor: {len(peak)} peak-memory measurements at generous limits, need {min_peaks}")

    if not len(unb):
        band.reasons.append("ceiling: the run has no unbounded configuration to compare infra errors against")
        _cpu_floor(band, None, min_peaks)
        return band
    x_u, n_u = int((unb["outcome"] == "infra_error").sum()), len(unb)
    band.unbounded_infra = wilson(x_u, n_u).to_dict()
    for (label, mult, req), g in sorted(
        bounded.groupby(["config_label", "limit_multiplier", "request_multiplier"]), key=lambda kv: (kv[0][1], kv[0][2])
    ):
        x, n = int((g["outcome"] == "infra_error").sum()), len(g)
        t = two_rate_exact(x_u, n_u, x, n)
        low, high = _diff_interval(x, n, x_u, n_u, alpha)
        sig = t.p < alpha
        within = high <= margin
        band.limits.append(LimitTest(
            label=str(label), limit_multiplier=float(mult), request_multiplier=float(req), infra=wilson(x, n).to_dict(),
            test=t.method, p=t.p, diff=x / n - x_u / n_u, diff_low=low, diff_high=high, significant=bool(sig),
            within_margin=bool(within), within_noise=bool(not sig and within), cpu=_limit_cpu(g),
        ))
    chosen: LimitTest | None = None
    for lt in reversed(band.limits):  # the smallest limit from which every larger one is within noise
        if not lt.within_noise:
            break
        chosen = lt
    if chosen is None:
        # The cheapest limit to settle: every limit from it upwards must reach the margin at the rates seen.
        plans: list[tuple[int, LimitTest]] = []
        for i, lt in enumerate(band.limits):
            above = band.limits[i:]
            if any(a.significant for a in above):
                continue
            needs = [attempts_needed(a.infra["estimate"] or 0.0, x_u / n_u, margin, alpha) for a in above]
            if all(n is not None for n in needs):
                plans.append((max(n for n in needs if n is not None), lt))
        plausible = [lt for lt in band.limits if not lt.significant]
        if plans:
            need, lt = min(plans, key=lambda p: p[0])
            band.attempts_needed = need
            band.reasons.append(
                f"ceiling: no tested limit is within noise of unbounded; {lt.label} is not significantly worse "
                f"(p={lt.p:.3g}) but its interval reaches {lt.diff_high:+.3f} > margin {margin:g}: "
                f"about {need} attempts per configuration (at the rates seen) would settle it"
            )
        elif plausible:
            band.reasons.append(
                f"ceiling: no tested limit is within noise of unbounded, and at the rates seen no number of "
                f"attempts would bring {plausible[0].label} within {margin:g} of unbounded; test higher limits")
        else:
            top = band.peaks.get("max_bytes")
            hint = f" (largest peak seen: {top / (spec_memory_mb * MIB):.2f}x the spec)" if top else ""
            band.reasons.append(f"ceiling: every tested limit has significantly more infra errors than unbounded; "
                                f"test higher limits{hint}")
    else:
        band.ceiling_label = chosen.label
        band.ceiling_limit_multiplier = chosen.limit_multiplier
        band.ceiling_memory_mb = math.ceil(spec_memory_mb * chosen.limit_multiplier)
        band.ceiling_cpus = round(spec_cpus * chosen.limit_multiplier, 3)
    _cpu_floor(band, chosen, min_peaks)
    if len(peak) >= min_peaks:
        floor = max(1, math.ceil(band.peaks["p95_bytes"] / MIB))
        band.floor_memory_mb = min(floor, band.ceiling_memory_mb) if band.ceiling_memory_mb else floor
    if band.ceiling_memory_mb is not None and band.floor_memory_mb is not None:
        band.status = "recommended"
    return band


def _cpu_floor(band: TaskBand, chosen: LimitTest | None, min_peaks: int) -> None:
    """Measured when enough trials have a CPU time; else the spec x request multiplier (said so), given a ceiling."""
    n = band.cpu.get("n", 0)
    if n >= min_peaks:
        floor, capped = measured_cpu_floor(band.cpu["p95_cpus"], band.ceiling_cpus)
        band.floor_cpus = floor
        band.cpu_floor_source = (f"{CPU_MEASURED}: p95 of per-trial CPU use at {band.cpu['basis']} (n={n}), "
                                 f"rounded up to {CPU_STEP:g} cpu, at least {MIN_CPUS:g}"
                                 + (" -- capped at the CPU ceiling" if capped else ""))
        return
    why = "no CPU time measured" if n == 0 else f"only {n} CPU-time measurements, need {min_peaks}"
    band.cpu_floor_source = f"{CPU_FALLBACK} ({why})"
    if chosen is not None:
        band.floor_cpus = round(band.spec_cpus * chosen.request_multiplier, 3)


def task_bands(df: pd.DataFrame, specs: dict[str, dict[str, Any]], *, alpha: float = ALPHA, margin: float = MARGIN,
               min_peaks: int = MIN_PEAKS) -> list[TaskBand]:
    """Bands for every task of a run. ``specs`` maps task id to its ``[environment]`` (memory_mb, cpus)."""
    out = []
    for task_id, rows in df.groupby("task_id", sort=True):
        env = specs[str(task_id)]
        out.append(task_band(str(task_id), rows, int(env["memory_mb"]), float(env["cpus"]), alpha=alpha, margin=margin,
                             min_peaks=min_peaks))
    return out


def reserved_memory(bands: list[TaskBand], multiplier: float) -> dict[str, float]:
    """Memory a placement without overcommit sets aside for one trial of every task: sum of ceilings.

    Against the same sum under a uniform ``multiplier`` x spec, so a maintainer sees what the bands save.
    """
    band_total = sum(b.ceiling_memory_mb or 0 for b in bands if b.status == "recommended")
    uniform = sum(math.ceil(b.spec_memory_mb * multiplier) for b in bands if b.status == "recommended")
    return {"task_band_mb": float(band_total), f"uniform_{multiplier:g}x_mb": float(uniform),
            "ratio": band_total / uniform if uniform else float("nan")}
