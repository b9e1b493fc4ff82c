"""Every format labels each headline interval with what it generalises to, and shows the calibration decision
with the MDD it applied (issue 24). One real store; the same report document drives each format."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from benchmarks.bench_stats import write_store
from orchestrator.report import document, html, markdown, terminal
from orchestrator.report.model import ReportDocument
from orchestrator.stats.clustered import NEW_TASKS, THESE_TASKS
from orchestrator.stats.synthetic import PlantedConfig, make_sweep
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli

CONFIGS = (
    PlantedConfig("1x-strict", 1, 1, 0.20),
    PlantedConfig("1x/2x", 1, 2, 0.02),
    PlantedConfig("unbounded", 1, float("nan"), 0.0, 0.10),
)
# What a reader must find beside the two headline intervals, in every format.
THESE, NEW = "these tasks (Wilson, over trials)", "new tasks (t over tasks, clustered)"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("labels") / "h.db"
    write_store(make_sweep(12, 6, CONFIGS, seed=5), path)
    return path


@pytest.fixture(scope="module")
def doc(store: Path) -> ReportDocument:
    return document.build(Store.open_existing(store), "bench")


def test_json_names_what_each_headline_interval_generalises_to(store: Path) -> None:
    res = run_cli("report", "--store", str(store), "--format", "json", "--margin", "0.04")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for c in out["configurations"]:
        hi = c["score_intervals"]
        assert hi["these_tasks"]["generalises_to"] == THESE_TASKS and hi["new_tasks"]["generalises_to"] == NEW_TASKS
        assert hi["these_tasks"]["estimate"] == hi["new_tasks"]["estimate"] == c["score_infra_as_failure"]["estimate"]
        assert hi["new_tasks"]["df"] == 11  # tasks - 1
    cal = out["statistics"]["calibration"]
    assert cal["margin"] == 0.04  # --margin is recorded where the decision is
    assert "generalises to new tasks" in cal["mdd_applied"]["label"]


def test_markdown_html_and_viewer_label_both_intervals_and_the_applied_mdd(doc: ReportDocument, store: Path) -> None:
    from starlette.testclient import TestClient

    from orchestrator.view.app import create_app

    md = markdown.render(doc)
    page = html.render(doc)
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        view = client.get("/runs/bench").text
    cal = doc.calibration
    assert cal is not None
    for text in (md, page, view):
        assert THESE in text and NEW in text
        assert "Minimum detectable difference the decision applied" in text and "paired MDD" in text
        assert f"Publish with limit {cal.recommended_label}" in text.replace("<strong>", "").replace("</strong>", "")
        assert "permutation p within tasks" in text


def test_terminal_labels_both_intervals_and_the_applied_mdd(doc: ReportDocument) -> None:
    buf = io.StringIO()
    terminal.print_report(doc, Console(width=250, file=buf, force_terminal=False))
    out = buf.getvalue()
    assert THESE in out and NEW in out
    assert "minimum detectable difference the decision applied" in out and "paired MDD" in out
    assert doc.calibration is not None
    assert f"calibration: {doc.calibration.summary}"[:60] in " ".join(out.split())


def test_compare_prints_holm_beside_every_adjusted_p_infra_included(store: Path, tmp_path: Path) -> None:
    from orchestrator.report import comparison

    other = tmp_path / "other.db"
    write_store(make_sweep(12, 6, CONFIGS, seed=9, task_seed=5), other)
    doc = document.comparison_document(
        Store.open_existing(store), "bench", Store.open_existing(other), "bench"
    ).to_dict()
    items = doc["statistics"]["comparisons"]["items"]
    text = comparison.markdown(doc)
    rows = [line for line in text.splitlines() if line.startswith("| A:")]
    assert len(rows) == len(items) == 3
    for line, it in zip(rows, items):
        cells = [c.strip() for c in line.strip("|").split("|")]
        infra, excluded = cells[-1], cells[-2]
        assert infra.endswith(f"(Holm {it['infra']['p_holm']:.4f})") or "(Holm <0.0001)" in infra
        assert "(Holm " in excluded
    assert "Holm families" in text
