"""kill -9 of the CLI: the trial's processes die with it, and `headroom cleanup` removes what is left."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.cli_run import headroom as run_cli
from tests.cli_run import start as start_cli
from tests.hostile.harness import assert_no_survivors, new_marker, requires_sandbox, survivors, write_hostile_task
from tests.taskfactory import CGROUPS

pytestmark = [pytest.mark.slow, requires_sandbox]


def test_orphaned_agents_die_with_a_killed_cli_and_cleanup_removes_the_rest(tasks_root: Path, tmp_path: Path) -> None:
    marker = new_marker()
    # Daemons of every kind, then a long sleep: without a parent-death signal all of them would
    # live on (the agent's timeout is the CLI's timer, which dies with the CLI).
    attack = f"""
setsid sleep {marker} &
( setsid sh -c 'sleep {marker} &' & )
nohup sleep {marker} >/dev/null 2>&1 &
sleep {marker}
"""
    task = f"orphan-{marker.replace('.', '-')}"
    write_hostile_task(tasks_root, task, attack, agent_timeout=600)
    cli = start_cli(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "unbounded",
        "--attempts",
        "1",
        "--agent-command",
        'bash "$HEADROOM_TASK_DIR/environment/attack.sh"',
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while len(survivors(marker)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        assert len(survivors(marker)) >= 3, "the agent's processes never started"
    finally:
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
    assert_no_survivors(marker, [task], grace_s=5)  # well before any timeout or the next headroom
    workroot = Path(tempfile.gettempdir()) / f"headroom-{cli.pid}"
    # A kill -9 leaves the work dirs and trial cgroups behind. Any headroom starting on this machine
    # reaps them (a sweep on another xdist worker may get there first); `cleanup` does it on demand.
    # So what cleanup says about this run is checked for what it says, and the end state in full.
    res = run_cli("runs", "cleanup", timeout=60)
    assert res.returncode == 0, res.stderr
    assert not workroot.exists()
    mine = [line for line in res.stdout.splitlines() if f"/headroom-{cli.pid}" in line]
    assert all(line.startswith("removed") for line in mine), res.stdout
    # os.walk passes over a folder that vanishes mid-walk (another worker's trial cgroups come and go); glob raised
    name = f"headroom-{cli.pid}"
    leftovers = [Path(root) / name for root, dirs, _ in os.walk("/sys/fs/cgroup") if name in dirs] if CGROUPS else []
    assert not leftovers
