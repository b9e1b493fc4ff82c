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

from orchestrator.report import document, markdown  # noqa: E402
from orchestrator.stats.analyze import analyze  # noqa: E402
from orchestrator.stats.synthetic import make_sweep  # noqa: E402
from orchestrator.store.sqlite import Store  # noqa: E402


def write_store(df, path: Path) -> Store:
    """Load the frame into a real headroom store, as a finished run would leave it (not timed)."""
    store = Store(path)
    db = store.db
    run_id = "bench"
    db.execute("BEGIN")
    db.execute("INSERT INTO runs (run_id, name, created_at, finished_at, status, backend, enforcement, spec_json, owner)"
               " VALUES (?,?,?,?,?,?,?,?,?)", (run_id, "bench", "2026-01-01T00:00:00", None, "finished",
                                                                "local", "cgroup-v1", "{}", None))
    db.execute("INSERT INTO provenance VALUES (?, '{}')", (run_id,))
    tasks = df.drop_duplicates("task_id")[["task_id", "cluster_id"]]
    db.executemany("INSERT INTO tasks VALUES (?,?,?,?,?)",
                   [(run_id, t, "0" * 64, c, "{}") for t, c in tasks.itertuples(index=False)])
    ids = [f"{t}:{c}:{a}" for t, c, a in zip(df["task_id"], df["config_label"], df["attempt"])]
    lim = [None if v != v else v for v in df["limit_multiplier"].tolist()]
    db.executemany("INSERT INTO trials VALUES (?,?,?,?,?,?,?,?,?)",
                   zip([run_id] * len(df), ids, df["task_id"], df["config_label"], df["request_multiplier"], lim,
                       df["attempt"], [0] * len(df), range(len(df))))
    none = lambda col: [None if v != v else v for v in df[col].tolist()]  # noqa: E731
    db.executemany(
        "INSERT INTO executions (run_id, trial_id, try, status, final, started_at, outcome, reason, enforcement, qos_class,"
        " duration_s, cost_usd, tokens_in, tokens_out, peak_memory_bytes, limit_memory_bytes)"
        " VALUES (?,?,0,'finished',1,'2026-01-01',?,?,'cgroup-v1','Burstable',?,?,?,?,?,?)",
        zip([run_id] * len(df), ids, df["outcome"], df["reason"], df["duration_s"], none("cost_usd"), none("tokens_in"),
            none("tokens_out"), none("peak_memory_bytes"), none("memory_limit_bytes")))
    db.execute("COMMIT")
    return store


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
    ap.add_argument("--store", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the whole `headroom report` path from a SQLite store")
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

    if args.store:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            store = write_store(df, Path(tmp) / "bench.db")
            t0 = time.perf_counter()
            doc = document.build(store, "bench")
            text = markdown.render(doc)
            t_rep = time.perf_counter() - t0
            assert sum(c["n"] for c in doc["configurations"]) == len(df) and "## Metrics" in text
            print(f"store -> report document -> Markdown         : {t_rep:8.3f} s  ({t_rep / t_loop:.1f}x the column-list loop)")


if __name__ == "__main__":
    main()
