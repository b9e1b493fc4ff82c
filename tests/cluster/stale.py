"""Find and clean what an aborted earlier test run left: processes, mounts and state dirs.

Each plane or real-node state dir (``$TMPDIR/headroom-k8s-*``, ``headroom-node-*``) records its
owner (the pytest process, by pid and start time). At the start of a session, a dir whose owner
is gone is stale: the processes whose command line names it are killed, the mounts under it are
lazily unmounted (deepest first), and it is removed. A dir another live session owns is left
alone (this machine is shared). A dir from before owners were recorded counts as stale when no
process names it, or when every process that does is an orphan (re-parented to init: its pytest
died, and the parent-death signal did not reach it, as for a daemon that double-forked).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .realnode import kill_all, mounts_under, pids_mentioning

PREFIXES = ("headroom-k8s-", "headroom-node-")
OWNER_FILE = ".headroom-owner"


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def claim(state_dir: Path) -> None:
    """Record this process as the owner of ``state_dir``."""
    (state_dir / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")


def _owner_alive(state_dir: Path) -> bool | None:
    try:
        pid_text, start = (state_dir / OWNER_FILE).read_text().split()
    except (OSError, ValueError):
        return None  # no owner recorded
    return _start_time(int(pid_text)) == start


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def reap(root: Path | None = None) -> list[str]:
    """Clean every stale state dir under ``root`` (the temp dir); what was done, one line each."""
    root = root or Path(tempfile.gettempdir())
    done: list[str] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIXES)):
        alive = _owner_alive(d)
        pids = pids_mentioning(str(d)) - {os.getpid()}
        if alive or (alive is None and pids and any(_ppid(p) != 1 for p in pids)):
            continue
        if pids:
            kill_all(pids)
            done.append(f"killed {len(pids)} processes of {d}")
        mounts = sorted(mounts_under(str(d)), key=len, reverse=True)
        for m in mounts:
            subprocess.run(["umount", "-l", m], capture_output=True, check=False)
        if mounts:
            done.append(f"unmounted {len(mounts)} mounts under {d}")
        shutil.rmtree(d, ignore_errors=True)
        done.append(f"removed {d}")
    return done
