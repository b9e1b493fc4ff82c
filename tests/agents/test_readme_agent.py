"""The README's experiment example works as written: its agent (the reference agent, on the host) and its gateway,
run from the checkout on a bundled task. Only the upstream's address is the test's (a scripted model on loopback
stands in for the provider, which cannot be reached here), and the plan is cut to one try."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

from tests.agents.fake_model import FakeModel, Reply
from tests.agents.test_external_agent import SIEVE

REPO = Path(__file__).resolve().parents[2]


def readme_experiment() -> dict:
    text = (REPO / "README.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "reference_agent.py" in b]
    assert len(blocks) == 1, "the README's experiment example names the reference agent"
    return yaml.safe_load(blocks[0])


def test_the_readme_example_agent_solves_a_task_as_written(tmp_path: Path) -> None:
    experiment = readme_experiment()
    key_var = experiment["gateway"]["openai"]["api_key_env"]
    script = [Reply("", tool_calls=[{"name": "bash", "arguments": {"cmd": SIEVE}}]), Reply("done")]
    with FakeModel(script, openai_key="sk-readme-0123456789abcdef") as fake:
        experiment["gateway"]["openai"]["base_url"] = f"{fake.url}/v1"
        experiment.update(tasks_dir=str(REPO / "tasks"), tasks=["prime-count"], configurations=["3"], attempts=1)
        spec = tmp_path / "tb-sweep.yaml"
        spec.write_text(yaml.safe_dump(experiment))
        res = subprocess.run([sys.executable, "-m", "orchestrator", "sweep", "--experiment", str(spec), "--store",
                              str(tmp_path / "h.db"), "--format", "none", "--no-canary"], cwd=REPO,
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, key_var: "sk-readme-0123456789abcdef"})
        assert res.returncode == 0, res.stderr
        assert fake.seen and all(s.body["model"] == "gpt-4.1-mini" for s in fake.seen)
    db = sqlite3.connect(tmp_path / "h.db")
    assert db.execute("SELECT outcome, usage_source FROM executions").fetchall() == [("passed", "gateway")]
    db.close()
