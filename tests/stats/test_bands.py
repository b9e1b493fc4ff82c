"""Per-task bands: floor from peaks, ceiling from the infra test, refusals, patches the loader reads back."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.task import EnvironmentSpec
from orchestrator.stats.bands import MIB, _diff_interval, attempts_needed, reserved_memory, task_band, task_bands
from orchestrator.tasks.loader import load_task
from orchestrator.tasks.patch import patched_toml, unified_patch
from tests.taskfactory import write_task

LIMITS = {"1x-strict": 1.0, "1x/2x": 2.0, "1x/3x": 3.0, "unbounded": None}


def frame(task: str, n: int, oom_at: dict[str, int], peak_mb: float, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for label, lim in LIMITS.items():
        for a in range(n):
            oom = a < oom_at.get(label, 0)
            rows.append({"task_id": task, "config_label": label, "request_multiplier": 1.0,
                         "limit_multiplier": np.nan if lim is None else lim, "attempt": a,
                         "outcome": "infra_error" if oom else "passed", "reason": "oom_killed" if oom else None,
                         "peak_memory_bytes": peak_mb * MIB * rng.uniform(0.8, 1.0)})
    return pd.DataFrame(rows)


def test_heavy_task_gets_a_higher_ceiling_than_a_plain_one_and_a_floor_from_its_peaks() -> None:
    rng = np.random.default_rng(1)
    df = pd.concat([
        frame("plain", 30, {}, 20, rng),
        frame("heavy", 30, {"1x-strict": 30, "1x/2x": 12}, 90, rng),
    ])
    bands = {b.task_id: b for b in task_bands(df, {"plain": {"memory_mb": 32, "cpus": 1},
                                                   "heavy": {"memory_mb": 32, "cpus": 1}}, margin=0.15)}
    plain, heavy = bands["plain"], bands["heavy"]
    assert plain.status == heavy.status == "recommended"
    assert (plain.ceiling_label, plain.ceiling_memory_mb) == ("1x-strict", 32)
    assert (heavy.ceiling_label, heavy.ceiling_memory_mb, heavy.ceiling_cpus) == ("1x/3x", 96, 3.0)
    assert 16 <= plain.floor_memory_mb <= 20 and 72 <= heavy.floor_memory_mb <= 90  # p95 of the unbounded peaks
    chosen = next(lt for lt in heavy.limits if lt.label == "1x/3x")
    assert not chosen.significant and chosen.diff_high <= 0.15
    two = next(lt for lt in heavy.limits if lt.label == "1x/2x")
    assert two.significant and two.test.startswith("boschloo") and two.diff_low > 0
    assert heavy.peaks["n"] == 30 and heavy.peaks["max_bytes"] <= 90 * MIB
    res = reserved_memory(list(bands.values()), 3.0)
    assert res["task_band_mb"] == 32 + 96 and res["uniform_3x_mb"] == 96 + 96


def test_a_lucky_small_limit_below_one_that_showed_errors_is_not_published() -> None:
    df = frame("spiky", 30, {"1x/2x": 8}, 20, np.random.default_rng(2))  # 1x: no spike drawn; 2x: spikes
    band = task_band("spiky", df, 32, 1.0, margin=0.15)
    assert band.ceiling_label == "1x/3x"


def test_too_few_attempts_is_a_refusal_with_the_attempts_needed() -> None:
    band = task_band("t", frame("t", 6, {}, 20, np.random.default_rng(3)), 32, 1.0, margin=0.10)
    assert band.status == "refused" and band.ceiling_memory_mb is None
    assert band.attempts_needed is not None and band.attempts_needed > 6
    assert any("attempts per configuration" in r for r in band.reasons)
    # ... and that many attempts really would have been enough at these rates.
    enough = task_band("t", frame("t", band.attempts_needed, {}, 20, np.random.default_rng(3)), 32, 1.0, margin=0.10)
    assert enough.status == "recommended"


def test_every_limit_significantly_worse_says_test_higher_limits() -> None:
    df = frame("huge", 20, {"1x-strict": 20, "1x/2x": 20, "1x/3x": 20}, 200, np.random.default_rng(4))
    band = task_band("huge", df, 32, 1.0)
    assert band.status == "refused" and band.attempts_needed is None
    assert any("test higher limits" in r for r in band.reasons)


def test_no_unbounded_configuration_is_refused() -> None:
    df = frame("t", 20, {}, 20, np.random.default_rng(5))
    band = task_band("t", df[df["config_label"] != "unbounded"], 32, 1.0)
    assert band.status == "refused" and "no unbounded" in band.reasons[-1]
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
    band = task_band("heavy", frame("heavy", 30, {"1x-strict": 30, "1x/2x": 12}, 90, rng), 32, 1.0, margin=0.15)
    after = patched_toml(text, band, "from run X")
    assert "# maintainer's note" in after and "from run X" in after
    env = tomllib.loads(after)["environment"]
    assert (env["memory_mb"], env["memory_limit_mb"], env["cpus_limit"]) == (band.floor_memory_mb, 96, 3.0)
    assert unified_patch("heavy", text, after).startswith("--- a/heavy/task.toml\n+++ b/heavy/task.toml")
    (d / "task.toml").write_text(after)
    task = load_task(d)
    assert task.spec.environment.memory_limit_mb == 96
    from orchestrator.launch import trial_amounts
    from orchestrator.spec.trial import Trial

    amounts = trial_amounts(task, Trial(trial_id="x", task_id="heavy", config=ResourceConfig.parse("task-band"),
                                        attempt=0, seed=0, order=0))
    assert amounts.limit_memory_bytes == 96 * MIB and amounts.request_memory_bytes == band.floor_memory_mb * MIB


def test_ceiling_below_floor_and_harbor_size_spelling() -> None:
    with pytest.raises(ValueError, match="below memory_mb"):
        EnvironmentSpec(cpus=1, memory_mb=64, memory_limit_mb=32)
    assert EnvironmentSpec(cpus=1, memory="1G", memory_limit="2G").memory_limit_mb == 2048


def test_the_cli_shows_the_same_defaults_the_statistics_use() -> None:
    from orchestrator.commands import calibrate
    from orchestrator.stats import bands

    assert (calibrate.ALPHA, calibrate.MARGIN, calibrate.MIN_PEAKS) == (bands.ALPHA, bands.MARGIN, bands.MIN_PEAKS)


def test_a_task_band_arm_is_reported_but_is_no_point_on_the_multiplier_axis() -> None:
    from orchestrator.stats.analyze import analyze

    rng = np.random.default_rng(6)
    df = pd.concat([frame(f"t{i}", 4, {"1x-strict": 2}, 20, rng) for i in range(3)])
    band = df[df["config_label"] == "1x-strict"].assign(config_label="task-band", limit_multiplier=1.0,
                                                         outcome="passed", reason=None)
    out = analyze(pd.concat([df, band]).assign(cluster_id=lambda d: d["task_id"]))
    assert out["config_order"][-1] == "task-band"  # sorted after unbounded
    assert "task-band" not in [e["label"] for e in out["calibration"]["evidence"]]
    assert any(c["b"] == "task-band" for c in out["comparisons"]["items"])  # still compared with the reference
