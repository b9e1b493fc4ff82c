"""``compare_runs`` on runs whose task sets and configurations differ: every figure on the shared part only.

The expected numbers are computed here independently, from the raw rows with pandas and scipy
(filter to shared tasks and labels, count, Wilson via binomtest, paired t via ttest_rel), not
through orchestrator.stats.aggregate.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from orchestrator.errors import NothingToCompare
from orchestrator.stats.analyze import compare_runs as compare_model
from orchestrator.stats.paired import task_paired
from tests.stats.conftest import frame_from_outcomes


def compare_runs(a: pd.DataFrame, b: pd.DataFrame, **kw: Any) -> dict[str, Any]:
    """``compare_runs``' result as ``headroom runs compare --format json`` publishes it (its model's JSON dump)."""
    return compare_model(a, b, **kw).to_dict()


OUTCOMES = ["passed", "failed", "infra_error", "timeout"]


def _run(
    rng: np.random.Generator,
    tasks: list[int],
    labels: dict[str, tuple[float, float]],
    p: list[float],
    attempts: int = 4,
) -> pd.DataFrame:
    frames = []
    for lab, (req, lim) in labels.items():
        outs = [[str(rng.choice(OUTCOMES, p=p)) for _ in range(attempts)] for _ in tasks]
        f = frame_from_outcomes(outs, config_label=lab, request=req, limit=lim)
        f["task_id"] = f["task_id"].map(lambda t: f"t{tasks[int(t[1:])]:03d}")  # real ids, not positions
        f["cluster_id"] = f["task_id"]
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def _wilson(k: int, n: int) -> tuple[float, float, float]:
    ci = stats.binomtest(k, n).proportion_ci(method="wilson")
    return k / n, ci.low, ci.high


def test_differing_task_sets_use_shared_tasks_and_labels_only() -> None:
    rng = np.random.default_rng(20261201)
    # A holds tasks 0-11, B holds 4-15 (8 shared); each run has one configuration the other lacks.
    a = _run(rng, list(range(0, 12)), {"1x-strict": (1, 1), "unbounded": (1, np.inf)}, [0.5, 0.3, 0.15, 0.05])
    b = _run(rng, list(range(4, 16)), {"1x-strict": (1, 1), "1x/2x": (1, 2)}, [0.7, 0.2, 0.05, 0.05])
    res = compare_runs(a, b, name_a="A", name_b="B")
    json.dumps(res, allow_nan=False)

    shared = sorted(set(a.task_id) & set(b.task_id))
    assert len(shared) == 8 and res["shared_tasks"] == 8
    assert res["tasks_only_in"] == {"A": [f"t{i:03d}" for i in range(4)], "B": [f"t{i:03d}" for i in range(12, 16)]}
    (comp,) = res["comparisons"]["items"]  # only the shared label is compared
    assert (comp["a"], comp["b"], comp["n_tasks"]) == ("A:1x-strict", "B:1x-strict", 8)

    sa = a[(a.config_label == "1x-strict") & a.task_id.isin(shared)]
    sb = b[(b.config_label == "1x-strict") & b.task_id.isin(shared)]
    for side, rows in (("a", sa), ("b", sb)):
        est, low, high = _wilson(int((rows.outcome == "passed").sum()), len(rows))
        got = comp["score"][side]
        assert (
            got["estimate"] == pytest.approx(est)
            and got["low"] == pytest.approx(low)
            and got["high"] == pytest.approx(high)
        )
    diff = (sb.outcome == "passed").mean() - (sa.outcome == "passed").mean()
    assert comp["score"]["diff"] == pytest.approx(diff)
    # The per-task mean difference and its paired t-test, tasks matched by id.
    ra = sa.assign(p=sa.outcome == "passed").groupby("task_id")["p"].mean()
    rb = sb.assign(p=sb.outcome == "passed").groupby("task_id")["p"].mean().reindex(ra.index)
    paired = comp["score"]["paired"]
    assert paired["n_tasks"] == 8
    assert paired["mean_task_diff"] == pytest.approx(float((rb - ra).mean()))
    assert paired["t_p"] == pytest.approx(float(stats.ttest_rel(rb, ra).pvalue))
    # Infra-error rates on the shared tasks.
    assert comp["infra"]["x_a"] == int((sa.outcome == "infra_error").sum()) and comp["infra"]["n_a"] == len(sa)
    assert comp["infra"]["x_b"] == int((sb.outcome == "infra_error").sum()) and comp["infra"]["n_b"] == len(sb)
    # The per-run blocks beside the comparison are on the shared tasks too; n_trials keeps the whole run.
    block_a = {c["label"]: c for c in res["runs"]["A"]["configs"]}["1x-strict"]
    assert block_a["n"] == len(sa) and block_a["score_infra_as_failure"]["estimate"] == pytest.approx(
        comp["score"]["a"]["estimate"]
    )
    assert res["runs"]["A"]["n_trials"] == len(a) and res["runs"]["A"]["n_trials_shared_tasks"] == int(
        a.task_id.isin(shared).sum()
    )


def test_task_missing_from_one_configuration_is_left_out_of_that_pair() -> None:
    # Finding #1: A's extra task used to be written onto B's last task. Same rates on the shared task -> diff 0.
    a = pd.concat([frame_from_outcomes([["passed"] * 3, ["infra_error"] * 3], task_prefix="t")], ignore_index=True)
    a["task_id"] = a["task_id"].map({"t000": "prime-count", "t001": "word-index"})
    b = frame_from_outcomes([["passed"] * 3], task_prefix="t")
    b["task_id"] = "prime-count"
    (comp,) = compare_runs(a, b)["comparisons"]["items"]
    assert comp["score"]["diff"] == 0 and comp["infra"]["rate_a"] == 0 and comp["infra"]["rate_b"] == 0


def test_nothing_shared_raises() -> None:
    a = frame_from_outcomes([["passed"] * 2] * 2, task_prefix="a")
    b = frame_from_outcomes([["passed"] * 2] * 2, task_prefix="b")
    with pytest.raises(NothingToCompare, match="share no task"):
        compare_runs(a, b)
    two = pd.concat(
        [
            frame_from_outcomes([["passed"]] * 2, config_label=lab, limit=lim)
            for lab, lim in (("1x-strict", 1.0), ("unbounded", np.inf))
        ],
        ignore_index=True,
    )
    other = pd.concat(
        [
            frame_from_outcomes([["passed"]] * 2, config_label=lab, limit=lim)
            for lab, lim in (("1x/2x", 2.0), ("1x/3x", 3.0))
        ],
        ignore_index=True,
    )
    with pytest.raises(NothingToCompare, match="share no configuration"):
        compare_runs(two, other)


def test_per_task_interval_stays_within_plus_minus_one() -> None:
    # The demo case of finding #12: 2 tasks, per-task differences 0 and 1/3 -> raw t interval [-1.951, +2.284].
    d = np.array([0.0, 1 / 3])
    ref = stats.ttest_1samp(d, 0.0).confidence_interval()
    assert (ref.low, ref.high) == pytest.approx((-1.9510, 2.2843), abs=1e-4)
    tp = task_paired(np.array([3, 2]), np.array([3, 3]), np.array([3, 3]), np.array([3, 3]))
    assert (tp.mean_task_diff_low, tp.mean_task_diff_high, tp.mean_task_diff_clipped) == (-1.0, 1.0, True)
    # Where the t interval fits, it is scipy's, unchanged.
    rng = np.random.default_rng(3)
    pa, pb = rng.integers(0, 6, 30), rng.integers(0, 6, 30)
    tp = task_paired(pa, np.full(30, 5), pb, np.full(30, 5))
    ref = stats.ttest_1samp(pb / 5 - pa / 5, 0.0).confidence_interval()
    assert (tp.mean_task_diff_low, tp.mean_task_diff_high) == pytest.approx((ref.low, ref.high))
    assert not tp.mean_task_diff_clipped
    for seed in range(200):  # never outside the possible range, whatever the data
        g = np.random.default_rng(seed)
        t = int(g.integers(2, 6))
        n = g.integers(1, 4, t)
        tp = task_paired(g.integers(0, n + 1), n, g.integers(0, n + 1), n)
        if tp.mean_task_diff_low is not None:
            assert -1.0 <= tp.mean_task_diff_low <= tp.mean_task_diff_high <= 1.0
