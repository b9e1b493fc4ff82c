"""Harbor's installed agents (a ``BaseInstalledAgent``: claude-code, codex, aider...) under headroom: their ``setup``
(the install script run in the environment) is headroom's ``agent_setup`` phase, not the agent step.

* its time is recorded apart (``extra.agent_setup``), and its commands are marked as the phase's in the exec log;
* a failed install is ``infra_error(agent_setup_failed)``: the harness's failure, never the model's, and the
  agent never runs;
* the setup runs in the external agent's host sandbox, like the agent: neither the adapter process nor the install
  script it runs in the environment sees the task's tests or a host secret.

Real parts: Harbor 0.25.0's own ``BaseInstalledAgent`` (its ``setup``, ``exec_as_agent``, version detection), loaded
by import path from a fixture module (:data:`INSTALLED_AGENT`) as Harbor loads ``--agent-import-path``; the local
backend's sandbox and bubblewrap. Nothing is fetched: the install script is a local shell script.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchestrator.agents import harbor
from orchestrator.artifacts import execlog, names
from tests.agents.test_external_agent import artifacts
from tests.agents.test_harbor_agent import _task, _why, harbor_sweep, requires_harbor
from tests.cli_run import headroom as run_cli

#: An installed agent in Harbor's shape. ``install_script`` is its install step (as claude-code's curl | bash);
#: ``probe`` host paths its setup process looks for; the install step also looks, inside the environment, for the
#: task's tests and the host secret. Its run needs what the install left (the marker) and the version setup found.
INSTALLED_AGENT = r"""
import json, os
from harbor.agents.installed.base import BaseInstalledAgent

PROBE_IN_ENV = (
    'if [ -e "$HEADROOM_TASK_DIR/instruction.md" ]; then echo task:seen; else echo task:hidden; fi; '
    'if [ -e "$HEADROOM_TASK_DIR/tests/test.sh" ]; then echo tests:seen; else echo tests:hidden; fi; '
    'if [ -n "${UP_SECRET:-}" ]; then echo secret:seen; else echo secret:hidden; fi; '
    'if grep -qs UP_SECRET /proc/*/environ; then echo proc:seen; else echo proc:hidden; fi'
)


class ScriptedInstall(BaseInstalledAgent):
    def __init__(self, *args, install_script="true", probe=(), **kwargs):
        super().__init__(*args, **kwargs)
        self._install_script = install_script
        self._probe = list(probe)

    @staticmethod
    def name():
        return "scripted-install"

    def get_version_command(self):
        return "echo 9.9.9"

    async def install(self, environment):
        env_view = await self.exec_as_agent(environment, command=PROBE_IN_ENV)
        host_view = {p: os.path.exists(p) for p in self._probe}
        keys = sorted(k for k in os.environ if k in ("UP_SECRET", "UP_OPENAI", "DOCKER_HOST", "KUBECONFIG"))
        (self.logs_dir / "setup-peek.json").write_text(
            json.dumps({"env": env_view.stdout.split(), "host": host_view, "keys": keys})
        )
        await self.exec_as_agent(environment, command=self._install_script)
        await self.exec_as_agent(environment, command="echo installed > /installed-agent/marker")

    async def run(self, instruction, environment, context):
        r = await self.exec_as_agent(
            environment, command='cat /installed-agent/marker && echo done > "$HEADROOM_WORKDIR/out"'
        )
        (self.logs_dir / "run.json").write_text(json.dumps({"marker": r.stdout.strip(), "version": self.version()}))
"""
#: The install step's own command, told apart in the exec log.
INSTALL_MARK = "installing-scripted-agent"


def installed_sweep(
    tmp_path: Path,
    install_script: str,
    probe: list[str] | None = None,
    extra: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[Any, Any, dict[str, bytes], dict[str, Any]]:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "scripted_install.py").write_text(INSTALLED_AGENT)
    db, row = harbor_sweep(
        tmp_path,
        {
            "import_path": "scripted_install:ScriptedInstall",
            "path": str(agent_dir),
            "kwargs": {"install_script": install_script, "probe": probe or []},
        },
        extra,
        env,
    )
    kept = artifacts(db, row["trial_id"])
    (evidence,) = db.execute("SELECT json FROM evidence").fetchone()
    return db, row, kept, json.loads(evidence)


def _exec_records(kept: dict[str, bytes]) -> list[execlog.ExecRecord]:
    return [r for r in execlog.parse(kept[names.EXEC_LOG]) if isinstance(r, execlog.ExecRecord)]


def check_install_is_its_own_phase(tmp_path: Path, extra: dict[str, Any] | None = None, **kw: Any) -> None:
    db, row, kept, facts = installed_sweep(tmp_path, f"echo {INSTALL_MARK}", extra=extra, **kw)
    assert row["outcome"] == "passed", _why(row, kept)
    setup = facts["extra"]["agent_setup"]
    assert setup["exit_code"] == 0 and not setup["timed_out"] and setup["duration_s"] > 0
    # the run process did not set up again: it took over what the setup process placed (the marker, the version)
    run = json.loads(kept["logs/run.json"])
    assert run == {"marker": "installed", "version": "9.9.9"}
    record = json.loads(kept["logs/harbor.json"])
    assert record["setup_phase"] == "agent_setup" and "run_error" not in record
    assert "setup_error" not in json.loads(kept["logs/harbor-setup.json"])
    # every install command ran in the agent_setup phase, none in the agent step
    records = _exec_records(kept)
    install = [r for r in records if INSTALL_MARK in str(r.command)]
    assert install and all(getattr(r, "phase", None) == "agent_setup" for r in install)
    agent_step = [str(r.command) for r in records if getattr(r, "phase", None) is None]
    assert any("installed-agent/marker" in c for c in agent_step), agent_step
    assert not any(INSTALL_MARK in c or "echo 9.9.9" in c for c in agent_step), agent_step
    # the setup process's own output is kept apart from the agent's
    assert "agent_setup/stderr" in kept and names.AGENT_STDERR in kept


def check_failed_install_is_infra(tmp_path: Path, extra: dict[str, Any] | None = None, **kw: Any) -> None:
    db, row, kept, facts = installed_sweep(tmp_path, "echo 'registry unreachable' >&2; exit 7", extra=extra, **kw)
    assert (row["outcome"], row["reason"]) == ("infra_error", "agent_setup_failed"), _why(row, kept)
    setup = facts["extra"]["agent_setup"]
    assert setup["exit_code"] not in (0, None) and not setup["timed_out"] and setup["duration_s"] > 0
    assert "registry unreachable" in facts["infra_detail"]
    assert "setup_error" in json.loads(kept["logs/harbor-setup.json"])
    # the agent never ran: no run of Harbor's agent, no step of its in the exec log
    assert "logs/run.json" not in kept and "logs/harbor.json" not in kept
    assert all(getattr(r, "phase", None) == "agent_setup" for r in _exec_records(kept))


@requires_harbor
def test_an_installed_harbor_agents_setup_is_the_agent_setup_phase_on_the_local_backend(tmp_path: Path) -> None:
    check_install_is_its_own_phase(tmp_path)


@requires_harbor
def test_a_failed_harbor_install_is_an_infra_error_and_the_agent_never_runs_on_the_local_backend(
    tmp_path: Path,
) -> None:
    check_failed_install_is_infra(tmp_path)


@requires_harbor
def test_a_harbor_install_sees_neither_the_tests_nor_a_host_secret(tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "touch-out"
    # headroom's HOME: anything in it but the Python install the Harbor venv was made from (pyenv's, bound read-only)
    home = sorted(str(p) for p in Path.home().iterdir() if p.name != ".pyenv")[:3]
    probe = [str(task / "tests" / "test.sh"), str(tmp_path / "h.db"), *home, str(tmp_path / "agent")]
    secret = "up-secret-value-0123456789abcdef"
    db, row, kept, _facts = installed_sweep(
        tmp_path, f"echo {INSTALL_MARK}", probe=probe, env={"UP_SECRET": secret, "UP_OPENAI": secret}
    )
    assert row["outcome"] == "passed", _why(row, kept)
    peek = json.loads(kept["logs/setup-peek.json"])
    # the setup process, on the host in its sandbox: its own directory (agent.path) and nothing else of the host
    # (no task files, no store, no HOME), and no host variable
    assert peek["host"] == {p: p == str(tmp_path / "agent") for p in probe} and peek["keys"] == [], peek
    # its install script, in the environment: the task is there but not its tests, and no process holds the secret
    assert peek["env"] == ["task:seen", "tests:hidden", "secret:hidden", "proc:hidden"], peek
    assert secret.encode() not in b"".join(kept.values())


# -- the command line: --harbor-agent, --agent-kwarg ----------------------------------------------


def _cli_sweep(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> Any:
    _task(tmp_path)
    return run_cli(
        "sweep",
        str(tmp_path / "tasks"),
        "--multipliers",
        "3",
        "--attempts",
        "1",
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
        "--no-canary",
        *flags,
        env=env,
    )


@requires_harbor
def test_harbor_agent_flag_runs_the_named_agent_with_its_kwargs(tmp_path: Path) -> None:
    res = _cli_sweep(tmp_path, "--harbor-agent", "nop", "--agent-kwarg", "max_turns=5", "--agent-kwarg", "note=x y")
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    spec = json.loads(db.execute("SELECT spec_json FROM runs").fetchone()[0])
    assert spec["agent"]["kind"] == "harbor" and spec["agent"]["name"] == "nop"
    assert spec["agent"]["kwargs"] == {"max_turns": 5, "note": "x y"}  # read as Harbor's --ak reads them
    # Harbor's nop ran (its record is in the logs) and did nothing: the verifier fails the task
    (outcome, trial_id) = db.execute("SELECT outcome, trial_id FROM executions").fetchone()
    assert outcome == "failed"
    db.row_factory = sqlite3.Row
    assert json.loads(artifacts(db, trial_id)["logs/harbor.json"])["agent"] == "nop"


@requires_harbor
def test_an_unknown_harbor_agent_is_refused_on_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    res = _cli_sweep(tmp_path, "--harbor-agent", "claude-codes")
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "'claude-codes' is not an agent in Harbor's registry" in res.stderr and "claude-code" in res.stderr
    assert not (tmp_path / "h.db").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "flags, problem",
    [
        (("--harbor-agent", "nop", "--agent", "command"), "give --harbor-agent or --agent, not both"),
        (("--harbor-agent", "nop", "--agent-command", "x"), "takes no command"),
        (("--agent-kwarg", "a=1"), "give --harbor-agent too"),
        (("--harbor-agent", "nop", "--agent-kwarg", "novalue"), "is not KEY=VALUE"),
        (("--harbor-agent", "not a name"), "neither a Harbor agent name"),
    ],
)
def test_harbor_agent_flag_mistakes_are_one_line(tmp_path: Path, flags: tuple[str, ...], problem: str) -> None:
    res = _cli_sweep(tmp_path, *flags)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert problem in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_harbor_agent_flag_without_harbor_names_the_install_script(tmp_path: Path) -> None:
    res = _cli_sweep(tmp_path, "--harbor-agent", "nop", env={harbor.PYTHON_VAR: str(tmp_path / "no-such-python")})
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "scripts/harbor/install.sh" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_harbor_agent_named_module_colon_class_is_its_import_path() -> None:
    from orchestrator.spec.experiment import AgentSpec

    agent = AgentSpec.model_validate({"kind": "harbor", "name": "my_agents.mine:Mine"})  # as --harbor-agent gives it
    assert (agent.name, agent.import_path) == (None, "my_agents.mine:Mine")
    assert AgentSpec.model_validate({"kind": "harbor", "name": "codex"}).name == "codex"
