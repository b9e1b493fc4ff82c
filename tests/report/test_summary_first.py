"""Every report format opens with the summary: each configuration's headline with its intervals, the
recommendation (or why there is none) and isolation; the sections follow. One name for the headline."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from benchmarks.bench_stats import write_store
from orchestrator.report import document, html, markdown, safe, summary, terminal
from orchestrator.report.model import ReportDocument
from orchestrator.report.text import pct
from orchestrator.stats.glossary import SCORE_FAIL
from orchestrator.stats.scoring_rules import HEADROOM_FAIL, RULES
from orchestrator.stats.synthetic import make_sweep
from orchestrator.store.sqlite import Store


def _doc(tmp: Path, tasks: int, attempts: int) -> ReportDocument:
    path = tmp / "h.db"
    write_store(make_sweep(tasks, attempts, seed=3), path).close()
    return document.build(Store.open_existing(path))


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> ReportDocument:
    d = _doc(tmp_path_factory.mktemp("summary"), 12, 5)
    assert d.calibration is not None and d.calibration.status == "recommended"
    return d


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> ReportDocument:
    d = _doc(tmp_path_factory.mktemp("refused"), 3, 2)  # fewer tasks than the calibration needs
    assert d.calibration is not None and d.calibration.status != "recommended"
    return d


def _terminal(d: ReportDocument, width: int = 100) -> str:
    buf = io.StringIO()
    terminal.print_report(d, Console(width=width, file=buf, highlight=False))
    return buf.getvalue()


def _headline_cells(d: ReportDocument) -> list[tuple[str, str]]:
    return [(c.label, pct(c.score_infra_as_failure.estimate)) for c in d.configurations]


def test_the_headline_has_its_rules_name() -> None:
    assert SCORE_FAIL == RULES[HEADROOM_FAIL].title


@pytest.mark.parametrize("which", ["doc", "refused"])
def test_terminal_opens_with_the_summary_within_one_screen(which: str, request: pytest.FixtureRequest) -> None:
    d = request.getfixturevalue(which)
    out = _terminal(d)
    head = out[: out.index("Outcomes by configuration")]  # the first section after the summary
    flat = " ".join(head.split())
    assert " ".join(summary.recommendation(d).split()) in flat and " ".join(summary.isolation(d).split()) in flat
    for label, score in _headline_cells(d):
        assert any(line.split()[:2] == [label, score] for line in head.splitlines() if line.split()), label
    lines = out.splitlines()
    upto = next(i for i, line in enumerate(lines) if line.startswith(("Recommendation:", "No recommendation:")))
    rec_end = upto + next(i for i, line in enumerate(lines[upto:]) if not line.strip() or line.startswith("Isolation"))
    assert rec_end < 40 and max(len(line) for line in lines[:rec_end]) <= 100  # one screen at 100 columns


@pytest.mark.parametrize("which", ["doc", "refused"])
def test_markdown_opens_with_the_summary(which: str, request: pytest.FixtureRequest) -> None:
    d = request.getfixturevalue(which)
    md = markdown.render(d)
    heads = re.findall(r"^## (.+)$", md, flags=re.M)
    assert heads[0] == "Summary"
    first = md.split("\n## ")[1]
    # The Markdown holds the document's text escaped (a reason's "3 < 10" is "3 \\< 10": orchestrator/report/safe.py).
    shown = safe.for_markdown(d)
    assert summary.recommendation(shown) in first and summary.isolation(shown) in first and SCORE_FAIL in first
    for label, score in _headline_cells(d):
        assert f"| {label} | {score} |" in first
    # One name: the Metrics table uses it too, and the old spellings are gone.
    assert f"| {SCORE_FAIL} |" in md.split("\n## Metrics")[1] and "infra = fail" not in md


def test_html_opens_with_the_summary(doc: ReportDocument) -> None:
    page = html.render(doc)
    body = page[page.index("<body>") :]
    h2 = re.findall(r"<h2[^>]*>(.*?)</h2>", body)
    assert h2[0] == "Summary"
    first = body[body.index("<h2>Summary</h2>") : body.index("<h2>Setup</h2>")]
    assert "Recommendation: publish" in first and (doc.calibration.summary or "").split(":")[0] in first
    for label, score in _headline_cells(doc):
        assert f"<td>{label}</td>\n<td>{score}</td>" in first


def test_heatmap_cells_mark_timeouts(doc: ReportDocument) -> None:
    from orchestrator.report import heatmap

    assert doc.statistics is not None
    cells = [(t.task_id, lab, c) for t in doc.statistics.tasks for lab, c in t.configs.items()]
    timed_out = [(tid, lab, c) for tid, lab, c in cells if c.timeouts]
    assert timed_out  # the synthetic sweep has timeouts
    tid, lab, c = timed_out[0]
    assert f"{c.timeouts} timeout" in heatmap.cell_text(c)[1]
    grid = heatmap.render(doc.statistics.tasks, doc.statistics.config_order)
    assert f"{tid} × {lab}: {c.passed}/{c.n} passed" in grid and f"{c.timeouts} timeout" in grid
