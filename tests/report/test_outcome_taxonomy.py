"""Every Outcome reaches every layer: stats arrays, the report in each format, the viewer, the controller.

Abstention is the outcome this guards first ("did not answer" must never read as "answered
wrong"), but the tests iterate over :class:`Outcome`, so the next new member fails here
until the stats and report layers handle it. The store is a real SQLite file; the old
shape (``failed`` with reason ``abstained``) is written exactly as earlier versions did.
"""

from __future__ import annotations

import io
import json
import sqlite3
import typing
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.controller.progress import Ledger, configuration_status
from orchestrator.controller.resources import ConfigurationStatus, TrialStatus
from orchestrator.report import document, terminal
from orchestrator.report.outcomes import OUTCOME_HEADERS
from orchestrator.report.render import render_text
from orchestrator.spec.outcome import MODEL_OUTCOMES, Outcome
from orchestrator.spec.provenance import Provenance
from orchestrator.stats.aggregate import OUTCOMES
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord
from orchestrator.store.sqlite import SCHEMA_VERSION, Store
from orchestrator.view import data as view_data

ALL = [o.value for o in Outcome]


def test_every_layer_names_every_outcome() -> None:
    assert set(OUTCOMES) == set(ALL)  # the statistics' count axis
    assert set(OUTCOME_HEADERS) == set(Outcome)  # a column in every report table
    literal = typing.get_args(typing.get_args(TrialStatus.model_fields["outcome"].annotation)[0])
    assert set(literal) == set(ALL)  # the Trial CRD's outcome field
    assert set(ALL) <= set(ConfigurationStatus.model_fields)  # a count in the Experiment status
    assert Outcome.ABSTAINED in MODEL_OUTCOMES  # it says something about the agent: in the infra-excluded score


def _store(path: Path, legacy_abstained: int = 0) -> tuple[Store, str]:
    """One configuration; per Outcome two trials of that outcome, plus ``legacy_abstained`` written in the old shape."""
    rows: list[tuple[str, str | None]] = []
    for o in Outcome:
        reason = {"infra_error": "oom_killed", "harness_error": "reward_missing"}.get(o.value)
        rows += [(o.value, reason)] * 2
    rows += [("failed", "abstained")] * legacy_abstained  # how abstention was stored before it was an outcome
    trials = [
        TrialRecord(
            f"t{i}:1x/2x:0",
            f"t{i}",
            "1x/2x",
            1.0,
            2.0,
            0,
            i,
            i,
            [
                ExecutionRecord(
                    0,
                    "finished",
                    True,
                    "2026-01-01T00:00:00Z",
                    "2026-01-01T00:00:01Z",
                    outcome,
                    reason,
                    duration_s=1.0,
                    evidence={"agent_result": {"answer": "I don't know"}},
                )
            ],
        )
        for i, (outcome, reason) in enumerate(rows)
    ]
    tasks = [TaskRecord(f"t{i}", "0" * 64, f"t{i}") for i in range(len(rows))]
    store = Store(path)
    run_id = store.import_run(RunRecord("taxonomy", "local", "cgroup-v2", "resources", {}, Provenance()), tasks, trials)
    return store, run_id


def test_every_outcome_reaches_the_stats_and_every_report_format(tmp_path: Path) -> None:
    store, run_id = _store(tmp_path / "s.db")
    doc = document.build(store, run_id)
    [c] = doc.configurations
    assert c.counts == {o: 2 for o in ALL} and c.n == 2 * len(ALL)
    # An abstention is not a pass: it stays in both denominators, and has its own rate.
    assert (c.pass_rate.k, c.pass_rate.n) == (2, 2 * len(ALL))
    assert (c.score_infra_excluded.k, c.score_infra_excluded.n) == (2, 2 * len(MODEL_OUTCOMES))
    ab = c.abstention_rate
    assert (ab.k, ab.n) == (2, 2 * len(ALL)) and ab.low is not None and ab.estimate is not None and ab.high is not None
    assert ab.low < ab.estimate < ab.high
    assert doc.trust.abstentions == {"1x/2x": ab}
    assert doc.statistics is not None
    assert sum(t.configs["1x/2x"].abstained for t in doc.statistics.tasks) == 2

    buf = io.StringIO()
    terminal.print_report(doc, Console(file=buf, width=400, color_system=None))
    text = buf.getvalue()
    for header in OUTCOME_HEADERS.values():
        assert header in text
    assert "abstention rate" in text

    md = render_text(doc, "markdown")
    counts_row = next(line for line in md.splitlines() if line.startswith("| 1x/2x | 12 |"))
    assert counts_row == "| 1x/2x | 12 | " + " | ".join("2" for _ in OUTCOME_HEADERS) + " |"
    assert "## Abstentions" in md and "abstention" in md.split("## Metrics")[1].split("\n\n")[2]
    html = render_text(doc, "html")
    assert "<h2>Abstentions</h2>" in html and "<th>abstained</th>" in html
    assert json.loads(render_text(doc, "json"))["configurations"][0]["counts"]["abstained"] == 2


def test_an_old_store_reads_failed_abstained_as_abstained(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store, run_id = _store(path, legacy_abstained=3)
    store.close()
    raw = sqlite3.connect(path)
    # import_run writes the current shape (an older bundle is converted on the way in) ...
    assert raw.execute("SELECT COUNT(*) FROM executions WHERE reason='abstained'").fetchone()[0] == 0
    # ... so the old shape is written here, with SQL, exactly as a sweep of an earlier version recorded it.
    legacy_ids = [f"t{i}:1x/2x:0" for i in range(2 * len(ALL), 2 * len(ALL) + 3)]
    with raw:
        raw.executemany(
            "UPDATE executions SET outcome='failed', reason='abstained' WHERE trial_id=?", [(t,) for t in legacy_ids]
        )
    assert (
        raw.execute("SELECT COUNT(*) FROM executions WHERE outcome='failed' AND reason='abstained'").fetchone()[0] == 3
    )
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # no schema change: read as it is
    raw.close()

    ro = Store(path, read_only=True)
    frame = ro.trial_frame(run_id)
    assert (frame["outcome"] == "abstained").sum() == 5 and (frame["outcome"] == "failed").sum() == 2
    assert frame.loc[frame["outcome"] == "abstained", "reason"].isna().all()
    finals = ro.final_results(run_id)
    assert sum(1 for _, o, r, _ in finals if o == "abstained" and r is None) == 5  # what regrade's flips start from
    assert not any(r == "abstained" for _, _, r, _ in finals)
    tries = ro.tries(run_id)
    assert sum(1 for rows in tries.values() for r in rows if r.outcome == "abstained") == 5
    _, _, exported = ro.export_run(run_id)  # bundles carry the current shape
    assert sum(1 for t in exported for e in t.executions if e.outcome == "abstained" and e.reason is None) == 5

    doc = document.build(ro, run_id)
    [c] = doc.configurations
    assert c.counts["abstained"] == 5 and c.counts["failed"] == 2

    legacy = legacy_ids[-1]
    [trial] = view_data.cell_trials(ro, run_id, legacy.split(":")[0], "1x/2x")
    assert (trial["final"]["outcome"], trial["final"]["reason"]) == ("abstained", None)
    detail = view_data.trial_detail(ro, run_id, legacy)
    assert detail is not None and detail["tries"][0]["outcome"] == "abstained"
    ro.close()
    raw = sqlite3.connect(path)  # reading rewrote nothing
    assert (
        raw.execute("SELECT COUNT(*) FROM executions WHERE outcome='failed' AND reason='abstained'").fetchone()[0] == 3
    )
    raw.close()


@pytest.mark.parametrize("stored", [("abstained", None), ("failed", "abstained")])
def test_controller_counts_abstentions_apart(stored: tuple[str, str | None]) -> None:
    from orchestrator.controller.planned import CompactPlan
    from orchestrator.spec.resources import ResourceConfig

    cfg = ResourceConfig(request_multiplier=1.0, limit_multiplier=2.0)
    plan = CompactPlan(seed=0, task_ids=["t0", "t1", "t2"], configs=[cfg], attempts=1)
    book = Ledger(planned=3)
    for outcome, reason in [("passed", None), ("failed", None), stored]:
        book.final.append(
            {"spec": {"configuration": {"label": cfg.label}}, "status": {"outcome": outcome, "reason": reason}}
        )
    [st] = configuration_status(plan, book)
    assert (st.passed, st.failed, st.abstained, st.finished) == (1, 1, 1, 3)
    assert (st.abstention_rate.k, st.abstention_rate.n) == (1, 3) and st.pass_rate.n == 3
