"""Seeded synthetic sweeps in the trial-row data contract.

WHY here: tests and the benchmark need realistic frames with *planted* effects
(a known infra-rate decline, a known score jump) to check that the statistics
find what is there and nothing else. Generation is fully vectorised so a
million rows take well under a second. Not used by production code paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class PlantedConfig:
    label: str
    request_multiplier: float
    limit_multiplier: float  # NaN = unbounded
    infra_rate: float
    pass_shift: float = 0.0  # added to every task's pass probability


#: Resembles the Terminal-Bench 2.0 GKE study: infra 5.8% -> 2.1% (3x) -> 0.5%
#: (unbounded); the agent's success flat up to 3x, +6 points unbounded.
TERMINAL_BENCH_LIKE: tuple[PlantedConfig, ...] = (
    PlantedConfig("1x-strict", 1.0, 1.0, 0.058),
    PlantedConfig("1x/1.5x", 1.0, 1.5, 0.045),
    PlantedConfig("1x/2x", 1.0, 2.0, 0.032),
    PlantedConfig("1x/3x", 1.0, 3.0, 0.021),
    PlantedConfig("1x/5x", 1.0, 5.0, 0.012, 0.02),
    PlantedConfig("unbounded", 1.0, float("nan"), 0.005, 0.06),
)


def make_sweep(
    n_tasks: int,
    attempts: int,
    configs: tuple[PlantedConfig, ...] = TERMINAL_BENCH_LIKE,
    seed: int = 0,
    task_ability: tuple[float, float] = (2.0, 2.0),
    tasks_per_cluster: int = 3,
    task_seed: int | None = None,
    infra_weight: np.ndarray | None = None,
    oom_below: dict[int, float] | None = None,
    ability_of: dict[int, float] | None = None,
) -> pd.DataFrame:
    """Trial rows: n_tasks x len(configs) x attempts, seeded.

    Each task gets an ability p_t ~ Beta(*task_ability) (heterogeneous tasks,
    so attempts are clustered). An infra error strikes with probability
    ``infra_rate`` whatever the trial would have done (a transient memory spike
    does not care whether the agent was on track); otherwise the trial passes
    with probability clip(p_t + shift_c). So the infra-excluded pass rate is
    p_t + shift_c and the headline is (p_t + shift_c)(1 - infra_rate). Other
    failures split failed/timeout/harness.
    Task properties (ability, memory) come from ``task_seed`` (default: ``seed``)
    so two runs can share tasks but differ in trial draws.

    Heterogeneous tasks: ``infra_weight`` (one factor per task, mean 1 keeps the planted rates on
    average) scales each task's infra rate; ``oom_below`` maps a task index to the limit multiplier
    below which every one of its trials is OOM-killed (unbounded counts as infinite); ``ability_of``
    overrides a task's ability (a heavy strategy that passes where it may finish).
    """
    rng = np.random.default_rng(seed)
    trng = np.random.default_rng(seed if task_seed is None else task_seed)
    c_n = len(configs)
    ability = trng.beta(*task_ability, size=n_tasks)
    for t_i, a in (ability_of or {}).items():
        ability[t_i] = a
    base_mem = trng.uniform(0.5e9, 4e9, size=n_tasks)
    total = n_tasks * c_n * attempts
    cfg = np.repeat(np.arange(c_n), n_tasks * attempts)
    task = np.tile(np.repeat(np.arange(n_tasks), attempts), c_n)
    att = np.tile(np.arange(attempts), n_tasks * c_n)
    shift = np.array([c.pass_shift for c in configs])[cfg]
    q = np.array([c.infra_rate for c in configs])[cfg]
    if infra_weight is not None:
        q = np.clip(q * np.asarray(infra_weight, float)[task], 0.0, 1.0)
    lim_inf = np.array([c.limit_multiplier for c in configs], float)
    lim_inf = np.where(np.isnan(lim_inf), np.inf, lim_inf)[cfg]
    for t_i, below in (oom_below or {}).items():
        q = np.where((task == t_i) & (lim_inf < below), 1.0, q)
    p = np.clip(ability[task] + shift, 0.0, 1.0)
    u = rng.random(total)
    v = rng.random(total)
    w = rng.random(total)
    outcome_code = np.where(w < q, 3, np.where(u < p, 0, np.where(v < 0.85, 1, np.where(v < 0.99, 2, 4))))
    outcomes = np.array(["passed", "failed", "timeout", "infra_error", "harness_error"], dtype=object)
    reasons = np.where(
        outcome_code == 3, np.where((rng.random(total) < 0.85) | (q >= 1.0), "oom_killed", "evicted"), None
    )  # type: ignore[call-overload]  # numpy's stubs reject a None fill; object arrays take it
    lim_mult = np.array([c.limit_multiplier for c in configs])[cfg]
    peak = base_mem[task] * rng.lognormal(0.0, 0.3, size=total)
    names = np.array([f"task-{i:04d}" for i in range(n_tasks)], dtype=object)
    clusters = np.array([f"cluster-{i // tasks_per_cluster:04d}" for i in range(n_tasks)], dtype=object)
    dur = rng.gamma(4.0, 30.0, size=total)
    cost = np.where(rng.random(total) < 0.98, rng.gamma(2.0, 0.01, size=total), np.nan)
    return pd.DataFrame(
        {
            "task_id": names[task],
            "config_label": np.array([c.label for c in configs], dtype=object)[cfg],
            "request_multiplier": np.array([c.request_multiplier for c in configs])[cfg],
            "limit_multiplier": lim_mult,
            "attempt": att,
            "outcome": outcomes[outcome_code],
            "reason": reasons,
            "cluster_id": clusters[task],
            "duration_s": dur,
            "cost_usd": cost,
            "tokens_in": rng.integers(1_000, 50_000, size=total).astype(float),
            "tokens_out": rng.integers(100, 5_000, size=total).astype(float),
            "peak_memory_bytes": peak,
            "memory_limit_bytes": base_mem[task] * lim_mult,
        }
    )
