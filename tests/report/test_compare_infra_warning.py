"""`runs compare`: the infra-excluded comparison stands only beside the test of the infra-error rates, and when
those rates differ a warning says the excluded trials were chosen by the errors.

Two real sweeps of the same two tasks: in run A the agent of task "x" allocates far past its limit (a real OOM
kill, an infra error that leaves the infra-excluded score), in runs B and C it solves "x". A's infra-excluded
score is then 100% (only "y" is left) while its headline is 50%: the number an agent could launder its failures
into. A third run C, like B, has the same infra-error rate as B: no warning there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_run import headroom as run_cli
from tests.taskfactory import HOG, requires_cgroups, write_task

pytestmark = [pytest.mark.slow, requires_cgroups]


def headroom(*args: str) -> str:
    return run_cli(*args, check=True).stdout


def _sweep(tmp: Path, name: str, x_solve: str, store: Path) -> str:
    root = tmp / name
    write_task(root, "x", solve=x_solve, memory_mb=64)
    write_task(root, "y", solve='touch "$HEADROOM_WORKDIR/out"\n')
    headroom("sweep", str(root), "--multipliers", "1", "--attempts", "2", "--name", name, "--store", str(store),
             "--format", "none", "--no-canary")  # fmt: skip
    return headroom("runs", "show", str(store)).split()[1]  # "run RUN_ID (...)": the latest run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("compare-infra")
    store = tmp / "h.db"
    ids = {
        "A": _sweep(tmp, "oom", HOG.format(mb=400), store),
        "B": _sweep(tmp, "solve", 'touch "$HEADROOM_WORKDIR/out"\n', store),
        "C": _sweep(tmp, "solve-again", 'touch "$HEADROOM_WORKDIR/out"\n', store),
    }
    return store, ids


def test_differing_infra_rates_put_a_warning_beside_the_infra_excluded_comparison(runs) -> None:
    store, ids = runs
    for fmt in ("table", "markdown"):
        out = " ".join(
            headroom("runs", "compare", f"{store}:{ids['A']}", f"{store}:{ids['B']}", "--format", fmt).split()
        )
        assert "warning: A:1x-strict vs B:1x-strict: the infra-error rates differ (50.0% vs 0.0%" in out, out
        assert "chosen by the errors themselves" in out and "read headroom, infra errors as failures" in out
        # the infra-excluded difference is shown only in the table that holds the exact infra test
        excl = out.index("headroom, infra errors excluded: diff")
        assert "infra-error rates, exact test" in out[excl - 400 : excl + 400] or "exact test" in out[excl:]


def test_equal_infra_rates_carry_no_warning(runs) -> None:
    store, ids = runs
    out = headroom("runs", "compare", f"{store}:{ids['B']}", f"{store}:{ids['C']}", "--format", "markdown")
    assert "warning:" not in out and "rates differ" not in out


def test_the_report_s_headline_counts_the_oom_kills_as_failures(runs) -> None:
    store, ids = runs
    md = headroom("report", f"{store}:{ids['A']}", "--format", "markdown")
    summary = md.split("\n## Summary", 1)[1].split("\n## ", 1)[0]
    assert "| 1x-strict | 50.0% |" in summary  # the headline: the OOM-killed trials count as failures
    assert "100.0%" not in summary.split("Headline per configuration", 1)[1].split("\n\n", 2)[1]


def test_compare_shows_cost_tokens_and_latency_per_configuration_and_names_agents(runs) -> None:
    store, ids = runs
    a, b = f"{store}:{ids['A']}", f"{store}:{ids['B']}"
    md = headroom("runs", "compare", a, b, "--format", "markdown", "--label", "hog agent", "--label", "fine agent")
    assert "- A: " in md and "agent hog agent;" in md and "agent fine agent;" in md
    cost = md.split("## Cost, tokens and latency", 1)[1].split("\n## ", 1)[0]
    doc = json.loads(headroom("runs", "compare", a, b, "--json"))
    for key, agent in (("A", "hog agent"), ("B", "fine agent")):
        (c,) = doc["statistics"]["runs"][key]["configs"]
        row = next(line for line in cost.splitlines() if line.startswith(f"| {key} ({agent}): 1x-strict |"))
        assert f"{c['cost']['latency_per_attempt_s']:.2f} s" in row  # latency per trial, measured
        assert f"{c['cost']['n_cost']}/{c['cost']['n']}" in row  # what the cost figures stand on
    assert "No cost recorded: no front." in md  # the oracle reports no cost: unknown, never $0
    table = headroom("runs", "compare", a, b)
    assert "external" not in table and "imported" not in table and "agent oracle" in table


def test_the_cost_score_front_marks_the_dominated_configurations(runs) -> None:
    """The front over a real comparison document, with the costs a gateway would have recorded set on it."""
    from orchestrator.report import comparison
    from orchestrator.report.model import ComparisonDocument

    store, ids = runs
    raw = json.loads(headroom("runs", "compare", f"{store}:{ids['A']}", f"{store}:{ids['B']}", "--json"))

    def front(cost_a: float, cost_b: float) -> dict[str, str]:
        raw["statistics"]["runs"]["A"]["configs"][0]["cost"]["cost_per_attempt_usd"] = cost_a  # A scores 50%
        raw["statistics"]["runs"]["B"]["configs"][0]["cost"]["cost_per_attempt_usd"] = cost_b  # B scores 100%
        rows = comparison.pareto_rows(ComparisonDocument.model_validate(raw))
        return {r[0].split(" ")[0]: r[3] for r in rows}

    assert front(0.01, 0.02) == {"A": "yes", "B": "yes"}  # cheaper or better: both on the front
    assert front(0.03, 0.02) == {"A": "no: dominated by B (oracle): 1x-strict", "B": "yes"}  # B: better and cheaper
