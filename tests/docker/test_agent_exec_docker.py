"""The exec channel's options on the Docker backend, used the way an external agent uses them (``$HEADROOM_EXEC``
from a host process): working dir, variables, stdin, timeout (the exec's whole process tree ends), exit codes and
stderr, each one on record in the try's exec log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orchestrator.artifacts import execlog, names
from tests.agents.test_external_agent import artifacts, sweep
from tests.taskfactory import write_task

from .fixtures import BASE_TAG, DockerEnv

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Each line of obs.txt is KEY=what the exec gave back; the agent itself only runs $HEADROOM_EXEC.
AGENT = r"""
set -u
x=$HEADROOM_EXEC
obs="$HEADROOM_LOGS_DIR/obs.txt"
{
echo "workdir=$HEADROOM_WORKDIR"
echo "default_cwd=$($x -- pwd)"
echo "cwd=$($x --cwd /tmp -- pwd)"
echo "env=$($x --env GREETING=hello --env OTHER=x -- sh -c 'echo "$GREETING-$OTHER"')"
echo "task_env=$($x -- sh -c 'echo "$HEADROOM_TASK_ID"')"
echo "stdin=$(printf 'piped in' | $x -i -- cat)"
echo "no_stdin=$(printf 'piped in' | $x -- cat)"
$x -- sh -c 'exit 7'; echo "exit=$?"
echo "stderr=$($x -- sh -c 'echo to-stderr >&2; echo to-stdout' 2>&1 >/dev/null)"
$x --timeout 1 -- sh -c 'sleep 300 & sleep 301'; echo "timeout=$?"
echo "left=$($x -- sh -c 'for p in /proc/[0-9]*; do tr "\0" " " < "$p/cmdline" 2>/dev/null; echo; done' | grep -c '^sleep 30[01]')"
$x -- sh -c 'kill -9 $$'; echo "killed=$?"
} > "$obs"
$x -- touch out
"""


def test_the_exec_channel_gives_a_container_exec_every_option(docker_env: DockerEnv, tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n", agent_timeout=120)
    res = sweep(
        tmp_path,
        {
            "tasks_dir": str(tmp_path / "tasks"),
            "configurations": ["3"],
            "attempts": 1,
            "backend": "docker",
            "image": BASE_TAG,
            "agent": {"kind": "external", "command": AGENT},
        },
        env={"DOCKER_HOST": docker_env.host},
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    trial_id, outcome = db.execute("SELECT trial_id, outcome FROM executions").fetchone()
    kept = artifacts(db, trial_id)
    db.close()
    assert outcome == "passed"  # the verifier saw the file the last exec made in the work dir
    obs = dict(line.split("=", 1) for line in kept[f"{names.LOGS_PREFIX}/obs.txt"].decode().splitlines())
    assert obs["default_cwd"] == obs["workdir"]  # the image's WORKDIR, as the agent was told
    assert obs["cwd"] == "/tmp"
    assert obs["env"] == "hello-x" and obs["task_env"] == "t"
    assert obs["stdin"] == "piped in" and obs["no_stdin"] == ""  # stdin only with -i
    assert obs["exit"] == "7" and obs["stderr"] == "to-stderr"
    assert obs["timeout"] == "124"
    assert obs["left"] == "0"  # the timed-out exec's background child ended with it
    assert obs["killed"] == "137"  # 128 + SIGKILL
    records = [r for r in execlog.parse(kept[names.EXEC_LOG]) if isinstance(r, execlog.ExecRecord)]
    assert [(r.cwd, r.exit_code) for r in records if r.command == ["pwd"]] == [(obs["workdir"], 0), ("/tmp", 0)]
    by_command = {" ".join(r.command): r for r in records}
    timed_out = by_command["sh -c sleep 300 & sleep 301"]
    assert timed_out.timed_out and timed_out.exit_code is None
    assert by_command["sh -c exit 7"].exit_code == 7
    assert [r.stdout_bytes for r in records if r.command == ["cat"]] == [len("piped in"), 0]
    assert docker_env.managed_containers() == []
