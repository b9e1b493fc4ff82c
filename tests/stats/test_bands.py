"""Per-task bands: floor from peaks, ceiling from the infra test, refusals, patches the loader reads back."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import EnvironmentSpec
from orchestrator.stats.bands import (
    CPU_STEP,
    MIB,
    MIN_CPUS,
    OracleCheck,
    _diff_interval,
    attempts_needed,
    measured_cpu_floor,
    reserved_memory,
    task_band,
    task_bands,
)
from orchestrator.tasks.loader import load_task
from orchestrator.tasks.patch import patched_toml, unified_patch
from tests.taskfactory import write_task

LIMITS = {"1x-strict": 1.0, "1x/2x": 2.0, "1x/3x": 3.0, "unbounded": None}


def frame(
    task: str,
    n: int,
    oom_at: dict[str, int],
    peak_mb: float,
    rng: np.random.Generator,
    cpus_used: float | None = None,
    spec_cpus: float = 1.0,
) -> pd.DataFrame:
    """Trial rows as the store gives them; with ``cpus_used``, the CPU columns calibrate joins on (see store.cpu).

    A trial is throttled for half its periods where its limit (``spec_cpus`` x the multiplier) is below its use.
    """
    rows = []
    for label, lim in LIMITS.items():
        for a in range(n):
            oom = a < oom_at.get(label, 0)
            row = {
                "task_id": task,
                "config_label": label,
                "request_multiplier": 1.0,
                "limit_multiplier": np.nan if lim is None else lim,
                "attempt": a,
                "outcome": "infra_error" if oom else "passed",
                "reason": "oom_killed" if oom else None,
                "peak_memory_bytes": peak_mb * MIB * rng.uniform(0.8, 1.0),
            }
            if cpus_used is not None:
                busy = rng.uniform(5, 50)  # the agent's and verifier's wall time, s
                bites = lim is not None and lim * spec_cpus < cpus_used
                row.update(
                    enforcement="cgroup-v2",
                    busy_s=busy,
                    cpu_time_s=busy * cpus_used * rng.uniform(0.7, 1.0),
                    nr_periods=busy * 10,
                    nr_throttled=busy * 5 if bites else 0.0,
                    throttled_s=busy / 2 if bites else 0.0,
                )
            rows.append(row)
    return pd.DataFrame(rows)


def test_heavy_task_gets_a_higher_ceiling_than_a_plain_one_and_a_floor_from_its_peaks() -> None:
    rng = np.random.default_rng(1)
    df = pd.concat(
        [
            frame("plain", 30, {}, 20, rng),
            frame("heavy", 30, {"1x-strict": 10, "1x/2x": 6}, 90, rng),
        ]
    )
    bands = {
        b.task_id: b
        for b in task_bands(
            df, {"plain": {"memory_mb": 32, "cpus": 1}, "heavy": {"memory_mb": 32, "cpus": 1}}, margin=0.3
        )
    }
    plain, heavy = bands["plain"], bands["heavy"]
    assert plain.status == heavy.status == "recommended"
    assert (plain.ceiling_label, plain.ceiling_memory_mb) == ("1x-strict", 32)
    assert (heavy.ceiling_label, heavy.ceiling_memory_mb, heavy.ceiling_cpus) == ("1x/3x", 96, 3.0)
    assert 16 <= plain.floor_memory_mb <= 20 and 72 <= heavy.floor_memory_mb <= 90  # p95 of the unbounded peaks
    # Each limit against the strict one, by the run level's tests with one task: 2x's 6/30 are not significantly
    # fewer than 10/30 (Fisher one-sided, Holm over the three limits); 3x's 0/30 are, and its pass rate is held.
    chosen = next(lt for lt in heavy.limits if lt.label == "1x/3x")
    want = stats.fisher_exact([[10, 0], [20, 30]], alternative="greater").pvalue
    assert chosen.p == pytest.approx(want) and chosen.significant and chosen.within_margin and chosen.within_noise
    two = next(lt for lt in heavy.limits if lt.label == "1x/2x")
    assert not two.significant and two.test.startswith("fisher_exact one-sided") and two.diff_high > 0
    assert heavy.ceiling_reason.startswith("infra errors 10/30 at 1x-strict -> 0/30 at 1x/3x")
    assert plain.ceiling_reason == "no infra error in 120 trials at any limit: the strict limit suffices"
    assert heavy.peaks["n"] == 30 and heavy.peaks["max_bytes"] <= 90 * MIB
    res = reserved_memory(list(bands.values()), 3.0)
    assert res["task_band_mb"] == 32 + 96 and res["uniform_3x_mb"] == 96 + 96


def test_a_lucky_strict_limit_below_one_that_showed_errors_is_not_published() -> None:
    df = frame("spiky", 30, {"1x/2x": 8}, 20, np.random.default_rng(2))  # 1x: no spike drawn; 2x: spikes
    band = task_band("spiky", df, 32, 1.0, margin=0.15)
    assert band.status == "refused" and band.ceiling_label is None
    assert "no infra error at 1x-strict in 30 trials but some above it (1x/2x 8/30)" in band.reasons[-1]


def test_too_few_attempts_is_a_refusal_with_the_attempts_needed() -> None:
    band = task_band("t", frame("t", 6, {"1x-strict": 2}, 20, np.random.default_rng(3)), 32, 1.0, margin=0.10)
    assert band.status == "refused" and band.ceiling_memory_mb is None
    assert band.attempts_needed is not None and band.attempts_needed > 6
    assert "infra errors 2/6 at 1x-strict are not significantly fewer at any tested limit" in band.reasons[-1]
    assert "attempts per configuration would settle it" in band.reasons[-1]
    # ... and, at the same rates (a third OOM-killed at 1x, none above), twice that many (the figure is the 80%-power
    # point of a normal approximation; the exact test is conservative) show the reduction; with a margin this many
    # attempts can settle (every finished trial passes), 2x is published.
    n = 2 * band.attempts_needed
    rows = frame("t", n, {"1x-strict": round(n / 3)}, 20, np.random.default_rng(3))
    enough = task_band("t", rows, 32, 1.0, margin=0.10)
    assert next(lt for lt in enough.limits if lt.label == "1x/2x").significant
    assert enough.status == "refused" and "not shown within ±10 pts" in enough.reasons[-1]
    wide = task_band("t", rows, 32, 1.0, margin=0.3)
    assert wide.status == "recommended" and wide.ceiling_label == "1x/2x"


def test_a_limit_that_removes_infra_errors_but_changes_the_score_is_not_published() -> None:
    rows = frame("heavy", 20, {"1x-strict": 10, "1x/2x": 10}, 20, np.random.default_rng(8))
    low = rows["limit_multiplier"].fillna(99) <= 2
    rows.loc[low & (rows["outcome"] == "passed"), "outcome"] = "failed"  # the lean strategy fails where it fits
    band = task_band("heavy", rows, 32, 1.0)
    assert band.status == "refused"
    assert "also change its score" in band.reasons[-1] and "100% of finished trials pass at 1x/3x" in band.reasons[-1]


def test_a_task_killed_at_every_bounded_limit_needs_more_than_the_largest_limit_tested() -> None:
    df = frame("huge", 20, {"1x-strict": 20, "1x/2x": 20, "1x/3x": 20}, 200, np.random.default_rng(4))
    band = task_band("huge", df, 32, 1.0)
    assert band.status == "refused" and band.attempts_needed is None
    assert band.spec_too_low is not None
    assert band.spec_too_low.startswith("needs more than the largest limit tested: infra errors 20/20 at 1x/3x")
    assert band.reasons[-1] == f"spec too low: {band.spec_too_low}"
    # Without an unbounded arm: every trial at the largest limit killed says the same.
    capped = task_band("huge", df[df["config_label"] != "unbounded"], 32, 1.0)
    assert capped.spec_too_low == (
        "needs more than the largest limit tested: every trial at 1x/3x ended as an infra error (20/20)"
    )


def test_an_oracle_that_fails_below_a_limit_names_the_spec_too_low() -> None:
    """The hook for the oracle check: where it ran, an oracle passing only from 3x means the task's own solution
    needs more than its spec, whatever the agent's trials show."""
    df = frame("t", 30, {"1x-strict": 10}, 20, np.random.default_rng(5))
    band = task_band("t", df, 32, 1.0, margin=0.3, oracle=OracleCheck(passes_from=3.0))
    assert band.status == "refused" and band.spec_too_low == "its oracle fails below 3x"
    assert "spec too low: its oracle fails below 3x" in band.reasons[-1]
    never = task_band("t", df, 32, 1.0, margin=0.3, oracle=OracleCheck(passes_from=None))
    assert never.spec_too_low == "its oracle fails at every limit tested"
    fine = task_band("t", df, 32, 1.0, margin=0.3, oracle=OracleCheck(passes_from=1.0))
    assert fine.status == "recommended" and fine.spec_too_low is None
    assert task_band("t", df, 32, 1.0, margin=0.3).ceiling_label == fine.ceiling_label  # no check: no verdict


def test_no_unbounded_configuration_is_not_needed() -> None:
    df = frame("t", 20, {}, 20, np.random.default_rng(5))
    band = task_band("t", df[df["config_label"] != "unbounded"], 32, 1.0)  # unbounded is evidence, never a ceiling
    assert band.status == "recommended" and band.ceiling_label == "1x-strict" and band.unbounded_infra is None
    assert band.peaks["basis"].startswith("highest tested limit")


def test_attempts_needed_is_none_when_the_rates_differ_by_more_than_the_margin() -> None:
    assert attempts_needed(0.3, 0.0, 0.1) is None
    n = attempts_needed(0.0, 0.0, 0.1)
    assert n is not None
    assert _diff_interval(0, n, 0, n, 0.05)[1] <= 0.1 < _diff_interval(0, n - 1, 0, n - 1, 0.05)[1]


def test_patch_round_trips_through_the_loader_and_a_task_band_uses_it(tasks_root: Path) -> None:
    d = write_task(tasks_root, "heavy", solve="true\n", memory_mb=32, extra_toml="# maintainer's note\n")
    text = (d / "task.toml").read_text()
    rng = np.random.default_rng(1)
    band = task_band("heavy", frame("heavy", 30, {"1x-strict": 10, "1x/2x": 6}, 90, rng), 32, 1.0, margin=0.3)
    after = patched_toml(text, band, "from run X")
    assert "# maintainer's note" in after and "from run X" in after
    env = tomllib.loads(after)["environment"]
    assert (env["memory_mb"], env["memory_limit_mb"], env["cpus_limit"]) == (band.floor_memory_mb, 96, 3.0)
    assert unified_patch("heavy", text, after).startswith("--- a/heavy/task.toml\n+++ b/heavy/task.toml")
    (d / "task.toml").write_text(after)
    task = load_task(d)
    assert task.spec.environment.memory_limit_mb == 96
    from orchestrator.engine.launch import trial_amounts
    from orchestrator.spec.trial import Trial

    amounts = trial_amounts(
        task, Trial(trial_id="x", task_id="heavy", config=ResourceConfig.parse("task-band"), attempt=0, seed=0, order=0)
    )
    assert amounts.limit_memory_bytes == 96 * MIB and amounts.request_memory_bytes == band.floor_memory_mb * MIB


def test_ceiling_below_floor_and_harbor_size_spelling() -> None:
    with pytest.raises(ValueError, match="below memory_mb"):
        EnvironmentSpec(cpus=1, memory_mb=64, memory_limit_mb=32)
    assert EnvironmentSpec(cpus=1, memory="1G", memory_limit="2G").memory_limit_mb == 2048


def test_the_cli_shows_the_same_defaults_the_statistics_use() -> None:
    from orchestrator.commands.runs import calibrate
    from orchestrator.stats import bands

    assert (calibrate.ALPHA, calibrate.MARGIN, calibrate.MIN_PEAKS) == (bands.ALPHA, bands.MARGIN, bands.MIN_PEAKS)


def test_a_task_band_arm_is_reported_but_is_no_point_on_the_multiplier_axis() -> None:
    from orchestrator.stats.analyze import analyze

    rng = np.random.default_rng(6)
    df = pd.concat([frame(f"t{i}", 4, {"1x-strict": 2}, 20, rng) for i in range(3)])
    band = df[df["config_label"] == "1x-strict"].assign(
        config_label="task-band", limit_multiplier=1.0, outcome="passed", reason=None
    )
    out = analyze(pd.concat([df, band]).assign(cluster_id=lambda d: d["task_id"])).to_dict()
    assert out["config_order"][-1] == "task-band"  # sorted after unbounded
    assert "task-band" not in [e["label"] for e in out["calibration"]["evidence"]]
    assert any(c["b"] == "task-band" for c in out["comparisons"]["items"])  # still compared with the reference


def test_a_cpu_hungry_task_gets_a_higher_measured_cpu_floor_than_an_idle_one() -> None:
    rng = np.random.default_rng(7)
    df = pd.concat(
        [
            frame("hungry", 30, {"1x-strict": 10, "1x/2x": 6}, 90, rng, cpus_used=1.7),
            frame("idle", 30, {}, 20, rng, cpus_used=0.02),
        ]
    )
    # An OOM-killed trial at the generous limits is left out, as for the memory floor: its counters stop at the kill.
    df.loc[
        (df["task_id"] == "hungry") & (df["config_label"] == "unbounded") & (df["attempt"] == 0),
        ["outcome", "reason", "cpu_time_s"],
    ] = ["infra_error", "oom_killed", 1e6]
    bands = {
        b.task_id: b
        for b in task_bands(
            df, {"hungry": {"memory_mb": 32, "cpus": 1}, "idle": {"memory_mb": 32, "cpus": 1}}, margin=0.3
        )
    }
    hungry, idle = bands["hungry"], bands["idle"]
    assert hungry.status == idle.status == "recommended" and (hungry.ceiling_cpus, idle.ceiling_cpus) == (3.0, 1.0)
    assert hungry.cpu_floor_source.startswith("measured") and idle.cpu_floor_source.startswith("measured")
    # The evidence is the per-trial CPU time over the steps' time, of the unbounded trials not OOM-killed.
    unb = df[(df["task_id"] == "hungry") & (df["config_label"] == "unbounded") & (df["outcome"] != "infra_error")]
    use = (unb["cpu_time_s"] / unb["busy_s"]).to_numpy()
    assert hungry.cpu["n"] == 29 and hungry.cpu["enforcement"] == {"cgroup-v2": 29}
    assert hungry.cpu["p95_cpus"] == pytest.approx(np.quantile(use, 0.95))
    assert hungry.cpu["max_cpus"] == pytest.approx(use.max()) and use.max() < 1.7
    # p95 rounded up to the 0.05-cpu step; the idle task sits at the minimum.
    assert hungry.floor_cpus == pytest.approx(math.ceil(hungry.cpu["p95_cpus"] / CPU_STEP) * CPU_STEP)
    assert 1.2 <= hungry.floor_cpus <= 1.7 and idle.floor_cpus == MIN_CPUS < hungry.floor_cpus
    # Throttling per tested limit: the 1-cpu quota bites the hungry task, its 2-cpu one does not, nor any the idle one.
    cpu = {(b, lt.label): lt.cpu for b in bands for lt in bands[b].limits}
    assert cpu["hungry", "1x-strict"]["throttled_trials"] == 30
    assert cpu["hungry", "1x-strict"]["median_throttled_share"] == 0.5
    assert cpu["hungry", "1x/2x"]["throttled_trials"] == 0 and cpu["hungry", "1x/2x"]["n_throttling"] == 30
    assert cpu["idle", "1x-strict"]["throttled_trials"] == 0 and cpu["idle", "1x-strict"]["median_cpus"] < 0.02


def test_no_cpu_time_falls_back_to_the_spec_and_says_so() -> None:
    rng = np.random.default_rng(8)
    band = task_band("t", frame("t", 30, {}, 20, rng), 32, 1.5, margin=0.15)  # no CPU columns at all
    assert band.status == "recommended" and band.floor_cpus == 1.5
    assert band.cpu_floor_source == "spec x request multiplier (no CPU time measured)" and band.cpu["n"] == 0
    # A backend that records no CPU time (the Kubernetes one) leaves the column empty: the same fallback.
    df = frame("t", 30, {}, 20, rng, cpus_used=1.0).assign(cpu_time_s=np.nan)
    band = task_band("t", df, 32, 1.5, margin=0.15)
    assert band.floor_cpus == 1.5 and band.cpu_floor_source.endswith("(no CPU time measured)")
    assert band.cpu["not_measured"] == 30 and band.limits[0].cpu.get("n_use") is None
    # Too few measured trials: the fallback names how many there were.
    df = frame("t", 30, {}, 20, rng, cpus_used=0.3)
    df.loc[df["attempt"] >= 3, "cpu_time_s"] = np.nan
    band = task_band("t", df, 32, 1.5, margin=0.15)
    assert band.floor_cpus == 1.5 and band.cpu_floor_source.endswith("(only 3 CPU-time measurements, need 5)")


def test_a_measured_cpu_floor_is_capped_at_the_ceiling_and_the_loader_accepts_the_patch(tasks_root: Path) -> None:
    rng = np.random.default_rng(9)
    df = frame("busy", 30, {}, 20, rng, cpus_used=2.5)  # unbounded, it takes 2.5 cpus; no limit shows infra errors
    band = task_band("busy", df, 32, 1.0, margin=0.15)
    assert band.ceiling_label == "1x-strict" and band.ceiling_cpus == 1.0
    assert band.cpu["p95_cpus"] > 1.0 and band.floor_cpus == 1.0
    assert band.cpu_floor_source.endswith("capped at the CPU ceiling")
    d = write_task(tasks_root, "busy", solve="true\n", memory_mb=32)
    (d / "task.toml").write_text(patched_toml((d / "task.toml").read_text(), band, "from run X"))
    env = load_task(d).spec.environment
    assert (env.cpus, env.cpus_limit) == (1.0, 1.0)


def test_measured_cpu_floor_rounding() -> None:
    assert measured_cpu_floor(0.1 + 0.2, None) == (0.3, False)  # 0.30000000000000004 is not rounded up to 0.35
    assert measured_cpu_floor(0.301, None) == (0.35, False)
    assert measured_cpu_floor(0.001, None) == (MIN_CPUS, False)
    assert measured_cpu_floor(0.7, 0.5) == (0.5, True)


def test_throttling_counters_read_from_every_backend_spelling() -> None:
    from orchestrator.store.cpu import throttling

    assert throttling({"nr_periods": 10, "nr_throttled": 4, "throttled_usec": 2_000_000}) == (10, 4, 2.0)  # cgroup v2
    assert throttling({"nr_periods": 10, "nr_throttled": 4, "throttled_time": 3 * 10**9}) == (10, 4, 3.0)  # cgroup v1
    assert throttling('{"periods": 8, "throttled_periods": 1, "throttled_time": 5e8}') == (8, 1, 0.5)  # Docker stats
    assert throttling({}) == throttling(None) == (None, None, None)


def test_the_attempts_that_settle_a_task_that_always_passes_are_where_its_tost_first_passes() -> None:
    from statsmodels.stats.proportion import tost_proportions_2indep

    from orchestrator.stats.bands import attempts_to_settle_task

    n = attempts_to_settle_task(1.0, 0.04)
    assert n is not None

    def tost(m: int) -> float:
        return float(tost_proportions_2indep(m, m, m, m, -0.04, 0.04, method="score").pvalue)

    assert tost(n) < 0.05 <= tost(n - 1)
