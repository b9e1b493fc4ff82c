"""An aborted earlier session's state dir is cleaned at the next start; a live session's is not."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from .realnode import pids_mentioning
from .stale import OWNER_FILE, claim, reap


def _wait_exec(pid: int, names: Path) -> None:
    """Until the child has exec'd: before that its command line is still this process's."""
    for _ in range(500):
        if str(names).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never showed {names} in its command line")


def test_a_dead_owner_s_processes_and_dir_go_a_live_owner_s_stay(tmp_path: Path) -> None:
    dead = tmp_path / "headroom-k8s-dead"
    dead.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    (dead / OWNER_FILE).write_text(f"{gone.pid} 1\n")  # that process has ended
    (dead / "etcd").mkdir()
    leftover = subprocess.Popen(["sh", "-c", "sleep 600", str(dead / "etcd")])  # names the dir, as a component does
    _wait_exec(leftover.pid, dead)
    live = tmp_path / "headroom-node-live"
    live.mkdir()
    claim(live)
    other = tmp_path / "unrelated"
    other.mkdir()
    try:
        done = reap(tmp_path)
        assert leftover.wait(timeout=10) != 0  # killed
        assert not dead.exists()
        assert live.exists() and other.exists()
        assert any(line.startswith("killed ") for line in done), done
    finally:
        if leftover.poll() is None:
            leftover.kill()


def test_a_dir_without_an_owner_named_by_a_live_parent_s_child_is_left(tmp_path: Path) -> None:
    d = tmp_path / "headroom-k8s-old"
    d.mkdir()
    child = subprocess.Popen(["sh", "-c", "sleep 600", str(d)])  # its parent (this test) is alive
    _wait_exec(child.pid, d)
    try:
        assert reap(tmp_path) == []
        assert d.exists() and child.poll() is None
    finally:
        child.kill()
        child.wait()
    # a process that names the dir may linger a moment past the kill (seen once under CI's load): the case asked
    # about is the one where nothing names it any more
    deadline = time.monotonic() + 30
    while pids_mentioning(str(d)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reap(tmp_path) == [f"removed {d}"]  # nothing names it any more
    assert not d.exists()
