"""One headline per run, in every format: an imported submission leads with its own rule (reproducing the
published accuracy), labelled by the rule's name, with headroom's reading beside it and the trials that move
between them by reason; a native sweep leads with headroom's rule. The JSON names the headline rule once."""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from benchmarks.bench_stats import write_store
from orchestrator.report import document, html, markdown, render, summary, terminal
from orchestrator.report.model import ReportDocument
from orchestrator.stats.glossary import SCORE_FAIL
from orchestrator.stats.scoring_rules import HEADROOM_FAIL, TB_LEADERBOARD
from orchestrator.stats.synthetic import make_sweep
from orchestrator.store.sqlite import Store
from tests.importers.formats import T, write_tb_run
from tests.report.imported import import_into, three_run_submission

LABEL = "terminus@m/one"
TB = "Terminal-Bench leaderboard"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ReportDocument]:
    tmp = tmp_path_factory.mktemp("one-headline")
    store = tmp / "i.db"
    import_into(store, three_run_submission(tmp))
    return store, document.build(Store.open_existing(store))


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> ReportDocument:
    path = tmp_path_factory.mktemp("one-headline-native") / "n.db"
    write_store(make_sweep(4, 3, seed=2), path).close()
    return document.build(Store.open_existing(path))


def _terminal(doc: ReportDocument, width: int = 160) -> str:
    buf = io.StringIO()
    terminal.print_report(doc, Console(width=width, file=buf, highlight=False, color_system=None))
    return buf.getvalue()


def _keys(x: Any, path: str = "") -> list[str]:
    if isinstance(x, dict):
        return [k for key, v in x.items() for k in [f"{path}.{key}", *_keys(v, f"{path}.{key}")]]
    if isinstance(x, list):
        return [k for v in x for k in _keys(v, path + "[]")]
    return []


def test_the_json_names_the_headline_rule_once(imported: tuple[Path, ReportDocument], native: ReportDocument) -> None:
    out = json.loads(render.render_text(imported[1], "json"))
    assert out["headline_rule"] == TB_LEADERBOARD and out["schema_version"] == 2
    # No second field says (or disagrees about) what the headline is. (The provenance keeps the import
    # command's own summary as it was printed; it is a record, not the report's reading.)
    keys = [k for k in _keys(out) if not k.startswith(".provenance.import.")]
    assert [k for k in keys if "headline" in k.rsplit(".", 1)[-1]] == [".headline_rule"]
    assert "default" not in out["statistics"]["scoring_rules"]
    # The published accuracy under the headline rule: mean of 1/4, 3/4, 1/4.
    assert out["statistics"]["scoring_rules"]["configs"][LABEL][TB_LEADERBOARD]["estimate"] == pytest.approx(5 / 12)
    assert json.loads(render.render_text(native, "json"))["headline_rule"] == HEADROOM_FAIL


def _summary_text(text: str) -> str:
    """The terminal summary: from its title to the isolation line."""
    start = text.index("Summary (95% intervals)")
    return text[start : text.index("Isolation ", start)]


def test_terminal_summary_leads_with_the_sources_rule(imported: tuple[Path, ReportDocument]) -> None:
    out = _terminal(imported[1])
    head = _summary_text(out)
    flat = " ".join(head.split())
    assert summary.headers(imported[1])[1:4:2] == [f"{TB} (headline)", f"{SCORE_FAIL}, Wilson 95%: these tasks"]
    for header in summary.headers(imported[1]):  # folded onto several lines, every piece printed
        assert all(piece in head for piece in textwrap.wrap(header, 14)), header
    row = next(line.split() for line in head.splitlines() if line.split()[:1] == [LABEL])
    # The rule's score (two decimals, as published) and its stderr first, then headroom's 4/12 beside it.
    assert row[1:4] == ["41.67%", "16.67", "pts"] and row[4] == "33.3%"
    assert "Trials that move between them" in flat and f"{LABEL}: 1 trial: 1 resolved after agent timeout" in flat
    # Nothing calls headroom's reading the headline.
    assert not re.search(r"headline: headroom", out, flags=re.I)
    assert f"{TB} (headline)" in out and "failures (headline)" not in out and "excluded (headline)" not in out


def test_terminal_prints_the_per_run_table_and_labels_pooled_pass_at_k(imported: tuple[Path, ReportDocument]) -> None:
    out = _terminal(imported[1])
    assert "run by run" in out
    runs = {line.split()[3]: line.split() for line in out.splitlines() if re.search(r"│ run-[abc] ", line)}
    # Each run's own accuracy and pass@2, as its results.json reports them (by hand).
    assert {r: cells[7] for r, cells in runs.items()} == {"run-a": "25.00%", "run-b": "75.00%", "run-c": "25.00%"}
    [cell] = [
        line.split("│")[6]
        for line in out.splitlines()
        if "Terminal-Bench leaderboard (headline)" in line and line.startswith("│")
    ]
    assert cell.strip().startswith("pooled over 3") and "pass@2 70.00%" in out  # by hand: pooled over 6 attempts


def test_one_run_reads_in_the_singular(tmp_path: Path) -> None:
    run = write_tb_run(
        tmp_path / "sub" / "only-run",
        [T("t1", True), T("t1", False), T("t2", True), T("t2", True)],
        per_trial_copies=False,
    )
    store = tmp_path / "one.db"
    import_into(store, run["dir"])
    doc = document.build(Store.open_existing(store))
    for text in (_terminal(doc), markdown.render(doc)):
        flat = " ".join(text.split())
        assert "1 source run" in flat and "1 source runs" not in flat
        assert "pooled over" not in flat  # one run: its pass@k is the run's own


def test_markdown_html_and_viewer_lead_with_the_same_headline(imported: tuple[Path, ReportDocument]) -> None:
    from starlette.testclient import TestClient

    from orchestrator.view.app import create_app

    store, doc = imported
    md = markdown.render(doc)
    summary_md = md.split("\n## ")[1]
    assert summary_md.startswith("Summary")
    assert f"| config | {TB} (headline) |" in summary_md and f"| {LABEL} | 41.67% | 16.67 pts | 33.3% [" in summary_md
    assert f"- {LABEL}: 1 trial: 1 resolved after agent timeout." in summary_md
    metrics = md.split("\n## Metrics")[1].split("\n## ")[0]
    assert f"The run's headline is **{TB}**" in metrics and "Headline: " not in metrics
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{doc.run.run_id}").text
    for text in (html.render(doc), page):
        first = text[text.index("<h2>Summary</h2>") :]
        first = first[: first.index("<h2", 5)]
        assert f"<th>{TB} (headline)</th>" in first and f"<td>{LABEL}</td>\n<td>41.67%</td>" in first
        assert "1 resolved after agent timeout" in first


def test_a_native_sweep_leads_with_headrooms_rule(native: ReportDocument) -> None:
    assert native.headline_rule == HEADROOM_FAIL
    head = _summary_text(_terminal(native))
    assert SCORE_FAIL.split(",")[0] in head and "Trials that move" not in head
    md = markdown.render(native)
    assert f"| config | {SCORE_FAIL} |" in md.split("\n## ")[1]
    assert f"Headline: **{SCORE_FAIL}**" in md.split("\n## Metrics")[1]
