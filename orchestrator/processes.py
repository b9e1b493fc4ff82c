"""Process facts shared by the store (run ownership) and the local backend (stale cgroups)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists (a zombie counts; pid reuse is accepted as a rare false positive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
