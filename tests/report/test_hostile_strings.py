"""Hostile strings in every field a report shows, in every format: they read as text, never run or render as markup.

The store is made the way users make one: ``results import`` of Terminal-Bench runs and a Harbor job whose
agent names, model names, task ids and failure types are hostile (with a hostile ``--name`` and
``--label``), and a real ``sweep`` with a hostile ``--model``, ``--name``, task id and agent output. Then
every reading command renders it: the report as a table, Markdown, HTML and JSON, ``runs list``,
``runs compare`` and ``runs show``. The HTML is loaded in a real headless Chromium (Debian's chromium and
chromium-driver, scripts/browser-deps.sh): the payloads would set ``window.__pwned`` and the page title.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from orchestrator.report.safe import visible_controls
from tests.cli_run import headroom as run_cli
from tests.importers.formats import H, T, write_harbor_job, write_tb_run
from tests.taskfactory import write_task

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")

# Each would run script, draw markup or move the terminal if a renderer let it through.
XSS = "<img src=x onerror=\"window.__pwned=1;document.title='PWNED'\">"
SCRIPT = "<script>window.__pwned=2</script>"
LINK = "[click](javascript:window.__pwned=3)"
MD = "**bold** _em_ `code` |pipe| # head ~~strike~~ &amp;"
RICH = "[red]rich[/red] [/] [link=http://x]y[/link]"
TERM = "\x1b[31mred\x1b]0;retitled\x07\u202eflip"
BREAK = "\n## Forged heading\n| forged | row |"
PAYLOAD = XSS + SCRIPT + LINK + MD + RICH + TERM + BREAK
#: Payloads that fit a file name (a task directory, a trial directory): no "/" and no quote.
NAME_PAYLOAD = "<img src=x onerror=window.__pwned=4>[bold]x**b**|"

# What must appear, character for character, as text (the terminal spells controls out).
TEXT_MARKERS = [XSS, SCRIPT, LINK, MD, RICH]

pytestmark = pytest.mark.slow


def headroom(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"COLUMNS": "200"}, check=ok)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("hostile-report")
    store = root / "h.db"
    # Terminal-Bench: hostile agent, model, task ids and failure mode; the run name given by the user.
    tb = root / "tb" / "results"
    task_a, task_b = PAYLOAD.replace("/", "%"), "t2" + SCRIPT.replace("/", "%")
    for sub, agent, model, wins in (
        ("sub-a", PAYLOAD, PAYLOAD + "-m", (True, False)),
        ("sub-b", "b" + PAYLOAD, "m2", (False, False)),
    ):
        write_tb_run(
            tb / sub / "run-1",
            [T(task_a, wins[0], mode=PAYLOAD), T(task_a, wins[1], mode=PAYLOAD), T(task_b, True), T(task_b, False)],
            agent=agent,
            model=model,
            per_trial_copies=False,
        )
    headroom("results", "import", str(tb), "--store", str(store), "--name", PAYLOAD)
    # Harbor: a hostile exception type, agent and model, and labels the user gave.
    job = root / "harbor" / "job-1"
    write_harbor_job(
        job,
        [H(NAME_PAYLOAD, 1.0), H(NAME_PAYLOAD, None, exception=PAYLOAD), H(task_b, 0.0), H(task_b, 1.0)],
        agent=PAYLOAD,
        model=PAYLOAD,
    )
    # The label the first import gave its first submission: the two runs then share a configuration to compare.
    headroom("results", "import", str(job), "--store", str(store), "--label", f"{PAYLOAD}@{PAYLOAD}-m")
    # A sweep headroom ran: hostile --model and --name, a hostile task id, and an agent that prints payloads.
    tasks = root / "tasks"
    solve = f"printf '%s\\n' {json.dumps(XSS + RICH)} ; printf '\\033[31mred\\033]0;retitled\\007\\n'\n"
    write_task(tasks, NAME_PAYLOAD, solve=solve + 'touch "$HEADROOM_WORKDIR/out"\n')
    write_task(tasks, "plain", solve="exit 3\n")
    headroom(
        "sweep", str(tasks), "--multipliers", "1,2", "--model", PAYLOAD, "--name", PAYLOAD,
        "--store", str(store), "--format", "none",
    )  # fmt: skip
    runs = json.loads(headroom("runs", "list", "--store", str(store), "--json").stdout)["runs"]
    assert len(runs) == 3
    return {"root": root, "store": store, "runs": [r["run_id"] for r in runs]}


class _Text(HTMLParser):
    """The text a browser would show, and every element and attribute the HTML holds."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Text:
    p = _Text()
    p.feed(page)
    return p


def _assert_inert_html(page: str, allowed: set[str]) -> str:
    """No element or attribute the data brought: only the renderer's own tags, no handler, no script URL."""
    p = _parse(page)
    for tag, attrs in p.tags:
        assert tag in allowed, (tag, attrs)
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name in ("href", "src", "action", "formaction", "srcset"):  # a URL: never a script
                assert not (value or "").strip().lower().startswith(("javascript:", "data:text")), (tag, name, value)
    return "".join(p.text)


# The tags a Markdown table report renders to, and nothing a payload could add.
MARKDOWN_TAGS = {
    "h1",
    "h2",
    "h3",
    "p",
    "ul",
    "ol",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "strong",
    "em",
    "code",
}


def _markdown_outputs(hostile: dict[str, object]) -> dict[str, str]:
    store, runs = str(hostile["store"]), hostile["runs"]
    assert isinstance(runs, list)
    out = {f"report {r}": headroom("report", f"{store}:{r}", "--format", "markdown").stdout for r in runs}
    out["compare"] = headroom(
        "runs", "compare", f"{store}:{runs[0]}", f"{store}:{runs[1]}", "--format", "markdown"
    ).stdout
    return out


def test_markdown_renders_every_hostile_string_as_text_and_never_as_html(hostile):
    for what, md in _markdown_outputs(hostile).items():
        # A permissive renderer (raw HTML on, as many Markdown viewers have it): nothing from the data is markup.
        rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
        text = _assert_inert_html(rendered, MARKDOWN_TAGS)
        assert not re.search(r"(?<!\\)<(img|script)", md), what  # only ever as "\\<img": text in any Markdown
        for made in ("<strong>bold</strong>", "<em>em</em>", "<code>code</code>", "<del>", "<a "):
            assert made not in rendered, (what, made)  # the payload's markup, had it been read as Markdown
        assert not re.search(r"<h\d>Forged heading", rendered), what
        assert "<td>forged</td>" not in rendered, what
        assert "Forged heading" in text, what  # the line break shown as \n, the rest kept as text
        for marker in TEXT_MARKERS:
            if what.startswith("report") or what == "compare":
                assert marker in text or marker.replace("/", "%") in text, (what, marker)


def _assert_plain_terminal(what: str, output: str, *, shows_term: bool = True) -> None:
    assert "\x1b" not in output and "\x07" not in output and "\u202e" not in output, (what, output[:2000])
    flat = re.sub(r"\s+", "", output)  # tables fold long cells over lines
    assert re.sub(r"\s+", "", RICH) in flat or "[bold]x**b**" in flat, what
    if shows_term:  # the controls spelled out, where the output shows a field holding them
        assert re.sub(r"\s+", "", visible_controls(TERM)) in flat, what


def test_terminal_outputs_show_hostile_strings_without_markup_or_escape_sequences(hostile):
    store, runs = str(hostile["store"]), hostile["runs"]
    assert isinstance(runs, list)
    outputs = {f"report {r}": headroom("report", f"{store}:{r}").stdout for r in runs}
    outputs["runs list"] = headroom("runs", "list", "--store", store).stdout
    outputs["compare"] = headroom("runs", "compare", f"{store}:{runs[0]}", f"{store}:{runs[1]}").stdout
    for r in runs:
        listing = headroom("runs", "show", f"{store}:{r}")
        outputs[f"runs show {r}"] = listing.stdout
        trials = json.loads(headroom("runs", "show", f"{store}:{r}", "--json").stdout)["trials"]
        first = next(t for t in trials if "img" in t["task_id"])  # one trial page per run: each is a process
        outputs[f"runs show {r} {first['trial_id']!r}"] = headroom(
            "runs", "show", f"{store}:{r}", first["trial_id"]
        ).stdout
    for what, output in outputs.items():  # the sweep's trial page shows its task id (no controls) and the agent's log
        _assert_plain_terminal(what, output, shows_term=not what.startswith(f"runs show {runs[2]} "))
    swept = runs[2]
    shown = [v for k, v in outputs.items() if k.startswith(f"runs show {swept} ")]
    assert shown, outputs.keys()
    for page in shown:  # the agent's own output, on the trial's page, as text
        flat = re.sub(r"\s+", "", page)
        assert re.sub(r"\s+", "", XSS + RICH) in flat, page
        assert "\\x1b[31mred\\x1b]0;retitled\\x07" in flat, page


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI"):
            pytest.fail("chromium/chromedriver missing in CI: scripts/browser-deps.sh installs them")
        pytest.skip("chromium/chromedriver missing: run scripts/browser-deps.sh")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM  # Debian's browser; nothing is downloaded
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_html_report_runs_no_script_in_chromium_and_shows_the_strings_as_text(hostile, browser, tmp_path):
    from selenium.webdriver.common.by import By

    store, runs = str(hostile["store"]), hostile["runs"]
    assert isinstance(runs, list)
    for r in runs:
        page = tmp_path / f"{r}.html"
        headroom("report", f"{store}:{r}", "--output", str(page))
        source = page.read_text()
        _assert_inert_html(
            source,
            MARKDOWN_TAGS
            | {"html", "head", "meta", "title", "style", "body", "details", "summary", "img", "small", "a"},
        )
        browser.get(page.as_uri())
        browser.find_element(By.CSS_SELECTOR, "body")
        # Every payload would have set one of these; an <img src=x> errors at once, a <script> runs at parse.
        assert browser.execute_script("return window.__pwned === undefined") is True, r
        assert browser.title != "PWNED", r  # the title holds the run's name as text, PWNED among it
        assert browser.title.startswith("headroom report"), browser.title
        assert browser.execute_script("return document.querySelectorAll('script, [onerror], svg').length") == 0, r
        imgs = browser.execute_script("return Array.from(document.images).map(i => i.src.slice(0, 22))")
        assert all(src == "data:image/png;base64," for src in imgs), imgs  # only the report's own plots
        shown = browser.execute_script("return document.body.textContent")
        for marker in (XSS, SCRIPT, LINK, "[red]rich[/red]", "**bold**"):
            assert marker in shown or marker.replace("/", "%") in shown, (r, marker)
        assert html.escape(XSS) in source or html.escape(XSS, quote=False) in source, r
