"""Named scoring rules on frames written by hand: each figure checked against a computation done here."""

from __future__ import annotations

import json
import math
from math import comb

import numpy as np
import pandas as pd
import pytest

from orchestrator.importers.outcomes import HARBOR_EXCEPTIONS, TB_FAILURE_MODES, harbor_verdict, tb_verdict
from orchestrator.stats import scoring_rules as sr


def frame(rows: list[dict]) -> pd.DataFrame:
    base = {"config_label": "c", "attempt": 0, "reason": None, "reward": np.nan}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_terminal_bench_2_rule_matches_the_leaderboard_query_by_hand() -> None:
    """Harbor trials: task x keeps 4 (rewards 1, 0, 1 after an agent timeout, a verifier timeout without one);
    task y keeps 2 (0, 1) and leaves out a trial with an exception."""
    rows = [
        ("x", {"reward": 1}, None),
        ("x", {"reward": 0}, None),
        ("x", {"reward": 1}, "AgentTimeoutError"),
        ("x", None, "VerifierTimeoutError"),
        ("y", {"reward": 0}, None),
        ("y", {"score": 1}, None),
        ("y", {"reward": 1}, "RewardFileEmptyError"),
    ]
    df = frame(
        [
            {
                "task_id": t,
                "outcome": "passed",
                "source_kind": "harbor",
                "h_rewards": json.dumps(r) if r else None,
                "h_exception": e,
                "source_run": "job",
            }
            for t, r, e in rows
        ]
    )
    out = sr.evaluate(df, [sr.TB2_OFFICIAL])["configs"]["c"][sr.TB2_OFFICIAL]
    # rewards["reward"] or 0: x -> 1, 0, 1, 0 (p = 1/2, n = 4); y -> 0, 0 ({"score": 1} has no "reward") (p = 0, n = 2)
    p, n = np.array([0.5, 0.0]), np.array([4, 2])
    assert out["estimate"] == pytest.approx(p.mean(), abs=1e-15)
    assert out["stderr"] == pytest.approx(math.sqrt(np.sum(p * (1 - p) / (n - 1))) / 2, abs=1e-15)
    assert out["ci95"] == pytest.approx(1.96 * out["stderr"], abs=1e-15)
    assert out["excluded_by"] == {"RewardFileEmptyError": 1} and out["n_trials"] == 6


def test_terminal_bench_2_has_no_stderr_when_a_task_has_one_counted_trial() -> None:
    df = frame(
        [
            {"task_id": "x", "outcome": "passed", "reward": 1.0},
            {"task_id": "x", "outcome": "failed", "reward": 0.0},
            {"task_id": "y", "outcome": "passed", "reward": 1.0},
            {"task_id": "y", "outcome": "infra_error", "reason": "oom_killed"},
        ]
    )
    out = sr.evaluate(df, [sr.TB2_OFFICIAL])["configs"]["c"][sr.TB2_OFFICIAL]
    assert out["estimate"] == pytest.approx((0.5 + 1.0) / 2) and out["stderr"] is None
    assert "single counted trial" in out["stderr_note"]
    assert out["excluded_by"] == {"infra_error(oom_killed)": 1}  # a trial headroom ran: its own error, left out


def test_leaderboard_rule_is_the_mean_of_run_accuracies_with_the_se_over_runs() -> None:
    runs = {"r1": [True, False, False, False, False], "r2": [True, True, False, False], "r3": [True, True, True]}
    df = frame(
        [
            {
                "task_id": f"t{i}",
                "outcome": "passed" if ok else "failed",
                "source_kind": "terminal-bench",
                "tb_resolved": ok,
                "tb_mode": "unset",
                "source_run": r,
            }
            for r, oks in runs.items()
            for i, ok in enumerate(oks)
        ]
    )
    out = sr.evaluate(df, [sr.TB_LEADERBOARD])["configs"]["c"][sr.TB_LEADERBOARD]
    accs = [1 / 5, 2 / 4, 3 / 3]  # run accuracies differ in size: the mean of runs, not the pooled 6/12
    assert out["estimate"] == pytest.approx(np.mean(accs), abs=1e-15) and out["estimate"] != pytest.approx(6 / 12)
    assert out["stderr"] == pytest.approx(np.std(accs, ddof=1) / math.sqrt(3), abs=1e-15)
    assert out["run_basis"] == "source runs" and [r["accuracy"] for r in out["per_run"]] == pytest.approx(accs)


def test_leaderboard_pass_at_k_is_terminal_bench_s_estimator() -> None:
    # One task: 5 attempts, 2 resolved; another: 5 attempts, 0; another with 3 attempts (only in pass@2).
    oks = {"a": [1, 0, 1, 0, 0], "b": [0] * 5, "c": [1, 0, 0]}
    df = frame(
        [
            {
                "task_id": t,
                "outcome": "failed",
                "source_kind": "terminal-bench",
                "tb_resolved": bool(v),
                "tb_mode": "unset",
                "source_run": "run",
            }
            for t, vs in oks.items()
            for v in vs
        ]
    )
    out = sr.evaluate(df, [sr.TB_LEADERBOARD])["configs"]["c"][sr.TB_LEADERBOARD]

    def by_hand(k: int) -> float:
        vals = [1 - comb(len(v) - sum(v), k) / comb(len(v), k) for v in oks.values() if len(v) >= k]
        return sum(vals) / len(vals)

    assert sr.tb_k_values(5) == [2, 4, 5] and sr.tb_k_values(10) == [2, 4, 5, 8, 10] and sr.tb_k_values(1) == []
    assert out["pass_at_k"] == {
        "2": pytest.approx(by_hand(2)),
        "4": pytest.approx(by_hand(4)),
        "5": pytest.approx(by_hand(5)),
    }
    assert out["per_run"][0]["pass_at_k"] == {"2": pytest.approx(by_hand(2))}  # within the run: k up to its fewest (3)


def test_harbor_mean_and_pass_at_k_by_hand() -> None:
    rewards = {"a": [1.0, 1.0, 0.0], "b": [0.0, None, 1.0, 0.0]}
    df = frame(
        [
            {
                "task_id": t,
                "outcome": "failed",
                "source_kind": "harbor",
                "reward": r,
                "h_rewards": json.dumps({"reward": r}) if r is not None else None,
                "source_run": "job",
            }
            for t, rs in rewards.items()
            for r in rs
        ]
    )
    out = sr.evaluate(df, [sr.HARBOR_MEAN])["configs"]["c"][sr.HARBOR_MEAN]
    assert out["estimate"] == pytest.approx(3 / 7)  # a missing reward counts 0
    # k = 2 (fewest trials per task 3): a: n=3 c=2 -> 1; b: n=4 c=1 -> 1 - C(3,2)/C(4,2) = 1/2
    assert out["pass_at_k"] == {"2": pytest.approx(0.75)}
    assert sr.harbor_k_values(10) == [2, 4, 5, 8, 10]


def test_headroom_rules_label_what_their_intervals_generalise_to() -> None:
    df = frame(
        [
            {"task_id": f"t{i % 4}", "outcome": o}
            for i, o in enumerate(
                ["passed", "failed", "infra_error", "passed", "timeout", "passed", "harness_error", "failed"]
            )
        ]
    )
    out = sr.evaluate(df, [sr.HEADROOM_FAIL, sr.HEADROOM_EXCL])
    fail, excl = out["configs"]["c"][sr.HEADROOM_FAIL], out["configs"]["c"][sr.HEADROOM_EXCL]
    assert fail["estimate"] == 3 / 8 and excl["estimate"] == 3 / 6
    kinds = {i["kind"]: i["generalises_to"] for i in fail["intervals"]}
    assert "another attempt" in kinds["wilson95"] and "new tasks" in kinds["clustered_se"]
    assert out["run_basis"] == "attempt index"  # a native frame: no source runs
    assert {(m["reason"], m["trials"]) for m in out["moves"]["c"][sr.HEADROOM_EXCL]} == {
        ("left out by the rule: infra_error", 1),
        ("left out by the rule: harness_error", 1),
    }


def test_a_native_run_reads_its_outcomes_as_harbor_exceptions_under_the_benchmark_rules() -> None:
    df = frame(
        [
            {"task_id": "t", "outcome": "passed", "reward": 1.0},
            {"task_id": "t", "outcome": "timeout", "reward": 1.0},
            {"task_id": "t", "outcome": "harness_error", "reason": "verifier_timeout"},
            {"task_id": "t", "outcome": "infra_error", "reason": "oom_killed"},
        ]
    )
    out = sr.evaluate(df, list(sr.ALL_RULES))["configs"]["c"]
    assert out[sr.TB2_OFFICIAL]["estimate"] == pytest.approx(2 / 3)  # 1, 1 (reward after the timeout), 0; OOM left out
    assert out[sr.TB_LEADERBOARD]["estimate"] == pytest.approx(2 / 4)  # resolved: the two with reward 1
    assert out[sr.HARBOR_MEAN]["estimate"] == pytest.approx(2 / 4)


def test_parse_rules() -> None:
    assert sr.parse_rules("auto", []) == [sr.HEADROOM_FAIL, sr.HEADROOM_EXCL]
    assert sr.parse_rules(None, ["harbor"]) == [sr.HEADROOM_FAIL, sr.HEADROOM_EXCL, sr.HARBOR_MEAN, sr.TB2_OFFICIAL]
    assert sr.parse_rules("all", []) == list(sr.ALL_RULES)
    assert sr.default_rule(["terminal-bench"]) == sr.TB_LEADERBOARD and sr.default_rule([]) == sr.HEADROOM_FAIL
    with pytest.raises(ValueError, match="unknown scoring rule 'x'"):
        sr.parse_rules("x", [])


@pytest.mark.parametrize("mode", sorted(TB_FAILURE_MODES))
@pytest.mark.parametrize("resolved", [True, False, None])
def test_restating_a_terminal_bench_default_with_map_changes_nothing(mode: str, resolved: bool | None) -> None:
    plain = tb_verdict(resolved, mode, {})
    restated = tb_verdict(resolved, mode, {mode: TB_FAILURE_MODES[mode]})
    assert (restated.outcome, restated.reason) == (plain.outcome, plain.reason)


@pytest.mark.parametrize("exc", sorted(HARBOR_EXCEPTIONS))
@pytest.mark.parametrize("reward", [1.0, 0.0, None])
def test_restating_a_harbor_default_with_map_changes_nothing(exc: str, reward: float | None) -> None:
    plain = harbor_verdict(exc, reward, 1.0, {})
    restated = harbor_verdict(exc, reward, 1.0, {exc: HARBOR_EXCEPTIONS[exc]})
    assert (restated.outcome, restated.reason) == (plain.outcome, plain.reason)


def test_resolved_after_an_agent_timeout_is_a_timeout_for_headroom_and_a_pass_for_the_leaderboard() -> None:
    assert tb_verdict(True, "agent_timeout", {}).outcome == "timeout"
    assert tb_verdict(True, "unknown_agent_error", {}).outcome == "passed"  # the agent's own failure: the tests decide
    assert tb_verdict(True, "agent_timeout", {"agent_timeout": ("failed", None)}).outcome == "passed"
