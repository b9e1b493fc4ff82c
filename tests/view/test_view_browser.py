"""`headroom view` in a real headless Chromium (Debian's chromium + chromium-driver, installed by
scripts/browser-deps.sh): pages load, the heatmap leads to a try's evidence, and what the
browser shows matches the store. A screenshot of the run page is kept in test-artifacts/."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.report import document
from orchestrator.report.text import rate
from orchestrator.store.sqlite import Store

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.slow,
    # CI runs scripts/test.sh, which installs them: there a missing browser fails the tests instead.
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER) and not os.environ.get("CI"),
        reason="chromium/chromedriver missing: run scripts/browser-deps.sh",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM  # Debian's browser; nothing is downloaded
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        # Keep the browser's own traffic off the network: the tests talk to 127.0.0.1 only.
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: object, css: str, timeout: float = 60) -> object:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def test_run_list_shows_what_the_store_holds(browser, view_server, view_store):
    from selenium.webdriver.common.by import By

    browser.get(view_server + "/")
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    store = Store.open_existing(view_store)
    runs = list(reversed(store.runs()))
    assert [r.get_attribute("data-run") for r in rows] == [r.run_id for r in runs]
    for row, info in zip(rows, runs):
        assert row.find_element(By.CSS_SELECTOR, ".status").text == info.status == "finished"
        assert row.find_element(By.CSS_SELECTOR, ".backend").text == info.backend
        assert row.find_element(By.CSS_SELECTOR, ".enforcement").text == info.enforcement
        caps = store.provenance(info.run_id).to_stored()["backend"]["abilities"]
        assert row.find_element(By.CSS_SELECTOR, ".isolation").text == caps["isolation"]


def test_run_page_hover_heatmap_click_through_to_evidence(browser, view_server, view_store):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    store = Store.open_existing(view_store)
    run_id = store.runs()[0].run_id  # the 3-configuration run
    doc = document.build(store, run_id)
    browser.set_window_size(1400, 3600)  # the whole run page in one screenshot, with the hover label on it
    browser.get(f"{view_server}/runs/{run_id}")
    _wait(browser, "table.heatmap")

    # What shows first: the summary and the heatmap; every other section is folded under its heading.
    report = browser.find_element(By.CSS_SELECTOR, "article.report")
    assert report.find_element(By.CSS_SELECTOR, "table.heatmap").is_displayed()
    shown = report.text
    for c in doc.configurations:
        assert rate(c.infra_error_rate) in shown  # the summary's infra-error rate, on screen
    sections = report.find_elements(By.CSS_SELECTOR, "details.section")
    assert sections and not any(d.get_attribute("open") for d in sections)
    rule = "every candidate limit is compared with the strict limit only"  # the calibration section's text
    assert "Calibration recommendation" in shown and rule not in shown  # folded: its heading only
    # Everything is on the page (the store's numbers, intervals included), one click away.
    text = report.get_attribute("textContent")
    for c in doc.configurations:
        assert rate(c.score_infra_as_failure) in text
    assert "oom_killed" in text and rule in text

    # The plot is drawn when its section is opened (a folded plot has no size to draw at).
    assert browser.find_element(By.ID, "rates-plot").get_attribute("data-drawn") is None
    browser.find_element(By.CSS_SELECTOR, "details#plots > summary").click()
    _wait(browser, "#rates-plot[data-ready='1']")

    # Hovering a point of the rates plot shows that configuration's numbers.
    strict = next(c for c in doc.configurations if c.label == "1x-strict")
    point = browser.find_elements(By.CSS_SELECTOR, "#rates-plot .scatterlayer .trace:first-child .points path")[0]
    ActionChains(browser).move_to_element(point).perform()
    hover = _wait(browser, "#rates-plot .hoverlayer .hovertext", timeout=20)
    est = strict.score_infra_as_failure
    assert "1x-strict" in hover.text and f"{100 * (est.estimate or 0):.1f}%" in hover.text
    assert f"{est.k} of {est.n} trials" in hover.text

    ARTIFACTS.mkdir(exist_ok=True)
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(ARTIFACTS / "view-run-page.png"))

    # Heatmap cell: hog under 1x-strict (64 MiB task, 80 MiB allocation: every attempt is OOM-killed).
    cell = browser.find_element(By.CSS_SELECTOR, "table.heatmap td[data-task='hog'][data-config='1x-strict']")
    assert doc.statistics is not None
    task_row = next(t for t in doc.statistics.tasks if t.task_id == "hog").configs["1x-strict"]
    assert cell.text.startswith(f"{task_row.passed}/{task_row.n}") and "infra" in cell.text
    cell.find_element(By.TAG_NAME, "a").click()
    _wait(browser, "#trials")
    rows = browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr")
    planned = [
        r
        for r in store.db.execute(
            "SELECT trial_id FROM trials WHERE run_id=? AND task_id='hog' AND config_label='1x-strict' ORDER BY attempt",
            (run_id,),
        )
    ]
    assert len(rows) == len(planned) == 3
    assert all(r.find_element(By.CSS_SELECTOR, ".outcome").text == "infra_error" for r in rows)

    # Follow the first trial's try #0 to its evidence.
    rows[0].find_elements(By.CSS_SELECTOR, "td a")[1].click()
    section = _wait(browser, "section#try-0")
    trial_id = browser.find_element(By.ID, "trial-id").text
    row = store.db.execute(
        "SELECT * FROM executions WHERE run_id=? AND trial_id=? AND try=0", (run_id, trial_id)
    ).fetchone()
    assert section.find_element(By.CSS_SELECTOR, ".try-outcome").text == row["outcome"] == "infra_error"
    assert section.find_element(By.CSS_SELECTOR, ".try-reason").text == row["reason"] == "oom_killed"
    assert f"{row['limit_memory_bytes'] / 2**20:.0f} MiB" in section.find_element(By.CSS_SELECTOR, ".try-memory").text
    section.find_element(By.CSS_SELECTOR, "details.evidence summary").click()
    shown = json.loads(section.find_element(By.CSS_SELECTOR, "pre.evidence-json").text)
    stored = store.evidence(run_id, trial_id)[0]
    stored.pop("try")
    assert shown == stored and shown["agent"]["oom_kills"] >= 1
    assert "Killed" in section.find_element(By.CSS_SELECTOR, "pre.log").text  # the agent's stderr tail
    assert "agent" in section.find_element(By.CSS_SELECTOR, "table.steps").text
    prov = browser.find_element(By.CSS_SELECTOR, "#provenance")
    prov.find_elements(By.TAG_NAME, "summary")[1].click()
    assert json.loads(prov.find_element(By.CSS_SELECTOR, "pre.provenance-json").text)["orchestrator"]["version"]


def test_comparison_page_matches_headroom_compare(browser, view_server, view_store):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    store = Store.open_existing(view_store)
    a, b = (r.run_id for r in store.runs())
    browser.get(view_server + "/compare")
    form = browser.find_element(By.ID, "compare-form")
    Select(form.find_element(By.NAME, "a")).select_by_value(a)
    Select(form.find_element(By.NAME, "b")).select_by_value(b)
    form.find_element(By.TAG_NAME, "button").click()
    table = _wait(browser, "article.comparison table")
    doc = document.comparison_document(store, a, store, b).to_dict()
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    items = doc["statistics"]["comparisons"]["items"]
    assert len(rows) == len(items) == 2  # shared labels: 1x-strict and unbounded
    assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == [f"{it['a']} vs {it['b']}" for it in items]
