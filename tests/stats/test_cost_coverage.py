"""Cost and tokens per solved task stand only on the trials that reported them, and say so."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from orchestrator.report import costs
from orchestrator.stats.analyze import analyze as analyze_model
from tests.stats.conftest import frame_from_outcomes


def analyze(df: pd.DataFrame, **kw: Any) -> dict[str, Any]:
    """``analyze``'s result as ``headroom report --format json`` publishes it (its model's JSON dump)."""
    return analyze_model(df, **kw).to_dict()


def _partial_cost_frame():
    # 10 tasks x 10 attempts: tasks 0-4 always pass, 5-9 always fail (50 passes of 100).
    outs = [["passed"] * 10 if t < 5 else ["failed"] * 10 for t in range(10)]
    df = frame_from_outcomes(outs)
    # Only 30 trials report a cost, $1.00 each: all 10 attempts of task 4 (passes) and
    # of tasks 5 and 6 (failures). Tokens: 20 trials, tasks 4 and 5.
    reported = df["task_id"].isin(["t004", "t005", "t006"])
    df.loc[reported, "cost_usd"] = 1.0
    tok = df["task_id"].isin(["t004", "t005"])
    df.loc[tok, "tokens_in"], df.loc[tok, "tokens_out"] = 900.0, 100.0
    df.loc[df["task_id"] == "t006", "tokens_in"] = 500.0  # input only: not a complete token count
    return df


def test_per_solved_uses_only_reporting_trials_and_never_undercuts_per_attempt():
    cost = analyze(_partial_cost_frame())["configs"][0]["cost"]
    assert (cost["n"], cost["passed"], cost["n_cost"], cost["passed_with_cost"]) == (100, 50, 30, 10)
    assert cost["cost_per_attempt_usd"] == 1.0
    # The old figure was $30 / 50 passes = $0.60, below the $1.00 an attempt costs.
    assert cost["cost_per_solved_usd"] == 3.0 >= cost["cost_per_attempt_usd"]
    assert cost["cost_coverage"] == "30/100 reported" and cost["cost_complete"] is False
    # Tokens: 20 trials reported both counts (1,000 each), 10 of them passed.
    assert (cost["n_tokens"], cost["passed_with_tokens"]) == (20, 10)
    assert cost["tokens_per_solved"] == 2000.0
    assert cost["tokens_in_per_attempt"] == (20 * 900 + 10 * 500) / 30
    assert cost["tokens_coverage"] == "20/100 reported"


def test_no_pass_among_reporters_means_unknown_not_cheap():
    df = _partial_cost_frame()
    df.loc[df["task_id"] == "t004", "cost_usd"] = np.nan  # now only failures report a cost
    cost = analyze(df)["configs"][0]["cost"]
    assert cost["n_cost"] == 20 and cost["passed_with_cost"] == 0
    assert cost["cost_per_solved_usd"] is None and cost["cost_per_attempt_usd"] == 1.0


def test_coverage_is_printed_beside_the_figures():
    cfg = analyze_model(_partial_cost_frame()).configs[0]  # the typed result, as the report's tables read it
    row = dict(zip(costs.HEADERS, costs.cost_rows([cfg])[0]))
    # Without a gateway every figure is the agent's own, and the table says so.
    assert row["cost / solved"] == "$3.000000" and row["cost reported"] == "30/100 reported (10 passed), self-reported"
    assert row["tokens / solved"] == "2,000" and row["tokens reported"] == "20/100 reported (10 passed), self-reported"


def test_gateway_figures_are_labelled_as_measured_and_a_mix_is_split():
    df = _partial_cost_frame()
    df["usage_source"] = np.where(df["cost_usd"].notna(), "self-reported", None)
    df.loc[df["task_id"].isin(["t004", "t005"]), "usage_source"] = "gateway"  # 20 of the 30 cost reports
    cfg = analyze_model(df).configs[0]
    cost = cfg.cost
    assert (cost.n_cost_gateway, cost.cost_source) == (20, "mixed")
    assert (cost.n_tokens_gateway, cost.tokens_source) == (20, "gateway")
    row = dict(zip(costs.HEADERS, costs.cost_rows([cfg])[0]))
    assert row["cost reported"] == "30/100 reported (10 passed), 20 gateway + 10 self-reported"
    assert row["tokens reported"] == "20/100 reported (10 passed), gateway"
    nothing = analyze(frame_from_outcomes([["passed"] * 3]))["configs"][0]["cost"]
    assert nothing["cost_source"] is None and nothing["tokens_source"] is None
