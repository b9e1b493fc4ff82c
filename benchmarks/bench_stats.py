"""Benchmark: full ``analyze`` over ~1,000,000 trial rows vs a per-row Python loop.

Run:  python benchmarks/bench_stats.py [--tasks 100] [--attempts 1667] [--seed 0]

Generates a seeded Terminal-Bench-like sweep (100 tasks x 6 configs x 1,667
attempts = 1,000,200 rows), times ``analyze`` (the whole report: intervals,
clustered SEs, pass@k/pass^k, spread, clusters, cost, per-task table, paired
tests with Holm, trends, MDD, calibration) and, as a baseline in the same run,
a plain per-row Python loop that computes only the per-config outcome counts
and pass / infra rates. Prints both times and their ratio. Timings are
reported, never asserted (tests do not use them as thresholds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.stats.analyze import analyze  # noqa: E402
from orchestrator.stats.synthetic import make_sweep  # noqa: E402


def _rates(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    out = {}
    for label, c in counts.items():
        n = sum(c.values())
        out[label] = {"n": n, "pass_rate": c.get("passed", 0) / n, "infra_rate": c.get("infra_error", 0) / n}
    return out


def baseline_itertuples(df) -> dict[str, dict[str, float]]:
    """The naive per-row loop (DataFrame.itertuples): per-config outcome counts and rates."""
    counts: dict[str, dict[str, int]] = {}
    for row in df.itertuples(index=False):
        c = counts.setdefault(row.config_label, {})
        c[row.outcome] = c.get(row.outcome, 0) + 1
    return _rates(counts)


def baseline_loop(df) -> dict[str, dict[str, float]]:
    """Fastest pure-Python per-row loop (over column lists): same counts and rates."""
    counts: dict[str, dict[str, int]] = {}
    for label, outcome in zip(df["config_label"].tolist(), df["outcome"].tolist()):
        c = counts.get(label)
        if c is None:
            c = counts[label] = {}
        c[outcome] = c.get(outcome, 0) + 1
    return _rates(counts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--attempts", type=int, default=1667)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    df = make_sweep(args.tasks, args.attempts, seed=args.seed)
    t_gen = time.perf_counter() - t0
    print(f"rows: {len(df):,}  (tasks={args.tasks}, configs=6, attempts={args.attempts}); generated in {t_gen:.2f} s")

    t0 = time.perf_counter()
    result = analyze(df)
    t_an = time.perf_counter() - t0
    json.dumps(result, allow_nan=False)

    t0 = time.perf_counter()
    base = baseline_loop(df)
    t_loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    base_it = baseline_itertuples(df)
    t_it = time.perf_counter() - t0

    # The baselines and analyze must agree on what they all compute.
    for cfg in result["configs"]:
        for b in (base[cfg["label"]], base_it[cfg["label"]]):
            assert b["n"] == cfg["n"] and abs(b["pass_rate"] - cfg["pass_rate"]["estimate"]) < 1e-12
            assert abs(b["infra_rate"] - cfg["infra_error_rate"]["estimate"]) < 1e-12

    print(f"analyze (full report)                         : {t_an:8.3f} s")
    print(f"baseline: per-row loop over column lists       : {t_loop:8.3f} s  (counts/rates only)")
    print(f"baseline: per-row loop with df.itertuples()     : {t_it:8.3f} s  (counts/rates only)")
    print(f"ratio analyze / column-list loop               : {t_an / t_loop:8.2f}x")
    print(f"ratio analyze / itertuples loop                : {t_an / t_it:8.2f}x")
    print(f"calibration: {result['calibration']['status']} -> {result['calibration'].get('recommended_label')}")


if __name__ == "__main__":
    main()
