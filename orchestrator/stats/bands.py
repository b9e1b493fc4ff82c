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

Ceiling (limit, headroom's ``memory_limit_mb``/``cpus_limit``): the report's
calibration rule (orchestrator.stats.calibration) applied to one task's trials --
the same decision code (orchestrator.stats.rule) and the same margin -- each tested
limit compared with the task's strict (smallest) limit only:

* no infra error at any tested limit: the strict limit suffices;
* infra: the run level's exact test stratified by task, with one stratum (Fisher's
  exact test, one-sided) of "fewer infra errors than at the strict limit", Holm
  over the limits;
* score: two-sided exact test (Fisher) of the pass rate among finished trials, a
  side where no trial finished counting as 0 passes of its trials (as at run level:
  a limit under which the task only then finishes is a change), Holm over the
  limits; equivalence by TOST (statsmodels ``tost_proportions_2indep``, score
  method) within ``margin``, shown only when both sides finished trials. One task
  has no spread over tasks, so the run level's paired t and paired TOST over tasks
  become these two-sample forms over its trials;
* the ceiling is the smallest bounded limit with significantly fewer infra errors
  whose score is shown equivalent, before the first limit whose score changes; a
  larger one replaces it only if it has significantly fewer infra errors still
  (fixed-sequence, the same exact test). ``unbounded`` is never a ceiling (no
  number to write into task.toml); it is evidence only.

Spec too low (``spec_too_low``, refused): the task needs more than the largest
limit tested (still killed significantly more often there than unbounded, or on
every trial with no unbounded arm), or -- where the oracle check ran (``oracle``,
an :class:`OracleCheck` per task) -- its oracle fails below some limit.

Refusal, with the reason a maintainer acts on: with no bounded limit, with too
few peaks for the floor, when the limits that remove the infra errors also
change the score (the task is solved another way with headroom, or its spec is
too low: decide whether that strategy is intended), when a limit removes them but
the pass rate is not shown within the margin (with the attempts that would settle
it), when only unbounded removes them (test higher limits), or when no limit is
shown to remove them: then the attempts per configuration that would give the
one-sided test 80% power at the rates seen (statsmodels power, at alpha / limits).
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep, tost_proportions_2indep

from . import power
from .band_types import LimitTest, OracleCheck, TaskBand
from .calibration import MARGIN, POWER
from .multiplicity import holm
from .proportions import wilson
from .rule import decide
from .stratified import fewer_events

ALPHA = 0.05
MIN_PEAKS = 5
MAX_PLANNED_ATTEMPTS = 10_000
MIB = 1024 * 1024
CPU_STEP = 0.05  # a measured CPU floor is rounded up to this (50 millicores)
MIN_CPUS = 0.1  # and is never below this: a request of a few millicores starves any process under contention
CPU_MEASURED = "measured"
CPU_FALLBACK = "spec x request multiplier"


@dataclass
class _Tested:
    """A tested limit while the rule runs: its result and its infra-error count (x of n trials)."""

    test: LimitTest
    x: int
    n: int


def _peaks(sample: np.ndarray, basis: str) -> dict[str, Any]:
    out: dict[str, Any] = {"basis": basis, "n": int(len(sample))}
    if len(sample):
        q = np.quantile(sample, [0.5, 0.95, 0.99])
        out.update(
            median_bytes=float(q[0]), p95_bytes=float(q[1]), p99_bytes=float(q[2]), max_bytes=float(sample.max())
        )
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


def _floats(col: pd.Series) -> np.ndarray:
    """A column as float64, NaN where missing (as ``astype(float)`` gives)."""
    return col.to_numpy(dtype=float, na_value=np.nan)


def _median(values: np.ndarray) -> float:
    """The median of the non-missing values, as ``Series.median`` takes it (pandas calls ``np.nanmedian``)."""
    kept = values[~np.isnan(values)]
    return float(np.nanmedian(kept)) if len(kept) else float("nan")


def _limit_cpu(rows: pd.DataFrame) -> dict[str, Any]:
    """CPU use and quota throttling of the trials at one tested limit: did the CPU limit bite?

    On numpy arrays rather than pandas Series: it runs once per task and configuration, and pandas' per-call
    overhead made it the largest share of ``runs calibrate``'s own work (the values are the same).
    """
    out: dict[str, Any] = {}
    if "cpu_time_s" in rows.columns and "busy_s" in rows.columns:
        cpu, busy = _floats(rows["cpu_time_s"]), _floats(rows["busy_s"])
        ok = (busy > 0) & (cpu >= 0)  # as cpu_use: NaN where not recorded
        use = cpu[ok] / busy[ok]
        use = use[~np.isnan(use)]
        if len(use):
            out.update(n_use=int(len(use)), median_cpus=_median(use))
    if "nr_periods" in rows.columns:
        periods = _floats(rows["nr_periods"])
        t = periods > 0
        if t.any():
            throttled = _floats(rows["nr_throttled"])[t]
            out.update(
                n_throttling=int(t.sum()),
                throttled_trials=int((throttled > 0).sum()),
                median_throttled_share=_median(throttled / periods[t]),
            )
            secs = _floats(rows["throttled_s"])[t]
            if (~np.isnan(secs)).any():
                out["median_throttled_s"] = _median(secs)
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


def task_band(
    task_id: str,
    rows: pd.DataFrame,
    spec_memory_mb: int,
    spec_cpus: float,
    *,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    min_peaks: int = MIN_PEAKS,
    oracle: OracleCheck | None = None,
) -> TaskBand:
    """The band of one task from its trial rows (the store's trial frame, this task only).

    ``oracle``: the task's oracle check, where one ran (None: not run); it can name the spec too low.
    """
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

    chosen = _ceiling(band, rows[rows["config_label"] != "task-band"], spec_memory_mb, alpha, margin, oracle)
    if chosen is not None:
        mult = chosen.limit_multiplier
        if mult is None:
            raise ValueError(f"task {task_id}: the ceiling rule chose the unbounded configuration {chosen.label}")
        band.ceiling_label = chosen.label
        band.ceiling_limit_multiplier = mult
        band.ceiling_memory_mb = math.ceil(spec_memory_mb * mult)
        band.ceiling_cpus = round(spec_cpus * mult, 3)
    _cpu_floor(band, chosen, min_peaks)
    if len(peak) >= min_peaks:
        floor = max(1, math.ceil(band.peaks["p95_bytes"] / MIB))
        band.floor_memory_mb = min(floor, band.ceiling_memory_mb) if band.ceiling_memory_mb else floor
    if band.ceiling_memory_mb is not None and band.floor_memory_mb is not None:
        band.status = "recommended"
    return band


def _score_counts(passed: int, finished: int, trials: int, infra: int) -> tuple[int, int]:
    """(passes, out of) for the score tests: among finished trials; with none finished but infra errors, 0 of the
    trials (with only harness errors, 0 of 0: nothing to compare).

    The run-level rule scores a task the infrastructure let no trial finish at 0 on that side (its headline
    score), so a limit under which the task only then finishes is a change, never left out; the same here.
    """
    return (passed, finished) if finished else (0, trials if infra else 0)


def _two_sided_exact(x_a: int, n_a: int, x_b: int, n_b: int) -> float | None:
    """Two-sided exact conditional test (Fisher) of equal pass rates: the score-change test on one task."""
    if n_a == 0 or n_b == 0:
        return None
    if x_a + x_b in (0, n_a + n_b):
        return 1.0
    return min(1.0, float(stats.fisher_exact([[x_a, x_b], [n_a - x_a, n_b - x_b]]).pvalue))


def _tost(p_b: int, m_b: int, p_a: int, m_a: int, finished_both: bool, margin: float) -> float | None:
    """TOST of the pass rate within +-margin (statsmodels, score method); only when both sides finished."""
    if not finished_both:
        return None  # a side where nothing finished: equivalence cannot be shown (as at run level)
    with warnings.catch_warnings():  # statsmodels computes an odds ratio it does not use; 0/n divides by zero
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(tost_proportions_2indep(p_b, m_b, p_a, m_a, -margin, margin, method="score").pvalue)


def attempts_to_settle_task(rate: float, margin: float, alpha: float = ALPHA) -> int | None:
    """Attempts per configuration giving the task's TOST 80% power at a true change of 0 (normal approximation).

    A task that always passes (or always fails) gives the same table every time: then the smallest n at
    which n of n against n of n is shown within the margin by the TOST itself.
    """
    if rate in (0.0, 1.0):
        k = (lambda n: n) if rate == 1.0 else (lambda n: 0)

        def ok(n: int) -> bool:
            p = _tost(k(n), n, k(n), n, True, margin)
            return p is not None and p < alpha

        hi = 2
        while not ok(hi):
            hi *= 2
            if hi > MAX_PLANNED_ATTEMPTS:
                return None
        lo = hi // 2
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        return hi
    var = 2 * min(max(rate, 0.05), 0.95) * (1 - min(max(rate, 0.05), 0.95))
    n = (stats.norm.ppf(1 - alpha) + stats.norm.ppf(1 - (1 - POWER) / 2)) ** 2 * var / margin**2
    return None if n > MAX_PLANNED_ATTEMPTS else max(1, math.ceil(n))


def _counts(g: pd.DataFrame) -> tuple[int, int, int, int]:
    """(infra errors, trials, passes, finished trials the infrastructure let end) of one configuration."""
    # Counted from the column's values: a pandas comparison per outcome cost more than the tests it feeds.
    seen = Counter(g["outcome"].to_numpy(dtype=object).tolist())
    finished = sum(seen[o] for o in ("passed", "failed", "timeout", "abstained"))
    return seen["infra_error"], len(g), seen["passed"], finished


def _infra(x_a: int, n_a: int, x_b: int, n_b: int) -> tuple[float, str]:
    """The run level's stratified exact infra test with one stratum (this task): Fisher's exact, one-sided."""
    r = fewer_events([x_a], [n_a], [x_b], [n_b])
    return r.p, ("fisher_exact one-sided (the stratified exact test, one task)" if r.strata_used else r.method)


def _ceiling(
    band: TaskBand,
    rows: pd.DataFrame,
    spec_memory_mb: int,
    alpha: float,
    margin: float,
    oracle: OracleCheck | None,
) -> LimitTest | None:
    """The per-task calibration rule (module docstring); fills band.limits and band.reasons."""
    lim = rows["limit_multiplier"].astype(float)
    groups = sorted(
        rows.assign(_lim=lim.fillna(np.inf)).groupby(["config_label", "_lim", "request_multiplier"]),
        key=lambda kv: (kv[0][1], kv[0][2]),
    )
    bounded = [kv for kv in groups if np.isfinite(kv[0][1])]
    if not bounded:
        band.reasons.append("ceiling: no bounded limit was tested")
        return None
    unb = [g for (lab, m, _), g in groups if not np.isfinite(m)]
    if unb:
        band.unbounded_infra = wilson(*_counts(unb[0])[:2]).to_dict()
    (ref_label, ref_mult, ref_req), ref_rows = bounded[0]
    band.reference_label = str(ref_label)
    xr, nr, pr, mr = _counts(ref_rows)
    sr = _score_counts(pr, mr, nr, xr)
    cands = groups[groups.index(bounded[0]) + 1 :]
    tests: list[_Tested] = []
    for (label, mult, req), g in cands:
        x, n, p_, m = _counts(g)
        p, method = _infra(xr, nr, x, n)
        low, high = _diff_interval(x, n, xr, nr, alpha)
        sc = _score_counts(p_, m, n, x)
        tests.append(
            _Tested(
                LimitTest(
                    label=str(label),
                    limit_multiplier=float(mult) if np.isfinite(mult) else None,
                    request_multiplier=float(req),
                    infra=wilson(x, n).to_dict(),
                    test=method,
                    p=p,
                    diff=x / n - xr / nr,
                    diff_low=low,
                    diff_high=high,
                    significant=False,
                    within_margin=False,
                    within_noise=False,
                    score=wilson(p_, m).to_dict(),
                    score_p=_two_sided_exact(sr[0], sr[1], sc[0], sc[1]),
                    tost_p=_tost(p_, m, pr, mr, bool(m and mr), margin),
                    finished_only_here=bool(m and not mr),
                    cpu=_limit_cpu(g),
                ),
                x=x,
                n=n,
            )
        )
    objs = [t.test for t in tests]
    for o, ph in zip(objs, holm([o.p for o in objs])):
        o.p_holm = ph
        o.significant = bool(ph is not None and ph < alpha)
    for o, ph in zip(objs, holm([o.score_p for o in objs])):
        o.score_p_holm = ph
        # As at run level: a significant change that TOST shows inside the margin is too small to matter.
        o.score_changed = bool(ph is not None and ph < alpha and not (o.tost_p is not None and o.tost_p < alpha))
    for o in objs:
        o.within_margin = bool(o.tost_p is not None and o.tost_p < alpha)
    decision = decide(
        [o.significant for o in objs],
        [o.within_margin for o in objs],
        [o.score_changed for o in objs],
        [o.limit_multiplier is not None for o in objs],
        lambda i, j: _infra(tests[i].x, tests[i].n, tests[j].x, tests[j].n)[0],
        alpha,
    )
    for i, o in enumerate(objs):
        o.within_noise = decision.eligible(i, o.significant, o.within_margin, o.limit_multiplier is not None)
    ref_test = LimitTest(
        label=str(ref_label),
        limit_multiplier=float(ref_mult),
        request_multiplier=float(ref_req),
        infra=wilson(xr, nr).to_dict(),
        test="reference",
        p=1.0,
        diff=0.0,
        diff_low=None,
        diff_high=None,
        significant=False,
        within_margin=True,
        within_noise=False,
        score=wilson(pr, mr).to_dict(),
        cpu=_limit_cpu(ref_rows),
    )
    # Tested limits are the bounded ones (a ceiling is a number); unbounded's test is kept beside them as evidence.
    band.limits = [ref_test] + [o for o in objs if o.limit_multiplier is not None]
    band.unbounded_test = next((asdict(o) for o in objs if o.limit_multiplier is None), None)
    if oracle is not None and (oracle.passes_from is None or oracle.passes_from > float(ref_mult)):
        band.spec_too_low = (
            "its oracle fails at every limit tested"
            if oracle.passes_from is None
            else "its oracle passes only unbounded"
            if oracle.passes_from == float("inf")
            else f"its oracle fails below {oracle.passes_from:g}x"
        )
        band.reasons.append(f"spec too low: {band.spec_too_low}; raise the task's memory spec and calibrate again")
        return None
    if xr == 0 and all(t.x == 0 for t in tests):
        band.ceiling_reason = (
            f"no infra error in {nr + sum(t.n for t in tests)} trials at any limit: the strict limit suffices"
        )
        return ref_test
    if decision.chosen is not None:
        t = tests[decision.chosen]
        band.ceiling_reason = (
            f"infra errors {xr}/{nr} at {ref_label} -> {t.x}/{t.n} at {t.test.label} "
            f"(one-sided exact, Holm p {t.test.p_holm:.3g}); pass rate shown within ±{100 * margin:g} pts "
            f"(TOST p {t.test.tost_p:.3g})"
        )
        return t.test
    needs = _needs_more(tests, xr, nr, str(ref_label), alpha)
    if needs is not None:
        band.spec_too_low = needs
        band.reasons.append(f"spec too low: {needs}")
        return None
    band.reasons.append(
        _refusal(tests, decision.change_at, str(ref_label), xr, nr, pr, mr, band, spec_memory_mb, alpha, margin)
    )
    return None


def _needs_more(tests: list[_Tested], xr: int, nr: int, ref: str, alpha: float) -> str | None:
    """ "needs more than the largest limit tested": at the largest bounded limit the task is still killed
    significantly more often than without a limit, or -- with no unbounded arm -- on every trial."""
    top = next((t for t in reversed(tests) if t.test.limit_multiplier is not None), None)
    x, n, label = (top.x, top.n, top.test.label) if top is not None else (xr, nr, ref)
    if x == 0:
        return None
    unb = next((t for t in tests if t.test.limit_multiplier is None), None)
    if unb is not None:
        p = _infra(x, n, unb.x, unb.n)[0]
        if p < alpha:
            return (
                f"needs more than the largest limit tested: infra errors {x}/{n} at {label}, {unb.x}/{unb.n} "
                f"unbounded (one-sided exact p {p:.3g})"
            )
        return None
    if x == n:
        return f"needs more than the largest limit tested: every trial at {label} ended as an infra error ({x}/{n})"
    return None


def _refusal(
    tests: list[_Tested],
    change: int | None,
    ref: str,
    xr: int,
    nr: int,
    pr: int,
    mr: int,
    band: TaskBand,
    spec_memory_mb: int,
    alpha: float,
    margin: float,
) -> str:
    reduced = [t for t in tests if t.test.significant]
    top = band.peaks.get("max_bytes")
    hint = f" (largest peak seen: {top / (spec_memory_mb * MIB):.2f}x the spec)" if top else ""
    if reduced and change is not None and tests.index(reduced[0]) >= change:
        ch = tests[change].test
        where = (
            f"nothing finishes at {ref}, {100 * (ch.score['estimate'] or 0):.0f}% of finished trials pass at {ch.label}"
            if mr == 0
            else f"{100 * (ch.score['estimate'] or 0):.0f}% of finished trials pass at {ch.label}"
        )
        return (
            f"ceiling: the limits that remove its infra errors ({', '.join(t.test.label for t in reduced)}) also "
            f"change its score: {where} (exact Holm p {ch.score_p_holm:.3g}); with headroom the task is solved "
            f"another way, or its spec is too low (an oracle check at each limit tells which) -- publish such a "
            f"limit only if that strategy is intended{hint}"
        )
    bounded_reduced = [t for t in reduced if t.test.limit_multiplier is not None]
    if bounded_reduced:
        t = bounded_reduced[0]
        band.attempts_needed = attempts_to_settle_task(pr / mr if mr else 0.5, margin, alpha)
        return (
            f"ceiling: {t.test.label} removes its infra errors ({xr}/{nr} -> {t.x}/{t.n}, one-sided exact Holm p "
            f"{t.test.p_holm:.3g}) but its pass rate is not shown within ±{100 * margin:g} pts of {ref}'s (TOST p "
            + (f"{t.test.tost_p:.3g}" if t.test.tost_p is not None else "—; nothing finished on one side")
            + ")"
            + (
                f"; about {band.attempts_needed} attempts per configuration would settle it (TOST 80% power)"
                if band.attempts_needed
                else ""
            )
        )
    if reduced:  # only unbounded
        return f"ceiling: only unbounded removes its infra errors ({xr}/{nr} at {ref}); test higher limits{hint}"
    if xr == 0:
        worse = [f"{t.test.label} {t.x}/{t.n}" for t in tests if t.x]
        return (
            f"ceiling: no infra error at {ref} in {nr} trials but some above it ({', '.join(worse)}): "
            "no limit is shown to help; run more attempts"
        )
    best = min([t for t in tests if t.test.limit_multiplier is not None] or tests, key=lambda t: t.x / t.n)
    n_eff = power.n_effective_needed(xr / nr, min(best.x / best.n, xr / nr / 3), alpha=alpha / len(tests))
    band.attempts_needed = None if n_eff is None else math.ceil(n_eff)
    need = (
        ""
        if band.attempts_needed is None
        else f"; about {band.attempts_needed} attempts per configuration would settle it (80% power at the rates seen)"
    )
    return (
        f"ceiling: infra errors {xr}/{nr} at {ref} are not significantly fewer at any tested limit (best "
        f"{best.test.label} {best.x}/{best.n}, one-sided exact Holm p {best.test.p_holm:.3g}){need}"
    )


def _cpu_floor(band: TaskBand, chosen: LimitTest | None, min_peaks: int) -> None:
    """Measured when enough trials have a CPU time; else the spec x request multiplier (said so), given a ceiling."""
    n = band.cpu.get("n", 0)
    if n >= min_peaks:
        floor, capped = measured_cpu_floor(band.cpu["p95_cpus"], band.ceiling_cpus)
        band.floor_cpus = floor
        band.cpu_floor_source = (
            f"{CPU_MEASURED}: p95 of per-trial CPU use at {band.cpu['basis']} (n={n}), "
            f"rounded up to {CPU_STEP:g} cpu, at least {MIN_CPUS:g}"
            + (" -- capped at the CPU ceiling" if capped else "")
        )
        return
    why = "no CPU time measured" if n == 0 else f"only {n} CPU-time measurements, need {min_peaks}"
    band.cpu_floor_source = f"{CPU_FALLBACK} ({why})"
    if chosen is not None:
        band.floor_cpus = round(band.spec_cpus * chosen.request_multiplier, 3)


def task_bands(
    df: pd.DataFrame,
    specs: dict[str, dict[str, Any]],
    *,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    min_peaks: int = MIN_PEAKS,
    oracle: Mapping[str, OracleCheck] | None = None,
) -> list[TaskBand]:
    """Bands for every task of a run. ``specs`` maps task id to its ``[environment]`` (memory_mb, cpus);
    ``oracle`` maps a task id to its oracle check where one ran."""
    out = []
    for task_id, rows in df.groupby("task_id", sort=True):
        env = specs[str(task_id)]
        out.append(
            task_band(
                str(task_id),
                rows,
                int(env["memory_mb"]),
                float(env["cpus"]),
                alpha=alpha,
                margin=margin,
                min_peaks=min_peaks,
                oracle=(oracle or {}).get(str(task_id)),
            )
        )
    return out


def reserved_memory(bands: list[TaskBand], multiplier: float) -> dict[str, float]:
    """Memory a placement without overcommit sets aside for one trial of every task: sum of ceilings.

    Against the same sum under a uniform ``multiplier`` x spec, so a maintainer sees what the bands save.
    """
    band_total = sum(b.ceiling_memory_mb or 0 for b in bands if b.status == "recommended")
    uniform = sum(math.ceil(b.spec_memory_mb * multiplier) for b in bands if b.status == "recommended")
    return {
        "task_band_mb": float(band_total),
        f"uniform_{multiplier:g}x_mb": float(uniform),
        "ratio": band_total / uniform if uniform else float("nan"),
    }
