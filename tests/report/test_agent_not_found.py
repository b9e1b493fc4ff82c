"""An agent that could not start (exit 126/127, or harness_error(agent_not_found)) is visible: a line in the
report's checks and summary in every format, counted per configuration from the store's trial frame, and a
marker in the viewer's trial list. The trials come from a real sweep whose agent calls a missing tool."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.report import document, html, markdown, render, terminal
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task

# Task "broken": the agent runs a tool that does not exist (exit 127); task "fine": it does the work.
AGENT = 'if [ "$HEADROOM_TASK_ID" = broken ]; then my-missing-tool --go; else touch "$HEADROOM_WORKDIR/out"; fi'


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("not-found")
    for name in ("broken", "fine"):
        write_task(tmp / "tasks", name, solve="true\n")
    store = tmp / "h.db"
    res = run_cli(
        "sweep",
        str(tmp / "tasks"),
        "--multipliers",
        "3",
        "--attempts",
        "2",
        "--store",
        str(store),
        "--no-canary",
        "--format",
        "none",
        "--agent",
        "command",
        "--agent-command",
        AGENT,
    )
    assert res.returncode == 0, res.stderr
    return store


def _terminal(store: Path) -> str:
    buf = io.StringIO()
    terminal.print_report(document.build(Store.open_existing(store)), Console(width=160, file=buf, color_system=None))
    return " ".join(buf.getvalue().split())


def test_the_frame_flags_the_trials_whose_agent_did_not_start(swept: Path) -> None:
    df = Store.open_existing(swept).trial_frame(Store.open_existing(swept).runs()[0].run_id)
    flagged = df.groupby("task_id")["agent_not_found"].sum().to_dict()
    assert flagged == {"broken": 2, "fine": 0}
    # The verifier's verdict stands: the missing tool never wrote the answer.
    assert set(df.loc[df["task_id"] == "broken", "outcome"]) == {"failed"}


def test_every_format_says_the_agent_could_not_start(swept: Path) -> None:
    doc = document.build(Store.open_existing(swept))
    found = doc.checks.agent_not_found if doc.checks else None
    assert found is not None and (found.trials, found.as_harness_error) == (2, 0)
    assert found.by_configuration == {"1x/3x": 2}
    line = "Agent could not start in 2 trials"
    md = markdown.render(doc)
    assert line in md.split("\n## Checks on the run")[1] and line in md.split("\n## ")[1]  # checks and summary
    assert "their verdicts stand as the verifier gave them" in md
    assert line in _terminal(swept) and line in html.render(doc)
    out = json.loads(render.render_text(doc, "json"))
    assert out["checks"]["agent_not_found"] == {"trials": 2, "by_configuration": {"1x/3x": 2}, "as_harness_error": 0}


def test_the_outcome_harness_error_agent_not_found_is_counted_too(swept: Path, tmp_path: Path) -> None:
    """A store whose results name the reason (as the classifier records it when it decides so) counts it as such."""
    store = tmp_path / "h.db"
    shutil.copy(swept, store)
    db = sqlite3.connect(store)
    [(trial,)] = db.execute("SELECT trial_id FROM trials WHERE task_id = 'fine' LIMIT 1").fetchall()
    db.execute(
        "UPDATE executions SET outcome = 'harness_error', reason = 'agent_not_found' WHERE trial_id = ?", (trial,)
    )
    db.commit()
    db.close()
    doc = document.build(Store.open_existing(store))
    assert doc.checks is not None and (
        doc.checks.agent_not_found.trials,
        doc.checks.agent_not_found.as_harness_error,
    ) == (3, 1)
    assert "Agent could not start in 3 trials" in markdown.render(doc)
    assert "1 counted harness_error(agent_not_found)" in markdown.render(doc)


def test_the_viewers_trial_list_marks_them(swept: Path) -> None:
    from starlette.testclient import TestClient

    from orchestrator.view.app import create_app

    run_id = Store.open_existing(swept).runs()[0].run_id
    with TestClient(create_app(swept), base_url="http://127.0.0.1") as client:
        broken = client.get(f"/runs/{run_id}/cell", params={"task": "broken", "config": "1x/3x"}).text
        fine = client.get(f"/runs/{run_id}/cell", params={"task": "fine", "config": "1x/3x"}).text
    assert broken.count('class="marker agent-not-found"') == 2 and "(exit 127)" in broken
    assert "agent-not-found" not in fine
