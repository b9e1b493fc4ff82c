"""Installed agents on the local backend: the agent's directory read-only at /agent, an install phase with its own
timeout and network recorded apart, and an install failure as infra_error(agent_setup_failed)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import yaml

from orchestrator.artifacts import names, reader
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task


def _sweep(tmp_path: Path, agent: dict) -> sqlite3.Connection:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    spec = tmp_path / "exp.yaml"
    spec.write_text(
        yaml.safe_dump({"tasks_dir": str(tmp_path / "tasks"), "configurations": ["3"], "attempts": 1, "agent": agent})
    )
    res = run_cli(
        "sweep",
        "--experiment",
        str(spec),
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
        "--no-canary",
    )
    assert res.returncode == 0, res.stderr
    return sqlite3.connect(tmp_path / "h.db")


def test_an_installed_agent_is_mounted_read_only_and_its_install_runs_first(tmp_path: Path) -> None:
    agent_dir = tmp_path / "my-agent"
    agent_dir.mkdir()
    (agent_dir / "run.sh").write_text(
        'cat "$HOME/installed"; touch "$HEADROOM_WORKDIR/out"\n'
        "touch /agent/mine 2>/dev/null && echo WRITABLE || echo READ-ONLY\n"
    )
    db = _sweep(
        tmp_path,
        {
            "kind": "command",
            "command": 'bash "$HEADROOM_AGENT_DIR/run.sh"',
            "path": str(agent_dir),
            "install": {
                "command": 'echo "installed from $HEADROOM_AGENT_DIR" > "$HOME/installed"; echo setting up',
                "timeout_s": 30,
                "network": False,
            },
        },
    )
    outcome, ev = db.execute(
        "SELECT e.outcome, v.json FROM executions e JOIN evidence v USING (run_id, trial_id)"
    ).fetchone()
    assert outcome == "passed"
    setup = json.loads(ev)["extra"]["agent_setup"]
    assert setup["exit_code"] == 0 and not setup["timed_out"]
    run_id, trial_id = db.execute("SELECT run_id, trial_id FROM executions").fetchone()
    kept = {a.name: reader.read(db, a.sha256) for a in reader.list_artifacts(db, run_id, trial_id, 0) if a.sha256}
    assert kept["agent_setup/stdout"] == b"setting up\n"  # recorded apart from the agent's run
    assert kept[names.AGENT_STDOUT] == b"installed from /agent\nREAD-ONLY\n"
    assert not (agent_dir / "mine").exists()


def test_an_install_that_fails_is_an_infra_error_and_the_agent_never_runs(tmp_path: Path) -> None:
    db = _sweep(
        tmp_path,
        {
            "kind": "command",
            "command": 'touch "$HEADROOM_WORKDIR/out"',
            "install": {"command": "echo 'registry unreachable' >&2; exit 4", "timeout_s": 30},
        },
    )
    outcome, reason, ev = db.execute(
        "SELECT e.outcome, e.reason, v.json FROM executions e JOIN evidence v USING (run_id, trial_id)"
    ).fetchone()
    assert (outcome, reason) == ("infra_error", "agent_setup_failed")
    facts = json.loads(ev)
    assert not (facts.get("agent") or {}).get("duration_s") and facts.get("verifier") is None  # never ran
    assert "exit 4" in facts["infra_detail"] and "registry unreachable" in facts["infra_detail"]


def test_an_install_that_overruns_its_own_timeout_is_an_infra_error(tmp_path: Path) -> None:
    db = _sweep(tmp_path, {"kind": "command", "command": "true", "install": {"command": "sleep 30", "timeout_s": 1}})
    reason, ev = db.execute(
        "SELECT e.reason, v.json FROM executions e JOIN evidence v USING (run_id, trial_id)"
    ).fetchone()
    assert reason == "agent_setup_failed" and json.loads(ev)["extra"]["agent_setup"]["timed_out"] is True


def test_a_script_only_its_owner_may_run_runs_in_the_sandbox(tmp_path: Path) -> None:
    # The sandbox's user does not own the copy: the owner's execute bit is given to everyone, as read is.
    agent_dir = tmp_path / "owner-only"
    agent_dir.mkdir()
    script = agent_dir / "agent.sh"
    script.write_text('#!/bin/sh\ntouch "$HEADROOM_WORKDIR/out"\n')
    script.chmod(0o744)
    db = _sweep(tmp_path, {"kind": "command", "command": '"$HEADROOM_AGENT_DIR/agent.sh"', "path": str(agent_dir)})
    assert db.execute("SELECT outcome FROM executions").fetchone() == ("passed",)
