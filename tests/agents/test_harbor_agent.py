"""Harbor's agents run unchanged under headroom (``agent.kind: harbor``): Harbor 0.25.0 in its own interpreter
(``scripts/harbor/install.sh``), in the external agent's host sandbox, acting on the trial only through the exec
channel, its model calls through the gateway.

Real parts: Harbor's own oracle, nop and terminus-2 classes from the pinned package, the local backend's sandbox,
bubblewrap around the adapter, the gateway. The model is tests/agents/fake_model.py, a scripted server on
loopback that stands in for a provider (which cannot run here): terminus-2's JSON replies are scripted.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.agents import harbor
from orchestrator.artifacts import execlog, names
from orchestrator.errors import SpecError
from orchestrator.spec.experiment import AgentSpec
from tests.agents.fake_model import FakeModel, Reply
from tests.agents.test_external_agent import artifacts, sweep
from tests.taskfactory import write_task


def _harbor_python() -> str | None:
    try:
        return harbor.python()
    except SpecError:
        return None


HARBOR_PYTHON = _harbor_python()
requires_harbor = pytest.mark.skipif(
    HARBOR_PYTHON is None, reason="Harbor's interpreter is missing: run scripts/harbor/install.sh"
)
UPSTREAM_KEY = "sk-upstream-harbor-0123456789abcdef"
#: What the solution prints: Harbor's oracle keeps its stdout as logs/oracle.txt (headroom's own oracle does not).
SOLVED = "harbor-oracle-solved"


def _task(root: Path, agent_timeout: float = 300) -> Path:
    # a real agent's interpreter start-up (litellm's import alone takes seconds on a loaded machine) needs room
    return write_task(
        root / "tasks",
        "touch-out",
        solve=f'#!/bin/bash\necho {SOLVED}\necho done > "$HEADROOM_WORKDIR/out"\n',
        agent_timeout=agent_timeout,
    )


def harbor_sweep(
    tmp_path: Path,
    agent: dict[str, Any],
    extra: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    gateway: dict[str, Any] | None = None,
) -> tuple[sqlite3.Connection, sqlite3.Row]:
    """One trial of the bundled-style task with a Harbor agent; the store and its one try."""
    _task(tmp_path)
    res = sweep(
        tmp_path,
        {
            "tasks_dir": str(tmp_path / "tasks"),
            "configurations": ["3"],
            "attempts": 1,
            "concurrency": 1,
            "agent": {"kind": "harbor", **agent},
            **({"gateway": gateway} if gateway else {}),
            **(extra or {}),
        },
        env=env,
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    db.row_factory = sqlite3.Row
    (row,) = db.execute("SELECT * FROM executions").fetchall()
    return db, row


def _why(row: sqlite3.Row, kept: dict[str, bytes]) -> str:
    """What a failed try left, for the assertion's message."""
    shown = {
        k: v[-1500:].decode("utf-8", "replace")
        for k, v in kept.items()
        if "stderr" in k or k.startswith("logs/") or k == names.EXEC_LOG
    }
    return json.dumps({"try": dict(row), **shown}, indent=1, default=str)


def _harbor_record(kept: dict[str, bytes]) -> dict[str, Any]:
    return json.loads(kept["logs/harbor.json"])


def _commands(kept: dict[str, bytes]) -> list[str]:
    return [
        r.command[-1]  # type: ignore[index]
        for r in execlog.parse(kept[names.EXEC_LOG])
        if isinstance(r, execlog.ExecRecord)
    ]


def check_oracle_passes(tmp_path: Path, extra: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> None:
    db, row = harbor_sweep(tmp_path, {"name": "oracle"}, extra, env)
    kept = artifacts(db, row["trial_id"])
    assert row["outcome"] == "passed", _why(row, kept)
    assert _harbor_record(kept)["agent"] == "oracle" and "run_error" not in _harbor_record(kept)
    # Harbor's oracle itself ran: it uploaded the solution and kept the script's stdout as its oracle.txt
    assert kept["logs/oracle.txt"].decode().strip() == SOLVED
    assert any("solve.sh" in c for c in _commands(kept))
    spec = json.loads(db.execute("SELECT spec_json FROM runs").fetchone()[0])
    assert spec["agent"]["kind"] == "harbor" and spec["agent"]["name"] == "oracle"  # recorded as written
    report = subprocess.run(
        [sys.executable, "-m", "orchestrator", "report", "--store", str(tmp_path / "h.db"), "--format", "markdown"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "| agent | harbor: oracle |" in report.stdout, report.stderr  # named, as Harbor names it


def check_nop_fails(tmp_path: Path, extra: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> None:
    db, row = harbor_sweep(tmp_path, {"name": "nop"}, extra, env)
    # the agent did nothing: the task is failed by the verifier, not an infra error
    assert row["outcome"] == "failed" and row["reason"] is None, dict(row)
    kept = artifacts(db, row["trial_id"])
    record = _harbor_record(kept)
    assert record["agent"] == "nop" and "run_error" not in record and "setup_error" not in record


def _terminus_reply(commands: list[dict[str, Any]], done: bool) -> Reply:
    return Reply(json.dumps({"analysis": "scripted", "plan": "scripted", "commands": commands, "task_complete": done}))


#: terminus-2's three turns: type the solution into its tmux pane, then say done, then confirm it.
TERMINUS_SCRIPT = [
    _terminus_reply([{"keystrokes": 'echo done > "$HEADROOM_WORKDIR/out"\n', "duration": 0.5}], False),
    _terminus_reply([], True),
    _terminus_reply([], True),
]


def check_terminus_2_solves(
    tmp_path: Path, extra: dict[str, Any] | None = None, env: dict[str, str] | None = None
) -> None:
    with FakeModel(TERMINUS_SCRIPT, openai_key=UPSTREAM_KEY) as fake:
        db, row = harbor_sweep(
            tmp_path,
            {"name": "terminus-2", "model": "openai/fake-model-1"},
            extra,
            {"UP_OPENAI": UPSTREAM_KEY, **(env or {})},
            gateway={
                "openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP_OPENAI"},
                "prices": {"fake-model-1": {"input": 3.0, "output": 15.0}},
            },
        )
        # every call went through the gateway, which swapped the try's key for the upstream's
        assert len(fake.seen) == 3
        assert all(s.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for s in fake.seen)
    assert row["outcome"] == "passed", dict(row)
    assert row["usage_source"] == "gateway" and row["tokens_in"] > 0 and row["cost_usd"] > 0
    kept = artifacts(db, row["trial_id"])
    record = _harbor_record(kept)
    assert record["agent"] == "terminus-2" and record["context"]["n_input_tokens"] > 0
    # it drove a tmux session in the trial's environment, through the exec channel
    assert any(c.startswith("tmux send-keys") and "HEADROOM_WORKDIR/out" in c for c in _commands(kept))
    assert "trajectory.json" in {n.removeprefix("logs/") for n in kept}
    assert UPSTREAM_KEY.encode() not in b"".join(kept.values())


# -- the spec -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "agent, problem",
    [
        ({"kind": "harbor"}, "needs one of name"),
        ({"kind": "harbor", "name": "oracle", "import_path": "m:C"}, "needs one of name"),
        ({"kind": "harbor", "name": "oracle", "command": "x"}, "takes no command"),
        ({"kind": "harbor", "import_path": "not a path"}, "module.path:ClassName"),
        ({"kind": "external", "command": "x", "name": "oracle"}, "for kind 'harbor'"),
    ],
)
def test_a_harbor_agent_is_named_once_and_takes_no_command(agent: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        AgentSpec.model_validate(agent)


def test_a_missing_harbor_interpreter_is_one_line_naming_the_install_script(tmp_path: Path) -> None:
    _task(tmp_path)
    res = sweep(
        tmp_path,
        {
            "tasks_dir": str(tmp_path / "tasks"),
            "configurations": ["3"],
            "attempts": 1,
            "agent": {"kind": "harbor", "name": "nop"},
        },
        env={harbor.PYTHON_VAR: str(tmp_path / "no-such-python")},
    )
    assert res.returncode != 0
    assert "scripts/harbor/install.sh" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


# -- local backend --------------------------------------------------------------------------------


@requires_harbor
def test_harbors_oracle_passes_on_the_local_backend(tmp_path: Path) -> None:
    check_oracle_passes(tmp_path)


@requires_harbor
def test_harbors_nop_fails_on_the_local_backend(tmp_path: Path) -> None:
    check_nop_fails(tmp_path)


@requires_harbor
@pytest.mark.slow
def test_terminus_2_solves_a_task_with_a_scripted_model_on_the_local_backend(tmp_path: Path) -> None:
    check_terminus_2_solves(tmp_path)


#: A custom Harbor agent (by import path, from agent.path, with kwargs): it solves through Harbor's environment
#: interface and notes what of the host it can see from its sandbox.
PEEK_AGENT = """
import json, os
from harbor.agents.base import BaseAgent


class Peek(BaseAgent):
    @staticmethod
    def name():
        return "peek"

    def version(self):
        return "1"

    async def setup(self, environment):
        pass

    async def run(self, instruction, environment, context):
        r = await environment.exec('echo done > "$HEADROOM_WORKDIR/out" && echo "$HEADROOM_TASK_ID"')
        seen = {p: os.path.exists(p) for p in self._probe}
        keys = sorted(k for k in os.environ if k in ("UP_OPENAI", "DOCKER_HOST", "KUBECONFIG"))
        (self.logs_dir / "peek.json").write_text(
            json.dumps({"exec": r.stdout.strip(), "rc": r.return_code, "seen": seen, "keys": keys})
        )

    def __init__(self, *args, probe=(), **kwargs):
        super().__init__(*args, **kwargs)
        self._probe = list(probe)
"""


@requires_harbor
def test_a_custom_harbor_agent_by_import_path_acts_through_the_channel_and_sees_none_of_the_host(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "peek_agent.py").write_text(PEEK_AGENT)
    task = tmp_path / "tasks" / "touch-out"
    # headroom's HOME: anything in it but the Python install the Harbor venv was made from (pyenv's, bound read-only)
    home = sorted(str(p) for p in Path.home().iterdir() if p.name != ".pyenv")[:3]
    probe = [str(task / "tests" / "test.sh"), str(tmp_path / "h.db"), *home]
    db, row = harbor_sweep(
        tmp_path,
        {"import_path": "peek_agent:Peek", "path": str(agent_dir), "kwargs": {"probe": probe}},
        env={"UP_OPENAI": UPSTREAM_KEY},
    )
    kept = artifacts(db, row["trial_id"])
    assert row["outcome"] == "passed", _why(row, kept)
    peek = json.loads(kept["logs/peek.json"])
    assert peek["rc"] == 0 and peek["exec"] == "touch-out"  # its exec ran in the trial's environment
    # the sandbox shows it neither the task's tests, nor the store, nor headroom's HOME, nor the host's variables
    assert peek["seen"] == {p: False for p in probe}, peek["seen"]
    assert peek["keys"] == []
