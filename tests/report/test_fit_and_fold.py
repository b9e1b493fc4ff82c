"""One name per figure in every format (the glossary), a terminal report that fits 160 columns without splitting
a table or overrunning a line, no "df None" with one task, and the HTML report and the viewer's run page laid out
summary first, then the heatmap (timeouts marked), then every other section folded."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from benchmarks.bench_stats import write_store
from orchestrator.report import document, html, markdown, terminal
from orchestrator.report.model import ReportDocument
from orchestrator.stats import glossary
from orchestrator.stats.scoring_rules import HEADROOM_EXCL, HEADROOM_FAIL, RULES
from orchestrator.stats.synthetic import make_sweep
from orchestrator.store.sqlite import Store
from tests.report.imported import import_into

FIX = Path(__file__).parent.parent / "importers" / "fixtures"
#: Spellings the figures had before the glossary: none may come back.
OLD_NAMES = (
    "score excl. infra",
    "score (infra excluded)",
    "infra-excl.",
    "infra excl.",
    "infra-excluded:",
    "infra-excluded score",
    "pass rate (headline)",
    "infra rate ",
    "score (infra = fail)",
)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("fit")
    out = {}
    for name, (tasks, attempts) in {"sweep": (12, 5), "refused": (3, 2), "one-task": (1, 4)}.items():
        write_store(make_sweep(tasks, attempts, seed=3), tmp / f"{name}.db").close()
        out[name] = tmp / f"{name}.db"
    import_into(tmp / "imported.db", FIX / "tb_run", FIX / "harbor_job")
    out["imported"] = tmp / "imported.db"
    return out


def _doc(stores: dict[str, Path], name: str) -> ReportDocument:
    return document.build(Store.open_existing(stores[name]))


def _terminal(doc: ReportDocument, width: int) -> str:
    buf = io.StringIO()
    terminal.print_report(doc, Console(width=width, file=buf, highlight=False, color_system=None))
    return buf.getvalue()


def _view(store: Path, run_id: str) -> str:
    from starlette.testclient import TestClient

    from orchestrator.view.app import create_app

    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        return client.get(f"/runs/{run_id}").text


def test_the_rules_are_titled_by_the_glossary() -> None:
    assert RULES[HEADROOM_FAIL].title == glossary.SCORE_FAIL and RULES[HEADROOM_EXCL].title == glossary.SCORE_EXCL
    assert set(glossary.GLOSSARY) >= {glossary.SCORE_FAIL, glossary.SCORE_EXCL, glossary.INFRA_RATE}


@pytest.mark.parametrize("name", ["sweep", "imported"])
def test_one_name_per_figure_in_every_format(stores: dict[str, Path], name: str) -> None:
    doc = _doc(stores, name)
    formats = {
        "terminal": " ".join(_terminal(doc, 160).split()),
        "markdown": markdown.render(doc),
        "html": html.render(doc),
        "viewer": _view(stores[name], doc.run.run_id),
    }
    for fmt, text in formats.items():
        for old in OLD_NAMES:
            assert old not in text, (fmt, old)
        for name_ in (glossary.SCORE_FAIL, glossary.SCORE_EXCL, glossary.INFRA_RATE):
            assert name_ in text, (fmt, name_)


@pytest.mark.parametrize("name", ["sweep", "refused", "imported", "one-task"])
def test_the_terminal_report_fits_160_columns(stores: dict[str, Path], name: str) -> None:
    out = _terminal(_doc(stores, name), 160)
    lines = out.splitlines()
    assert "(1/" not in out and "…" not in out  # no table split into parts, no cell cut
    assert max(len(line) for line in lines) <= 160  # prose lines wrap at the width too


def test_one_task_says_why_there_is_no_new_tasks_interval(stores: dict[str, Path]) -> None:
    doc = _doc(stores, "one-task")
    texts = [_terminal(doc, 160), markdown.render(doc), html.render(doc)]
    for text in texts:
        assert "df None" not in text and "None tasks" not in text
    assert "No new-tasks interval for any configuration: 1 task, fewer than the 10" in " ".join(texts[0].split())


def test_the_html_report_leads_with_the_summary_and_the_heatmap_and_folds_the_rest(stores: dict[str, Path]) -> None:
    doc = _doc(stores, "sweep")
    page = html.render(doc)
    body = page[page.index("<body>") :]
    heads = re.findall(r"<h2[^>]*>(.*?)</h2>", body)
    assert heads[:3] == ["Summary", "Tasks × configurations", "Plots"]
    assert {"Setup", "Metrics", "Checks on the run", "Calibration recommendation"} <= set(heads)
    lead = body[: body.index("<details")]
    assert 'class="heatmap"' in lead and "<h2>Setup</h2>" not in lead  # the heatmap right after the summary
    folded = re.findall(r'<details class="section" id="[^"]+"><summary><h2>(.*?)</h2></summary>', body)
    assert folded == heads[2:]
    assert not re.search(r"<details[^>]*\bopen\b", body)  # folded until the reader opens one
    # The heatmap marks timeouts: every cell whose trials timed out says how many.
    assert doc.statistics is not None
    timed_out = [
        (t.task_id, lab, c.timeouts) for t in doc.statistics.tasks for lab, c in t.configs.items() if c.timeouts
    ]
    assert timed_out
    for tid, lab, n in timed_out:
        cell = re.search(rf'<td class="cell"[^>]*data-task="{tid}" data-config="{re.escape(lab)}">(.*?)</td>', lead)
        assert cell and f"{n} timeout" in cell.group(1)


def test_the_viewer_run_page_marks_timeouts_in_the_heatmap_before_the_folded_sections(stores: dict[str, Path]) -> None:
    doc = _doc(stores, "sweep")
    page = _view(stores["sweep"], doc.run.run_id)
    lead = page[page.index('<article class="report">') : page.index("<details")]
    assert "<h2>Summary</h2>" in lead and '<h2 id="heatmap">' in lead
    assert doc.statistics is not None
    n = sum(1 for t in doc.statistics.tasks for c in t.configs.values() if c.timeouts)
    assert n and len(re.findall(r"<small>[^<]*\d+ timeouts?", lead)) == n


@pytest.mark.parametrize("name", ["sweep", "imported"])
def test_the_comparison_fits_160_columns(stores: dict[str, Path], name: str) -> None:
    from orchestrator.report import comparison

    store = Store.open_existing(stores[name])
    buf = io.StringIO()
    comparison.print_table(
        document.comparison_document(store, None, store, None),
        Console(width=160, file=buf, highlight=False, color_system=None),
    )
    out = buf.getvalue()
    assert "(1/" not in out and "…" not in out and max(len(line) for line in out.splitlines()) <= 160
    for header in comparison.HEADERS:  # every column is still there, under its header (folded at word breaks)
        assert all(word in " ".join(out.split()) for word in header.split()), header
