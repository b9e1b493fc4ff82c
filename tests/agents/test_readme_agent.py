"""The README's own agent examples work as written: its experiment file and its command, taken literally from the
README, run from a checkout laid out as the README assumes (the file at the root, the bundled task, the reference
agent), with the agent on the host and, with the README's other `agent` line, inside the environment.

Two things are the test's: the upstream's address (a scripted model on loopback stands in for the provider, which
cannot be reached here) and the checkout's tasks (one bundled task, copied, instead of all of them)."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.agents.fake_model import FakeModel, Reply
from tests.agents.test_external_agent import SIEVE

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = "https://api.openai.com/v1"
KEY = "sk-readme-0123456789abcdef"


def agent_section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("To sweep your own agent")
    return text[start : text.index("\n## ", start)]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", agent_section(), re.S)


def readme_experiment(agent_line: str | None = None) -> str:
    """The README's experiment file, as text; with ``agent_line``, its `agent:` line replaced by that one."""
    main = blocks("yaml")[0]
    if agent_line is None:
        return main
    lines = main.splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith("agent:")]
    assert len(at) == 1, "the README's experiment has one `agent:` line"
    lines[at[0]] = agent_line if agent_line.endswith("\n") else agent_line + "\n"
    return "".join(lines)


def checkout(tmp_path: Path, experiment: str, upstream: str) -> Path:
    """A checkout as the README assumes it: the experiment file at its root, beside tasks/, examples/ and .venv/."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "tasks" / "prime-count", root / "tasks" / "prime-count")
    (root / "examples" / "agents").mkdir(parents=True)
    shutil.copy2(REPO / "examples" / "agents" / "reference_agent.py", root / "examples" / "agents")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "headroom").symlink_to(Path(sys.executable).parent / "headroom")
    assert experiment.count(UPSTREAM) == 1, "the README's experiment names the provider's API once"
    (root / "tb-sweep.yaml").write_text(experiment.replace(UPSTREAM, upstream))
    return root


def run_readme_command(root: Path) -> subprocess.CompletedProcess[str]:
    commands = blocks("sh")
    assert len(commands) == 1, "one command runs the README's experiment"
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    return subprocess.run(
        ["bash", "-e", "-c", commands[0]], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_readme_names_both_kinds_of_agent() -> None:
    experiment = yaml.safe_load(readme_experiment())
    assert experiment["agent"]["kind"] == "external"
    assert experiment["gateway"]["openai"]["api_key_env"] == "OPENAI_API_KEY"
    inside = yaml.safe_load(blocks("yaml")[1])
    assert list(inside) == ["agent"] and inside["agent"]["kind"] == "command"


@pytest.mark.parametrize("where", ["host", "environment"])
def test_the_readme_example_agent_solves_a_task_as_written(tmp_path: Path, where: str) -> None:
    agent_line = None if where == "host" else blocks("yaml")[1]
    text = readme_experiment(agent_line)
    plan = yaml.safe_load(text)
    trials = len(plan["configurations"]) * plan["attempts"]
    script = [Reply("", tool_calls=[{"name": "bash", "arguments": {"cmd": SIEVE}}]), Reply("done")]
    with FakeModel(script, openai_key=KEY) as fake:
        root = checkout(tmp_path, text, f"{fake.url}/v1")
        res = run_readme_command(root)
        assert res.returncode == 0, res.stderr[-3000:]
        assert len(fake.seen) == 2 * trials  # every try's two calls reached the provider through the gateway
        assert all(s.body["model"] == plan["model"]["name"] for s in fake.seen)
        assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in fake.seen)  # the key stayed in headroom
    db = sqlite3.connect(root / "headroom-results" / "headroom.db")
    rows = db.execute("SELECT outcome, usage_source, tokens_in FROM executions").fetchall()
    db.close()
    assert len(rows) == trials
    assert {(o, u) for o, u, _ in rows} == {("passed", "gateway")}
    assert all(t and t > 0 for _, _, t in rows)  # measured by the gateway, not reported by the agent
