"""The README stays true: its set-up is two commands, it lists every variable a task or agent gets,
and its first-task walkthrough runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from orchestrator.agents.gateway import service
from orchestrator.engine import launch
from tests.cli_run import headroom as run_cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_two_set_up_commands_and_ci_runs_the_second() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", section("Set-up"), re.S)
    assert [b.strip().count("\n") for b in blocks] == [0, 0]  # exactly two, one line each
    first, second = (b.strip() for b in blocks)
    assert first.startswith("scripts/install-sandbox.sh && ")  # the sandbox first: the first run is isolated
    assert second in (ROOT / ".ci" / "run").read_text()


def test_every_variable_a_step_gets_is_listed() -> None:
    table = section("Your first task in five minutes")
    for name in (*launch.CONTRACT, *launch.CONTRACT_PATHS, service.BASE_URL, service.API_KEY):
        assert f"`{name}`" in table, name


def test_the_first_task_walkthrough_runs_as_written(tmp_path: Path) -> None:
    script = re.findall(r"```sh\n(.*?)```", section("Your first task in five minutes"), re.S)[0]
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "headroom").symlink_to(Path(sys.executable).parent / "headroom")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "valid: 1 tasks" in proc.stdout
    assert "sweep: 6/6 trials finished (100%): passed 6" in proc.stderr
    runs = run_cli("runs", "--json", cwd=tmp_path, timeout=120)
    assert '"name": "first-task"' in runs.stdout and '"score": 1.0' in runs.stdout
