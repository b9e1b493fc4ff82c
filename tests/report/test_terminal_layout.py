"""The terminal report never cuts a number or a column header, at any width and off a TTY."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from benchmarks.bench_stats import write_store
from orchestrator.report import comparison, costs, document, terminal
from orchestrator.report.text import rate
from orchestrator.stats.glossary import CLUSTER_SCORE, INFRA_RATE, SCORE_EXCL
from orchestrator.stats.synthetic import make_sweep
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("layout") / "h.db"
    df = make_sweep(12, 5, seed=3)
    df.loc[df.index[::3], "cost_usd"] = float("nan")  # partial cost coverage, as agents report it
    write_store(df, path).close()
    return path


def _render(doc: dict, width: int) -> str:
    buf = io.StringIO()
    terminal.print_report(doc, Console(width=width, file=buf, highlight=False))  # a file: not a TTY
    return buf.getvalue()


@pytest.mark.parametrize("width", [60, 80, 120, 160])
def test_every_number_and_header_is_whole(store_path: Path, width: int) -> None:
    doc = document.build(Store.open_existing(store_path))
    out = _render(doc, width)
    lines = out.splitlines()
    assert "…" not in out
    assert max(len(line) for line in lines) <= width  # tables and prose lines alike
    whole = lambda s: any(s in line for line in lines)  # noqa: E731  (on one line: not wrapped mid-number)
    for c in doc.configurations:
        for key in ("score_infra_as_failure", "infra_error_rate", "score_infra_excluded"):
            assert whole(rate(c.rate_block(key))), (width, rate(c.rate_block(key)))
        for cell in costs.cost_rows([c])[0]:
            assert whole(cell), (width, cell)
    flat = " ".join(out.split())
    for header in (INFRA_RATE, SCORE_EXCL, CLUSTER_SCORE, *costs.HEADERS):
        # whole on one line where the table fits unfolded; folded at word breaks (never cut) where it does not
        assert whole(header) or all(word in flat for word in header.split()), (width, header)
    if width >= 160:  # the report's width: every table whole, no table split into parts, no line longer
        assert "(1/" not in out and max(len(line) for line in lines) <= width
        for header in (INFRA_RATE, SCORE_EXCL, CLUSTER_SCORE, *costs.HEADERS):
            assert whole(header), header


def test_narrow_console_splits_tables_instead_of_shrinking(store_path: Path) -> None:
    doc = document.build(Store.open_existing(store_path))
    assert "(1/" in _render(doc, 80) and "(1/" not in _render(doc, 400).split("Cost and latency")[0]


def test_cli_off_a_tty_prints_whole_numbers(store_path: Path) -> None:
    res = run_cli("report", "--store", str(store_path))
    assert res.returncode == 0, res.stderr
    assert "…" not in res.stdout and "cluster-level" in res.stdout and "cost reported" in res.stdout
    doc = document.build(Store.open_existing(store_path))
    for c in doc.configurations:
        assert rate(c.pass_rate) in res.stdout


def test_comparison_table_is_whole_on_a_narrow_console(store_path: Path) -> None:
    store = Store.open_existing(store_path)
    doc = document.comparison_document(store, None, store, None).to_dict()
    buf = io.StringIO()
    comparison.print_table(doc, Console(width=70, file=buf))
    out = buf.getvalue()
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 70
    flat = " ".join(out.split())
    for header in comparison.HEADERS:  # folded at word breaks where a column is wider than the console, never cut
        assert any(header in line for line in out.splitlines()) or all(w in flat for w in header.split()), header
