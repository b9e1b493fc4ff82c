"""`headroom view` over HTTP: loopback only, read-only, local assets, clear errors."""

from __future__ import annotations

import hashlib
import html
import re
import socket
from pathlib import Path
from urllib.parse import quote

import httpx
import psutil
import pytest
from starlette.testclient import TestClient

from orchestrator.spec.provenance import read_stored
from orchestrator.store.sqlite import Store
from orchestrator.view import data
from orchestrator.view.app import create_app
from tests.cli_run import headroom as run_cli


def _digest(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.parent.iterdir())}


@pytest.fixture(scope="module")
def client(view_store: Path) -> TestClient:
    return TestClient(create_app(view_store), base_url="http://127.0.0.1")


def test_pages_leave_the_store_untouched_and_link_only_local_assets(client: TestClient, view_store: Path) -> None:
    before = _digest(view_store)
    store = Store.open_existing(view_store)
    run_id = store.runs()[0].run_id
    trial_id = store.db.execute("SELECT trial_id FROM trials WHERE run_id=? LIMIT 1", (run_id,)).fetchone()[0]
    pages = [
        "/",
        f"/runs/{run_id}",
        f"/runs/{run_id}/cell?task=hog&config=1x-strict",
        f"/runs/{run_id}/trial?id={quote(trial_id)}",
        f"/compare?a={run_id}&b={store.runs()[1].run_id}",
    ]
    for url in pages:
        res = client.get(url)
        assert res.status_code == 200, url
        refs = re.findall(r'(?:src|href)="([^"]*)"', res.text)
        assert refs and all(r.startswith(("/", "#")) for r in refs), (
            url,
            [r for r in refs if not r.startswith(("/", "#"))],
        )
        for asset in re.findall(r'src="(/[^"]*)"', res.text) + re.findall(r'href="(/static/[^"]*)"', res.text):
            assert client.get(asset).status_code == 200, asset
    assert client.get("/assets/plotly.min.js").headers["content-type"].startswith("text/javascript")
    assert _digest(view_store) == before  # nothing written, not even a journal


def test_unknown_things_are_404_with_a_message(client: TestClient, view_store: Path) -> None:
    run_id = Store.open_existing(view_store).runs()[0].run_id
    for url, words in (
        ("/runs/nope", "no run 'nope'"),
        (f"/runs/{run_id}/trial?id=nope", "no trial 'nope'"),
        (f"/runs/{run_id}/cell?task=nope&config=1x-strict", "no trials of task 'nope'"),
    ):
        res = client.get(url)
        assert res.status_code == 404 and words in html.unescape(res.text)


def test_foreign_host_header_is_refused(view_store: Path) -> None:
    # A page elsewhere that rebinds its DNS name to 127.0.0.1 still sends its own Host.
    res = TestClient(create_app(view_store), base_url="http://attacker.example").get("/")
    assert res.status_code == 400


def test_isolation_shown_when_recorded_and_unknown_otherwise() -> None:
    assert data.isolation_of(read_stored({"backend": {"abilities": {"isolation": "container"}}})) == "container"
    # provenance written before backends kept one declaration: its capabilities still say
    assert data.isolation_of(read_stored({"backend": {"capabilities": {"isolation": "namespaces"}}})) == "namespaces"
    assert data.isolation_of(read_stored({"backend": {"kernel": "6.1"}})) == "unknown"
    assert data.isolation_of(read_stored({"isolation": "none"})) == "none"  # an early row's, kept in legacy


def test_server_listens_on_loopback_only(view_server: str) -> None:
    port = int(view_server.rsplit(":", 1)[1])
    listening = [c for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    assert listening and all(c.laddr.ip == "127.0.0.1" for c in listening)
    assert httpx.get(view_server + "/").status_code == 200


def test_busy_port_and_missing_store_are_one_line_errors(view_store: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = str(busy.getsockname()[1])
        res = run_cli("view", "--store", str(view_store), "--port", port, timeout=120)
    assert res.returncode == 2 and "--port" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("view", "--store", str(tmp_path / "none.db"), timeout=120)
    assert res.returncode == 2 and "no such store" in res.stderr and "Traceback" not in res.stderr


def test_compare_with_nothing_shared_explains_instead_of_failing(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.taskfactory import runs_sharing_nothing

    store = tmp_path_factory.mktemp("disjoint") / "h.db"
    ids = runs_sharing_nothing(tmp_path_factory.mktemp("disjoint-tasks"), store)
    client = TestClient(create_app(store), base_url="http://127.0.0.1", raise_server_exceptions=False)
    for other, words in (
        ("other_tasks", "the runs share no task"),
        ("other_configs", "the runs share no configuration"),
    ):
        res = client.get(f"/compare?a={ids['base']}&b={ids[other]}")
        assert res.status_code == 200, res.status_code
        assert 'class="error"' in res.text and words in html.unescape(res.text)
    ok = client.get(f"/compare?a={ids['base']}&b={ids['base']}")
    assert ok.status_code == 200 and "both runs hold" in ok.text and 'class="error"' not in ok.text


def test_run_page_leads_with_the_summary_then_the_heatmap(client: TestClient, view_store: Path) -> None:
    from orchestrator.report import document, summary
    from orchestrator.report.text import pct

    store = Store.open_existing(view_store)
    run_id = store.runs()[0].run_id
    doc = document.build(store, run_id)
    page = html.unescape(client.get(f"/runs/{run_id}").text)
    article = page[page.index('<article class="report">') :]
    assert re.findall(r"<h2[^>]*>(.*?)</h2>", article)[:4] == ["Summary", "Tasks × configurations", "Plots", "Setup"]
    first = article[: article.index('<h2 id="heatmap">')]
    assert summary.recommendation(doc) in first and summary.isolation(doc) in first
    for c in doc.configurations:
        assert f"<td>{c.label}</td>\n<td>{pct(c.score_infra_as_failure.estimate)}</td>" in first
    assert "<h2>Per task</h2>" not in article  # the heatmap replaces the per-task table
    # Everything after the summary and the heatmap is folded, each section under its own heading.
    rest = article[article.index('<h2 id="heatmap">') :]
    assert "<details" not in first and "</table>" in rest[: rest.index("<details")]  # the heatmap stands open
    folded = re.findall(r'<details class="section" id="([^"]+)"><summary><h2>(.*?)</h2></summary>', rest)
    assert [t for _, t in folded] == re.findall(r"<h2[^>]*>(.*?)</h2>", article)[2:]
    assert ("plots", "Plots") in folded and not re.search(r"<details[^>]* open", article)
