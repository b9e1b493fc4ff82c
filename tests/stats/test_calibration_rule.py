"""The calibration rule (orchestrator.stats.calibration) on constructed sweeps: each branch of the decision.

Data are built trial by trial, so every expected figure follows from the counts, not from a seed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_paired

from orchestrator.stats.analyze import analyze as _analyze
from orchestrator.stats.calibration import MARGIN, attempts_to_settle
from tests.stats.conftest import frame_from_outcomes


def analyze(df: pd.DataFrame, **kw: object) -> dict:
    """The report's statistics; Fisher for the (unused here) two-sided infra comparisons keeps the tests fast."""
    return _analyze(df, boschloo_max_cells=0, **kw).to_dict()  # type: ignore[arg-type]


LIMITS = {"1x-strict": 1.0, "1x/1.5x": 1.5, "1x/3x": 3.0, "unbounded": np.inf}
N_TASKS = 12


def trials(infra: int, passed: int, failed: int) -> list[str]:
    return ["infra_error"] * infra + ["passed"] * passed + ["failed"] * failed


def sweep(per_config: dict[str, list[list[str]]]) -> pd.DataFrame:
    return pd.concat(
        [frame_from_outcomes(rows, config_label=lab, limit=LIMITS[lab]) for lab, rows in per_config.items()],
        ignore_index=True,
    )


def same(row: list[str]) -> list[list[str]]:
    return [list(row) for _ in range(N_TASKS)]


def wobble(infra: int, n: int, sign: int) -> list[list[str]]:
    """Tasks alternately one pass above and below half of the finished trials: scores noisy, mean unchanged."""
    rows = []
    for t in range(N_TASKS):
        left = n - infra
        p = left // 2 + (sign if t % 2 else -sign)
        rows.append(trials(infra, p, left - p))
    return rows


def test_no_infra_error_anywhere_the_strict_limit_suffices() -> None:
    cal = analyze(sweep({lab: same(trials(0, 6, 4)) for lab in LIMITS}))["calibration"]
    assert cal["status"] == "recommended" and cal["recommended_label"] == "1x-strict"
    assert cal["reasons"] == ["no infra error in any configuration: the strict limit suffices"]
    assert cal["summary"].startswith("publish 1x-strict: no infra error in any configuration")


def test_smallest_limit_that_removes_the_infra_errors_with_the_score_shown_unchanged() -> None:
    # 4 of 14 trials OOM-killed at 1x, none above; the agent passes 5 of 10 (1x) and 7 of 14 finished trials elsewhere.
    cal = analyze(
        sweep(
            {
                "1x-strict": same(trials(4, 5, 5)),
                "1x/1.5x": same(trials(0, 7, 7)),
                "1x/3x": same(trials(0, 7, 7)),
                "unbounded": same(trials(0, 7, 7)),
            }
        )
    )["calibration"]
    assert cal["recommended_label"] == "1x/1.5x" and cal["settled"] is True
    by = {e["label"]: e for e in cal["evidence"]}
    assert all(e["infra_reduced"] and e["equivalent"] and not e["score_changed"] for e in by.values())
    assert "shown not to change the score" in cal["summary"]
    assert not cal["infra_steps"] or all(s["p"] >= 0.05 for s in cal["infra_steps"])  # 3x removes nothing more


def test_holm_runs_over_the_candidates_infra_tests_only() -> None:
    cal = analyze(
        sweep(
            {
                "1x-strict": same(trials(3, 4, 3)),
                "1x/1.5x": same(trials(2, 4, 4)),
                "1x/3x": same(trials(1, 5, 4)),
                "unbounded": same(trials(0, 5, 5)),
            }
        )
    )["calibration"]
    raw = [e["infra_p"] for e in cal["evidence"]]
    assert len(raw) == 3
    assert [e["infra_p_holm"] for e in cal["evidence"]] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    # One-sided: each p is below 0.5 because each candidate has fewer infra errors than the reference.
    assert all(p < 0.5 for p in raw)


def test_unbounded_is_never_published_without_shown_equivalence() -> None:
    # Only unbounded removes infra errors; its agent score wobbles by +-1 pass per task: equivalence not shown.
    cal = analyze(
        sweep(
            {
                "1x-strict": wobble(3, 10, 1),
                "1x/1.5x": wobble(3, 10, 1),
                "1x/3x": wobble(3, 10, 1),
                "unbounded": wobble(0, 10, -2),
            }
        )
    )["calibration"]
    unb = cal["evidence"][-1]
    assert unb["infra_reduced"] and not unb["equivalent"] and not unb["score_changed"]
    assert cal["recommended_label"] == "1x-strict"
    assert "unbounded reduces infra errors but is not shown to leave the score unchanged" in cal["reasons"][0]
    assert cal["settled"] is False and "whether more memory changes the score is not settled" in cal["summary"]


def test_unsettled_equivalence_is_one_line_and_never_moves_the_recommendation_up() -> None:
    # 3x and unbounded remove the infra errors, but their scores wobble too much to be shown within ±4 points.
    cal = analyze(
        sweep(
            {
                "1x-strict": wobble(4, 10, 1),
                "1x/1.5x": wobble(4, 10, 1),
                "1x/3x": wobble(0, 10, -1),
                "unbounded": wobble(0, 10, 3),
            }
        )
    )["calibration"]
    by = {e["label"]: e for e in cal["evidence"]}
    assert by["1x/3x"]["infra_reduced"] and by["unbounded"]["infra_reduced"] and not by["1x/1.5x"]["infra_reduced"]
    assert not by["1x/3x"]["equivalent"] and not by["1x/3x"]["score_changed"]
    assert cal["recommended_label"] == "1x-strict"  # removing infra errors is not enough: the score must hold
    assert "1x/3x reduces infra errors but is not shown to leave the score unchanged" in cal["reasons"][0]
    line = cal["unsettled"]["line"]
    assert line.startswith("publish 1x-strict; whether more memory changes the score is not settled by this data: ±")
    assert "points at 95%" in line and "attempts per task would settle it" in line and "\n" not in line
    u = by["1x/3x"]  # the widest of the unsettled limits
    assert cal["unsettled"]["labels"] == ["1x/3x", "unbounded"]  # 1.5x is identical to 1x: shown unchanged
    assert cal["unsettled"]["half_width95"] == pytest.approx((u["score_diff_high95"] - u["score_diff_low95"]) / 2)
    # The attempts that would settle it follow from the paired SE: TOST 80% power at a true change of 0.
    d = np.array([((5 + (-1 if t % 2 else 1)) / 10) - ((3 + (1 if t % 2 else -1)) / 6) for t in range(N_TASKS)])
    se = d.std(ddof=1) / math.sqrt(N_TASKS)
    assert cal["unsettled"]["attempts_per_task_to_settle"] == attempts_to_settle(se, 10.0, MARGIN)  # 10 trials a side


def test_a_limit_at_or_above_a_score_change_is_not_published() -> None:
    # A heavy strategy: OOM-killed at 1x and 1.5x, it passes at 3x and above -- the agent score jumps there.
    heavy_low = [trials(5, 1, 4) if t % 2 else trials(4, 2, 4) for t in range(N_TASKS)]
    heavy_high = [trials(0, 9, 1) if t % 2 else trials(0, 8, 2) for t in range(N_TASKS)]
    cal = analyze(sweep({"1x-strict": heavy_low, "1x/1.5x": heavy_low, "1x/3x": heavy_high, "unbounded": heavy_high}))[
        "calibration"
    ]
    assert cal["score_changes_at_label"] == "1x/3x"
    assert cal["recommended_label"] == "1x-strict"
    assert "at or above 1x/3x the score changes" in cal["reasons"][0]
    assert "more headroom changes what is measured" in cal["summary"]


def close(infra: int, shift: int) -> list[list[str]]:
    """24 finished trials per task passing 12 + shift on odd tasks, 12 - shift on even ones: a score held within
    a point or two."""
    return [trials(infra, 12 + (shift if t % 2 else -shift), 12 - (shift if t % 2 else -shift)) for t in range(N_TASKS)]


def test_mdd_is_the_paired_mdd_of_the_score_test_applied() -> None:
    cal = analyze(
        sweep({"1x-strict": close(6, 0), "1x/1.5x": close(6, 0), "1x/3x": close(0, 1), "unbounded": wobble(0, 10, 3)})
    )["calibration"]
    assert cal["recommended_label"] == "1x/3x"
    e = {x["label"]: x for x in cal["evidence"]}["1x/3x"]
    d = np.array([1 / 24 if t % 2 else -1 / 24 for t in range(N_TASKS)])
    se = d.std(ddof=1) / math.sqrt(N_TASKS)
    want = (stats.t.ppf(1 - 0.05 / 3 / 2, N_TASKS - 1) + stats.t.ppf(0.8, N_TASKS - 1)) * se
    assert e["mdd"] == pytest.approx(want)
    assert e["score_change_p"] == pytest.approx(stats.ttest_1samp(d, 0).pvalue)
    assert cal["mdd_applied"]["config"] == "1x/3x" and cal["mdd_applied"]["mdd"] == pytest.approx(want)
    assert "paired MDD" in cal["mdd_applied"]["label"] and "cleared 1x/3x" in cal["mdd_applied"]["label"]


def test_the_mdd_shown_is_defined_when_the_strict_limit_is_published() -> None:
    """Publishing the reference applied the first candidate's score test (any step up had to pass it first)."""
    for per_config in (
        {lab: same(trials(0, 6, 4)) for lab in LIMITS},  # no infra error: the strict limit suffices
        {"1x-strict": wobble(4, 10, 1), "1x/1.5x": wobble(4, 10, -1), "1x/3x": wobble(0, 10, -1),
         "unbounded": wobble(0, 10, 3)},  # nothing shown equivalent
    ):  # fmt: skip
        cal = analyze(sweep(per_config))["calibration"]
        assert cal["recommended_label"] == "1x-strict"
        first = cal["evidence"][0]
        assert cal["mdd_applied"]["config"] == "1x/1.5x" and cal["mdd_applied"]["mdd"] == first["mdd"]
        assert cal["mdd_applied"]["mdd"] is not None
        assert "first step up (1x/1.5x)" in cal["mdd_applied"]["label"]


def test_the_margin_is_configurable_and_recorded() -> None:
    df = sweep(
        {
            "1x-strict": wobble(4, 10, 1),
            "1x/1.5x": wobble(4, 10, 1),
            "1x/3x": wobble(0, 10, -1),
            "unbounded": wobble(0, 10, 3),
        }
    )
    narrow, wide = analyze(df)["calibration"], analyze(df, margin=0.5)["calibration"]
    assert narrow["margin"] == MARGIN and wide["margin"] == 0.5
    assert not narrow["settled"] and wide["settled"]
    # Within ±50 points 3x's score is shown to hold, so it is published; within ±4 it is not.
    assert (narrow["recommended_label"], wide["recommended_label"]) == ("1x-strict", "1x/3x")


def test_removing_headroom_dependent_oom_kills_needs_shown_equivalence() -> None:
    """The demo's shape: spikes OOM-killed at 1x go at 1.5x; a heavy strategy OOM-killed up to 1.5x passes at 3x.
    3x has significantly fewer infra errors than 1.5x, but its score moved (not yet significantly): the rule stays
    at 1.5x and says the question is open, instead of walking into the limit that changes what is measured."""
    spike, heavy = range(0, 6), range(6, 8)  # tasks 8-11 are plain

    def rows(cfg: str) -> list[list[str]]:
        out = []
        for t in range(N_TASKS):
            if t in spike:
                out.append(trials(3, 5, 2) if cfg == "1x-strict" else trials(0, 7, 3))
            elif t in heavy:
                out.append(trials(5, 2, 3) if cfg in ("1x-strict", "1x/1.5x") else trials(0, 7, 3))
            else:
                out.append(trials(0, 6, 4))
        return out

    cal = analyze(sweep({lab: rows(lab) for lab in LIMITS}))["calibration"]
    by = {e["label"]: e for e in cal["evidence"]}
    assert by["1x/3x"]["infra_reduced"] and not by["1x/3x"]["score_changed"] and not by["1x/3x"]["equivalent"]
    assert by["1x/3x"]["score_diff_vs_reference"] > MARGIN
    assert cal["recommended_label"] == "1x/1.5x"
    assert cal["summary"].startswith("publish 1x/1.5x; whether more memory changes the score is not settled")


def test_tasks_oom_killed_at_every_bounded_limit_do_not_hide_the_others_reduction() -> None:
    """Six tasks have too low a spec: OOM-killed on every trial below unbounded. The twelve others lose their
    spikes at 1.5x with the score held. The six carry no weight in the infra test (their state does not change
    between 1x and 1.5x) and leave the score question only where they never finish on either side."""
    low = [trials(30, 0, 0)] * 6
    per_config = {
        "1x-strict": close(6, 0) + low,
        "1x/1.5x": close(0, 1) + low,
        "1x/3x": close(0, 1) + low,
        "unbounded": close(0, 1) + [trials(0, 27, 3)] * 6,
    }
    cal = analyze(sweep(per_config))["calibration"]
    by = {e["label"]: e for e in cal["evidence"]}
    assert by["1x/1.5x"]["infra_tasks_weighted"] == N_TASKS  # the six are not counted
    assert by["1x/1.5x"]["infra_reduced"] and by["1x/1.5x"]["equivalent"]
    assert by["1x/1.5x"]["n_tasks_paired"] == N_TASKS  # never finished on either side: no score to compare
    assert cal["recommended_label"] == "1x/1.5x"
    unb = by["unbounded"]
    assert unb["tasks_finished_only_here"] == 6 and not unb["equivalent"]
    assert unb["score_changed"] and cal["score_changes_at_label"] == "unbounded"  # 0 -> 90% on six of 18 tasks


def test_a_limit_is_never_equivalent_while_tasks_that_finish_only_there_are_left_out() -> None:
    """Three tasks take a heavy strategy: OOM-killed on every trial below 3x, passing 9 of 10 from 3x. On the
    twelve tasks that finish everywhere 3x is equivalent; with the three it is not, and it is not published."""
    heavy_low, heavy_high = [trials(10, 0, 0)] * 3, [trials(0, 9, 1)] * 3
    per_config = {
        "1x-strict": close(6, 0) + heavy_low,
        "1x/1.5x": close(0, 1) + heavy_low,
        "1x/3x": close(0, 1) + heavy_high,
        "unbounded": close(0, 1) + heavy_high,
    }
    cal = analyze(sweep(per_config))["calibration"]
    three = {e["label"]: e for e in cal["evidence"]}["1x/3x"]
    assert three["infra_reduced"] and three["tasks_finished_only_here"] == 3
    d_finished = np.array([1 / 24 if t % 2 else -1 / 24 for t in range(N_TASKS)])
    assert ttost_paired(d_finished, np.zeros(N_TASKS), -MARGIN, MARGIN)[0] < 0.05  # the twelve alone: equivalent
    assert not three["equivalent"] and three["tost_p"] >= 0.05
    assert cal["recommended_label"] == "1x/1.5x"
    assert "3 task(s) finish only here" in three["reading"]
