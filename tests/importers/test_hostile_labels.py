"""An agent name read from an imported file is text in every report format, never markup (the HTML report
renders the Markdown report: raw HTML in it must not pass through)."""

from __future__ import annotations

from pathlib import Path

from tests.importers.formats import T, write_tb_run

HOSTILE = "<img src=x onerror=alert(1)>"


def test_a_hostile_agent_name_is_escaped_in_the_html_report(tmp_path: Path, import_json, cli) -> None:
    run = write_tb_run(tmp_path / "2026-01-01__00-00-00", [T("t1", True), T("t2", False)], agent=HOSTILE, model=None)
    store = tmp_path / "s.db"
    import_json(store, str(run["dir"]))
    out = tmp_path / "r.html"
    res = cli("report", "--store", str(store), "--format", "html", "-o", str(out))
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert HOSTILE not in page and "onerror=alert(1)>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # shown, as text
