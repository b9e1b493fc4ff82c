"""``runs compare`` and the viewer's compare page put a 95% interval beside cost per trial, cost per solved task,
tokens and latency (orchestrator/stats/usage_intervals.py: a bootstrap over tasks).

Two runs are written into a real SQLite store with known per-trial cost, tokens and durations; the comparison is
built by the same code the CLI and the viewer call.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from orchestrator.report import comparison, document
from orchestrator.spec.provenance import Provenance
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord
from orchestrator.store.sqlite import Store
from orchestrator.view.app import create_app


def _run(
    store: Store, name: str, task_cost: list[float], *, attempts: int = 1, passes: int = 1, noise: float = 0.0
) -> str:
    """One configuration ``agent``; task t costs ``task_cost[t]`` per attempt (plus ``noise`` jitter), its first
    ``passes`` attempts pass; tokens and duration follow the cost."""
    rng = np.random.default_rng(len(task_cost) * 100 + attempts)
    trials, tasks = [], []
    for t, base in enumerate(task_cost):
        tasks.append(TaskRecord(f"t{t}", f"{t:064x}", f"t{t}"))
        for a in range(attempts):
            cost = base + (float(rng.normal(0, noise)) if noise else 0.0)
            ex = ExecutionRecord(
                0,
                "finished",
                True,
                "2026-01-01T00:00:00+00:00",
                "2026-01-01T00:00:10+00:00",
                "passed" if a < passes else "failed",
                reward=1.0 if a < passes else 0.0,
                duration_s=1000 * cost,
                tokens_in=100_000 * cost,
                tokens_out=10_000 * cost,
                cost_usd=cost,
                usage_source="gateway",
            )
            trials.append(TrialRecord(f"t{t}:agent:{a}", f"t{t}", "agent", 1.0, 1.0, a, a, len(trials), [ex]))
    return store.import_run(RunRecord(name, "local", "cgroup-v2", "labels", {}, Provenance()), tasks, trials)


def _cost(store: Store, a: str, b: str) -> dict:
    doc = document.comparison_document(store, a, store, b)
    return doc.statistics.runs["A"].configs[0].cost.model_dump()


def test_each_figure_has_an_interval_around_its_estimate(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    costs = [0.01 * (1 + t % 5) for t in range(20)]
    a = _run(store, "a", costs, attempts=2, passes=1, noise=0.002)
    b = _run(store, "b", costs, attempts=2, passes=2)
    k = _cost(store, a, b)
    for est, ci in (
        ("cost_per_attempt_usd", "cost_per_attempt_ci"),
        ("cost_per_solved_usd", "cost_per_solved_ci"),
        ("tokens_per_solved", "tokens_per_solved_ci"),
        ("latency_per_attempt_s", "latency_per_attempt_ci"),
    ):
        low, high = k[ci]
        assert low < k[est] < high, (est, k[est], k[ci])
    tokens = k["tokens_in_per_attempt"] + k["tokens_out_per_attempt"]
    assert k["tokens_per_attempt_ci"][0] < tokens < k["tokens_per_attempt_ci"][1]
    # half the attempts pass: a solved task costs about twice an attempt, and so does its interval
    assert k["cost_per_solved_ci"][0] > 1.5 * k["cost_per_attempt_ci"][0]
    assert "bootstrap over tasks" in k["usage_interval_method"]


def test_the_interval_resamples_tasks_not_trials(tmp_path: Path) -> None:
    """Three identical attempts per task say no more about new tasks than one: a bootstrap over trials would
    narrow the interval by about √3 here; over tasks it stays the same."""
    store = Store(tmp_path / "s.db")
    costs = [0.01 * (1 + t % 7) for t in range(30)]
    one = _run(store, "one", costs, attempts=1)
    three = _run(store, "three", costs, attempts=3, passes=3)
    w1 = np.diff(_cost(store, one, one)["cost_per_attempt_ci"])[0]
    w3 = np.diff(_cost(store, three, three)["cost_per_attempt_ci"])[0]
    assert w3 == pytest.approx(w1, rel=0.15), (w1, w3)
    # and more tasks do narrow it
    many = _run(store, "many", costs * 4, attempts=1)
    assert np.diff(_cost(store, many, many)["cost_per_attempt_ci"])[0] < 0.7 * w1


def test_too_few_tasks_or_no_pass_give_no_interval_rather_than_a_made_up_one(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    single = _run(store, "single", [0.02], attempts=4, passes=2, noise=0.005)
    k = _cost(store, single, single)
    assert k["cost_per_attempt_usd"] is not None and k["cost_per_attempt_ci"] is None  # one task: nothing to say
    none_pass = _run(store, "fails", [0.01 * (1 + t) for t in range(10)], attempts=2, passes=0)
    k = _cost(store, none_pass, none_pass)
    assert k["cost_per_solved_usd"] is None and k["cost_per_solved_ci"] is None
    assert k["cost_per_attempt_ci"] is not None
    # one task of ten holds every pass: a third of the resamples have none, so no cost per solved task is bounded
    lucky = _run(store, "lucky", [0.01 * (1 + t) for t in range(10)], attempts=1, passes=0)
    store.db.execute(
        "UPDATE executions SET outcome='passed', reward=1.0 WHERE run_id=? AND trial_id='t0:agent:0'", (lucky,)
    )
    store.db.commit()
    k = _cost(store, lucky, lucky)
    assert k["cost_per_solved_usd"] is not None and k["cost_per_solved_ci"] is None
    assert k["cost_per_attempt_ci"] is not None


def test_compare_and_the_viewer_print_the_intervals(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    costs = [0.01 * (1 + t % 5) for t in range(12)]
    a = _run(store, "a", costs, attempts=2, passes=1, noise=0.002)
    b = _run(store, "b", [c * 2 for c in costs], attempts=2, passes=2)
    doc = document.comparison_document(store, a, store, b)
    md = comparison.markdown(doc)
    table = md.split("## Cost, tokens and latency", 1)[1].split("\n## ", 1)[0]
    k = doc.statistics.runs["A"].configs[0].cost
    row = next(line for line in table.splitlines() if line.startswith("| A ("))
    assert k.cost_per_attempt_ci is not None
    lo, hi = k.cost_per_attempt_ci
    assert f"${k.cost_per_attempt_usd:.6f} [${lo:.6f} – ${hi:.6f}]" in row
    assert re.search(r"\d+\.\d\d s \[\d+\.\d\d s – \d+\.\d\d s\]", row)  # latency with its interval
    assert "95% interval, bootstrap over tasks" in table
    store.close()
    page = TestClient(create_app(tmp_path / "s.db"), base_url="http://127.0.0.1").get(f"/compare?a={a}&b={b}")
    assert page.status_code == 200
    assert f"${k.cost_per_attempt_usd:.6f} [${lo:.6f} – ${hi:.6f}]" in html.unescape(page.text)
