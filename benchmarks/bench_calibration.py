"""Benchmark: operating characteristics of the calibration recommendation and of the small-sample statistics.

Run:  python benchmarks/bench_calibration.py [--seeds 200] [--small-seeds 400] [--scenario NAME]

Part 1 feeds seeded synthetic sweeps (orchestrator.stats.synthetic.make_sweep: task abilities
~ Beta(2, 2), infra errors striking at the planted rate, planted score shifts, and per-task
heterogeneity) through the calibration rule exactly as ``analyze`` wires it (aggregate ->
per-configuration blocks -> ``calibration.recommend`` with the default margin). Configurations
1x/1.5x/3x/unbounded; "tb" = infra 5.8/4.5/2.1/0.5%, score flat to 3x, +6 points unbounded.

* null          89 x 5, infra 5% everywhere, no score change
* no-oom        89 x 5, no infra error anywhere
* tb-89x5/x20   the Terminal-Bench-like sweep
* demo-like     10 x 10, infra 20/12/4/2/1% at 1x/1.5x/2x/3x/unbounded, score +0/+0/+1/+9/+10
* spec-low      tb, and 6 of 89 tasks OOM-killed on every attempt below unbounded      (89x5, 89x20)
* concentrated  tb, with every infra error on 15 of 89 tasks (same total rate)         (89x5, 89x20)
* changer-3x    3x itself changes the score (+6 points) while removing infra errors    (89x5, 89x20)
* heavy         tb spikes, no score shift, but 5 tasks killed on every attempt below 3x that pass
                90% from 3x: 3x changes the score through tasks that finish only there (89x5, 89x20)

Per scenario: "changer", the share of seeds publishing a limit that changes the score (target:
under 5% everywhere); "removes", the share publishing a limit that removes infra errors without
changing the score; "power limit", the share in which the rule's own tests make such a limit
eligible (infra reduced and score shown equivalent) -- the reference "removes" is held to; and
"infra power", the share in which the stratified infra test alone shows the reduction.

Part 2, at 10 tasks x 3 attempts x 5 configurations under the null (30% pass, 10% infra, no effect):
the size of the clustered trend test (permutation p, also with unequal cells, and the sandwich p it
replaced), the size of the stratified infra test (also with task rates that differ), the coverage of
the paired bootstrap interval (expanded percentile, and the plain percentile it replaced) and of the
headline intervals for the rate on NEW tasks (task-clustered t vs Wilson).

Monte Carlo error of a share near 5% over 400 seeds is about +-1.1 points; near 50% over 200,
+-3.5. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.stats import calibration  # noqa: E402
from orchestrator.stats.aggregate import PASSED, aggregate  # noqa: E402
from orchestrator.stats.analyze import _config_block  # noqa: E402
from orchestrator.stats.clustered import new_tasks_interval  # noqa: E402
from orchestrator.stats.paired import BOOTSTRAP_RESAMPLES, expanded_level, task_paired  # noqa: E402
from orchestrator.stats.proportions import wilson  # noqa: E402
from orchestrator.stats.stratified import fewer_events  # noqa: E402
from orchestrator.stats.synthetic import PlantedConfig, make_sweep  # noqa: E402
from orchestrator.stats.trend import clustered_trend  # noqa: E402

NAN = float("nan")


def tb(scale: float = 1.0) -> tuple[PlantedConfig, ...]:
    return (
        PlantedConfig("1x-strict", 1, 1, 0.058),
        PlantedConfig("1x/1.5x", 1, 1.5, 0.045),
        PlantedConfig("1x/3x", 1, 3, 0.021),
        PlantedConfig("unbounded", 1, NAN, 0.005, 0.06),
    )


def flat_tb() -> tuple[PlantedConfig, ...]:
    """Terminal-Bench-like spikes, and no limit changes the score."""
    return tuple(PlantedConfig(c.label, 1, c.limit_multiplier, c.infra_rate) for c in tb())


def flat(infra: float) -> tuple[PlantedConfig, ...]:
    return (
        PlantedConfig("1x-strict", 1, 1, infra),
        PlantedConfig("1x/1.5x", 1, 1.5, infra),
        PlantedConfig("1x/3x", 1, 3, infra),
        PlantedConfig("unbounded", 1, NAN, infra),
    )


DEMO_LIKE = (
    PlantedConfig("1x-strict", 1, 1, 0.20),
    PlantedConfig("1x/1.5x", 1, 1.5, 0.12),
    PlantedConfig("1x/2x", 1, 2, 0.04),
    PlantedConfig("1x/3x", 1, 3, 0.02, 0.09),
    PlantedConfig("unbounded", 1, NAN, 0.01, 0.10),
)

#: 3x itself changes the score (+6 points, beyond the 4-point margin) while removing infra errors.
CHANGER_3X = (
    PlantedConfig("1x-strict", 1, 1, 0.058),
    PlantedConfig("1x/1.5x", 1, 1.5, 0.045),
    PlantedConfig("1x/3x", 1, 3, 0.021, 0.06),
    PlantedConfig("unbounded", 1, NAN, 0.005, 0.06),
)

INF = float("inf")
SPEC_LOW = {t: INF for t in range(6)}  # 6 of 89 tasks OOM-killed on every attempt below unbounded
HEAVY = {t: 3.0 for t in range(5)}  # 5 tasks take a heavy strategy: killed below 3x, pass 90% from 3x
CONCENTRATED = np.r_[np.full(15, 89 / 15), np.zeros(74)]  # all infra errors on 15 tasks, same total rate


def _kw(**kw: object) -> dict[str, object]:
    return kw


# name, tasks, attempts, configs, generator keywords, the labels that remove infra errors without changing the
# score (the right answers above the strict limit), the labels that change the score (never to be published)
SCENARIOS = [
    ("null", 89, 5, flat(0.05), _kw(), (), ()),
    ("no-oom", 89, 5, flat(0.0), _kw(), (), ()),
    ("tb-89x5", 89, 5, tb(), _kw(), ("1x/1.5x", "1x/3x"), ("unbounded",)),
    ("tb-89x20", 89, 20, tb(), _kw(), ("1x/1.5x", "1x/3x"), ("unbounded",)),
    ("demo-like", 10, 10, DEMO_LIKE, _kw(), ("1x/1.5x", "1x/2x"), ("1x/3x", "unbounded")),
]
for _design in (5, 20):
    SCENARIOS += [
        ("spec-low", 89, _design, tb(), _kw(oom_below=SPEC_LOW), ("1x/1.5x", "1x/3x"), ("unbounded",)),
        ("concentrated", 89, _design, tb(), _kw(infra_weight=CONCENTRATED), ("1x/1.5x", "1x/3x"), ("unbounded",)),
        ("changer-3x", 89, _design, CHANGER_3X, _kw(), ("1x/1.5x",), ("1x/3x", "unbounded")),
        (
            "heavy",
            89,
            _design,
            flat_tb(),
            _kw(oom_below=HEAVY, ability_of=dict.fromkeys(HEAVY, 0.9)),
            ("1x/1.5x",),
            ("1x/3x", "unbounded"),
        ),
    ]


def recommend(df, margin: float) -> dict:
    agg = aggregate(df)
    blocks = [_config_block(agg, c) for c in range(agg.n_configs)]
    return calibration.recommend(blocks, 0, agg.counts, margin=margin)


def part1(seeds: int, margin: float, only: str | None) -> None:
    print(f"Part 1: share of seeds per recommendation ({seeds} seeds, margin ±{100 * margin:g} pts)")
    print(
        "removes: a limit that removes infra errors without changing the score is published; power limit: the "
        "share of seeds in which the rule's own tests make such a limit eligible (infra reduced, Holm, and "
        "score shown equivalent, TOST) -- what the data can carry; infra power: the share in which the stratified "
        "infra test alone shows such a limit's reduction (Holm)"
    )
    print(
        f"{'scenario':<13} {'design':>7} {'changer':>8} {'removes':>8} {'power limit':>11} {'infra power':>11} "
        f"{'strict':>7} "
        f"{'settled':>7}  recommendations"
    )
    for name, tasks, att, cfgs, kw, good, bad in SCENARIOS:
        if only and only not in name:
            continue
        t0 = time.perf_counter()
        recs: Counter[str] = Counter()
        settled = capable = infra_power = 0
        for s in range(seeds):
            r = recommend(make_sweep(tasks, att, cfgs, seed=1000 + s, **kw), margin)  # type: ignore[arg-type]
            recs[r["recommended_label"] or r["status"]] += 1
            settled += bool(r["settled"])
            capable += any(
                e["label"] in good and e["infra_reduced"] and e["equivalent"] and not e["score_changed"]
                for e in r["evidence"]
            )
            infra_power += any(e["label"] in good and e["infra_reduced"] for e in r["evidence"])
        share = {k: v / seeds for k, v in recs.items()}
        bad_share = sum(share.get(b, 0) for b in bad)
        good_share = sum(share.get(g, 0) for g in good)
        print(
            f"{name:<13} {tasks:>3}x{att:<3} {100 * bad_share:>7.1f}% "
            + (
                f"{100 * good_share:>7.1f}% {100 * capable / seeds:>10.1f}% {100 * infra_power / seeds:>10.1f}% "
                if good
                else f"{'—':>8} {'—':>11} {'—':>11} "
            )
            + f"{100 * share.get('1x-strict', 0):>6.1f}% {100 * settled / seeds:>6.1f}%  "
            + ", ".join(f"{k} {100 * v:.1f}%" for k, v in sorted(share.items(), key=lambda kv: -kv[1]))
            + f"   ({time.perf_counter() - t0:.0f} s)"
        )


def part2(seeds: int) -> None:
    tasks, att = 10, 3
    cfgs = tuple(PlantedConfig(f"c{i}", 1, float(i + 1), 0.10) for i in range(5))
    rej: Counter[tuple[str, str]] = Counter()
    cover: Counter[str] = Counter()
    for s in range(seeds):
        rng = np.random.default_rng(50_000 + s)
        # Null: every configuration the same; tasks' abilities ~ Beta(1.2, 2.8) (mean 0.3), new each seed.
        df = make_sweep(tasks, att, cfgs, seed=50_000 + s, task_ability=(1.2, 2.8))
        agg = aggregate(df)
        cnt = agg.counts
        n = cnt.sum(axis=2)
        rank = np.repeat(np.arange(5), tasks)
        task = np.tile(np.arange(tasks), 5)
        for name, col in (("pass", PASSED), ("infra", 3)):
            tr = clustered_trend(cnt[:, :, col].ravel(), n.ravel(), rank, task)
            for kind, p in (("permutation", tr.p), ("sandwich", tr.p_sandwich)):
                rej[(name, kind)] += p is not None and p < 0.05
        # The same trend tests with unequal cells: each trial kept with probability 0.6 (an interrupted run).
        kept = aggregate(df[rng.random(len(df)) < 0.6])
        if kept.n_tasks == tasks:
            kc, kn = kept.counts, kept.counts.sum(axis=2)
            for name, col in (("pass", PASSED), ("infra", 3)):
                tr = clustered_trend(kc[:, :, col].ravel(), kn.ravel(), rank, task)
                rej[(name, "permutation, unequal cells")] += tr.p is not None and tr.p < 0.05
        # The infra test of the calibration (one-sided, exact, stratified by task), config 0 vs 1, at 10 tasks; and
        # with the tasks' infra rates differing (Gamma(0.5) weights, mean 1), the null still "no limit effect".
        rej[("infra", "stratified exact")] += fewer_events(cnt[0, :, 3], n[0], cnt[1, :, 3], n[1]).p < 0.05
        het = aggregate(
            make_sweep(
                tasks, att, cfgs, seed=50_000 + s, task_ability=(1.2, 2.8), infra_weight=rng.gamma(0.5, 2.0, tasks)
            )
        )
        hc, hn = het.counts, het.counts.sum(axis=2)
        rej[("infra", "stratified exact, task rates differ")] += (
            fewer_events(hc[0, :, 3], hn[0], hc[1, :, 3], hn[1]).p < 0.05
        )
        # Paired: config 0 vs 1, true mean per-task difference 0.
        tp = task_paired(cnt[0, :, PASSED], n[0], cnt[1, :, PASSED], n[1])
        if tp.bootstrap_low is not None and tp.bootstrap_high is not None:  # both, or neither
            cover["bootstrap expanded"] += tp.bootstrap_low <= 0 <= tp.bootstrap_high
            d = cnt[1, :, PASSED] / n[1] - cnt[0, :, PASSED] / n[0]
            plain = stats.bootstrap(
                (d,),
                np.mean,
                n_resamples=BOOTSTRAP_RESAMPLES,
                confidence_level=0.95,
                method="percentile",
                random_state=rng,
            )
            cover["bootstrap plain percentile"] += plain.confidence_interval.low <= 0 <= plain.confidence_interval.high
            cover["t interval"] += (tp.mean_task_diff_low or 0) <= 0 <= (tp.mean_task_diff_high or 0)
        # Headline for new tasks: the population rate is E[ability] x (1 - infra) = 0.3 x 0.9.
        truth = 0.3 * 0.9
        k0, n0 = cnt[0, :, PASSED], n[0]
        nt = new_tasks_interval(k0, n0)
        cover["headline new-tasks (clustered t)"] += nt["low"] <= truth <= nt["high"]
        w = wilson(int(k0.sum()), int(n0.sum()))
        assert w.low is not None and w.high is not None  # 30 trials: the interval is never empty
        cover["headline Wilson (these tasks) read as new tasks"] += w.low <= truth <= w.high
    print(
        f"\nPart 2: 10 tasks x 3 attempts x 5 configurations under the null, {seeds} seeds "
        f"(expanded bootstrap level at 10 tasks: {100 * expanded_level(10):.2f}%)"
    )
    for (name, kind), v in sorted(rej.items()):
        what = "infra test size" if kind.startswith("stratified") else "trend test size"
        print(f"  {what}, {name:<5} {kind:<36}: {100 * v / seeds:5.1f}%  (nominal 5%)")
    for k, v in cover.items():
        print(f"  coverage, {k:<47}: {100 * v / seeds:5.1f}%  (nominal 95%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200, help="seeds per calibration scenario")
    ap.add_argument("--small-seeds", type=int, default=400, help="seeds for the 10-task size/coverage part")
    ap.add_argument(
        "--margin",
        type=float,
        default=calibration.MARGIN,
        help="equivalence margin as a fraction, as `report --margin` takes it (0.04 = 4 points)",
    )
    ap.add_argument("--only", choices=["1", "2"], help="run one part only")
    ap.add_argument("--scenario", help="part 1: only the scenarios whose name contains this")
    a = ap.parse_args()
    if not 0 < a.margin <= 1:
        ap.error(f"--margin is a fraction in (0, 1] (0.04 = 4 points), not {a.margin:g}")
    gc.freeze()  # statsmodels' multipletests calls gc.collect(); a frozen heap keeps that cheap
    t0 = time.perf_counter()
    if a.only in (None, "1"):
        part1(a.seeds, a.margin, a.scenario)
    if a.only in (None, "2"):
        part2(a.small_seeds)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
