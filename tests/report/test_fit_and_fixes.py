"""Reports fit what was compared (labels vs resource levels), and the fixes found against independent computations."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from orchestrator.report import markdown
from orchestrator.report.blocks import Statistics
from orchestrator.report.model import Configuration, ReportDocument, RunSection
from orchestrator.report.text import sign_counts
from orchestrator.stats.analyze import analyze
from orchestrator.stats.paired import two_rate_exact
from orchestrator.stats.trend import cochran_armitage
from orchestrator.store.sqlite import SCHEMA_VERSION, Store
from tests.cli_run import headroom

FIX = Path(__file__).parent.parent / "importers" / "fixtures"


def frame(
    rates: dict[str, list[float]],
    attempts: int = 4,
    *,
    with_duration: bool = True,
    request: dict[str, float] | None = None,
    limit: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Trials whose per-task pass counts follow the given per-task rates, one config per key."""
    rows = []
    for label, per_task in rates.items():
        for t, r in enumerate(per_task):
            passes = round(r * attempts)
            for a in range(attempts):
                rows.append(
                    {
                        "task_id": f"t{t:02d}",
                        "config_label": label,
                        "request_multiplier": (request or {}).get(label, 1.0),
                        "limit_multiplier": (limit or {}).get(label, np.nan),
                        "attempt": a,
                        "outcome": "passed" if a < passes else "failed",
                        "reason": None,
                        "duration_s": 2.0 if with_duration else np.nan,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def labels_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("s") / "h.db"
    res = headroom("results", "import", str(FIX / "tb_run"), str(FIX / "harbor_job"), "--store", str(store))
    assert res.returncode == 0, res.stderr
    return store


def test_labels_report_has_no_resource_axis_trend_or_calibration(labels_store: Path) -> None:
    md = headroom("report", "--store", str(labels_store), "--format", "markdown")
    assert md.returncode == 0, md.stderr
    heads = md.stdout.split("\n## ")
    assert not any(h.startswith(("Trend across multipliers", "Calibration")) for h in heads)
    metrics = next(h for h in heads if h.startswith("Metrics"))
    assert "| request |" not in metrics and "| limit |" not in metrics
    assert "per-task mean diff [95% CI]" in md.stdout and "independent samples of new tasks" in md.stdout
    assert "None" not in next(h for h in heads if h.startswith("Setup"))  # unrecorded facts are left out
    # The configurations keep the order the sources were given in (terminal-bench first), not alphabetical.
    doc = json.loads(headroom("report", "--store", str(labels_store), "--format", "json").stdout)
    assert [c["label"] for c in doc["configurations"]] == ["terminus@example/model-b", "terminus-2@example/model-a"]
    term = headroom("report", "--store", str(labels_store))
    assert term.returncode == 0 and "calibration" not in term.stdout.lower().replace("no trend test or calibration", "")
    assert "trend across multipliers" not in term.stdout


def test_resource_runs_still_parse_reference_spellings(tmp_path: Path) -> None:
    df = frame({"1x-strict": [0.5] * 6, "1x/2x": [0.75] * 6}, limit={"1x-strict": 1.0, "1x/2x": 2.0})
    stats_ = analyze(df)
    assert stats_.axis == "resources" and stats_.reference == "1x-strict" and stats_.trends is not None
    assert stats_.config_order == ["1x-strict", "1x/2x"]


def test_task_level_paired_test_matches_scipy_and_reads_b_minus_a() -> None:
    rng = np.random.default_rng(3)
    a = list(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=12))
    b = [min(1.0, x + 0.25) if i % 3 else x for i, x in enumerate(a)]
    s = analyze(frame({"agent-a": a, "agent-b": b}), axis="labels", config_order=["agent-a", "agent-b"])
    [it] = s.comparisons.items
    paired = it.score.paired
    d = np.array(b) - np.array(a)
    ref = stats.ttest_rel(b, a)
    assert paired.t_p == pytest.approx(ref.pvalue, rel=1e-9) and paired.t_statistic == pytest.approx(ref.statistic)
    assert paired.mean_task_diff == pytest.approx(d.mean()) and paired.mean_task_diff > 0
    assert paired.bootstrap_low <= paired.mean_task_diff <= paired.bootstrap_high  # type: ignore[operator]
    assert paired.t_p_holm == pytest.approx(paired.t_p)  # one comparison: Holm changes nothing
    sign = it.score.sign
    assert sign.b_only > 0 and sign.a_only == 0
    typed = Statistics.of(s, None)  # the report's section: the analysis' own models, composed
    assert typed.comparisons is s.comparisons
    assert sign_counts(typed.comparisons.items[0].score.sign) == f"+{sign.b_only}/−0"  # B gained: the plus side
    md = "\n".join(markdown.comparisons_block(typed))
    assert f"+{sign.b_only}/−0" in md


def test_classical_cochran_armitage_equals_the_textbook_formula() -> None:
    events, n = np.array([3, 7, 12, 15]), np.array([40, 40, 40, 40])
    scores = np.arange(4.0)
    p_bar = events.sum() / n.sum()
    s_bar = (n * scores).sum() / n.sum()
    t_stat = (events * (scores - s_bar)).sum()
    var = p_bar * (1 - p_bar) * (n * (scores - s_bar) ** 2).sum()
    z = t_stat / np.sqrt(var)
    res = cochran_armitage(events, n)
    assert res.z_classic == pytest.approx(z, rel=1e-9)
    assert res.p_classic == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-9)
    assert "classical" in res.variant


def test_untestable_trend_and_missing_latency_print_a_dash() -> None:
    df = frame(
        {"1x-strict": [1.0] * 5, "1x/2x": [1.0] * 5}, with_duration=False, limit={"1x-strict": 1.0, "1x/2x": 2.0}
    )
    s = analyze(df)
    assert s.trends is not None and s.trends.pass_.cochran_armitage.z is None
    typed = Statistics.of(s, None)
    trend_md = "\n".join(markdown.trends_block(typed))
    assert "z=0.00" not in trend_md and "| pass | — |" in trend_md
    assert all(c.cost.latency_per_attempt_s is None for c in s.configs)
    # Only what metrics_block reads: the configurations and statistics of a resources-axis run.
    doc = ReportDocument.model_construct(
        configurations=[Configuration.of(c, None) for c in s.configs],
        statistics=typed,
        run=RunSection.model_construct(axis="resources"),
        headline_rule="headroom:infra-as-failure",
    )
    metrics = "\n".join(markdown.metrics_block(doc))
    assert "0.00 s" not in metrics and "| 1x-strict | — | — |" in metrics


def test_exact_infra_test_runs_boschloo_at_sizes_that_take_seconds() -> None:
    r = two_rate_exact(20, 250, 8, 250)  # (251)^2 = 63k cells: Boschloo, not Fisher
    assert r.method == "boschloo_exact"
    assert r.p == pytest.approx(stats.boschloo_exact([[20, 8], [230, 242]]).pvalue)


def test_a_store_from_schema_1_is_migrated_and_readable(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        PRAGMA application_id = 1213415757; PRAGMA user_version = 1;
        CREATE TABLE runs (run_id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL, finished_at TEXT,
            status TEXT NOT NULL, backend TEXT NOT NULL, enforcement TEXT NOT NULL, spec_json TEXT NOT NULL, owner TEXT);
        INSERT INTO runs VALUES ('r1', 'old', '2026-01-01', NULL, 'finished', 'local', 'cgroup-v2', '{}', NULL);
    """)
    db.close()
    ro = Store.open_existing(path)  # read-only: no column added, the axis defaults
    assert ro.run("r1").axis == "resources"
    ro.close()
    rw = Store(path)
    assert rw.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert rw.run("r1").axis == "resources" and rw.run("r1").name == "old"
    rw.close()


def test_a_schema_2_store_gets_its_overcommit_columns_back_filled_from_the_evidence(tmp_path: Path) -> None:
    """Schema 3 keeps each try's overcommit record as columns; an older store's are filled from its evidence JSON."""
    from orchestrator.engine.overcommit import observed_by_config
    from orchestrator.store.sqlite import OVERCOMMIT_COLUMNS

    path = tmp_path / "v2.db"
    store = Store(path)
    db = store.db
    db.execute(
        "INSERT INTO runs (run_id, name, created_at, status, backend, enforcement, spec_json) "
        "VALUES ('r', 'n', '2026-01-01', 'finished', 'local', 'cgroup-v1', '{}')"
    )
    db.execute("INSERT INTO tasks VALUES ('r', 't', 'd', 'c', '{}')")
    for i, (label, rec) in enumerate(
        [
            ("a", {"ratio_max": 1.5, "unbounded_in_flight": True}),
            ("a", {"ratio_max": 0.5, "unbounded_in_flight": False}),
            ("b", None),
        ]
    ):
        db.execute(
            "INSERT INTO trials (run_id, trial_id, task_id, config_label, request_multiplier, limit_multiplier, "
            "attempt, seed, ord) VALUES ('r', ?, 't', ?, 1, 1, ?, 0, ?)",
            (f"x{i}", label, i, i),
        )
        db.execute(
            "INSERT INTO executions (run_id, trial_id, try, status, final, started_at, outcome) "
            "VALUES ('r', ?, 0, 'finished', 1, '2026-01-01T00:00:00+00:00', 'passed')",
            (f"x{i}",),
        )
        db.execute(
            "INSERT INTO evidence VALUES ('r', ?, 0, ?)",
            (f"x{i}", json.dumps({"extra": {"overcommit": rec} if rec else {}})),
        )
    for column in OVERCOMMIT_COLUMNS:  # back to the schema-2 shape
        db.execute(f"ALTER TABLE executions DROP COLUMN {column}")
    db.execute("ALTER TABLE trials DROP COLUMN source_run")
    db.execute("PRAGMA user_version = 2")
    store.close()

    old = Store.open_existing(path)  # read-only: no columns to read, and no crash
    assert observed_by_config(old.trial_frame("r"))["a"]["trials_recorded"] == 0
    old.close()
    migrated = Store(path)
    assert migrated.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    got = observed_by_config(migrated.trial_frame("r"))
    assert got["a"] == {
        "trials_recorded": 2,
        "ratio_max": 1.5,
        "ratio_mean": 1.0,
        "trials_beside_unbounded": 1,
        "trials_under_memory_pressure": 0,
    }
    assert got["b"]["trials_recorded"] == 0 and got["b"]["ratio_max"] is None
    migrated.close()
