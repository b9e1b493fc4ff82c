"""Labels on everything the Docker backend creates, so a crashed CLI leaves nothing unaccounted for.

Every container carries :data:`MANAGED`, the launch's own labels (run, task,
configuration, attempt, try) and :data:`OWNER`: this process's host, pid and
start time. ``cleanup`` removes a container whose owner is gone (its pid no
longer runs, or runs a different program started at another time), and keeps
one whose owner is alive; a container owned on another host is removed only
when its run is named.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import psutil

MANAGED = "headroom.dev/managed"
OWNER = "headroom.dev/owner"
LAUNCH = "headroom.dev/launch"
RUN = "headroom.dev/run"


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: float

    @property
    def label(self) -> str:
        return f"{self.host}/{self.pid}/{self.started:.2f}"

    @classmethod
    def me(cls) -> Owner:
        return cls(platform.node(), os.getpid(), psutil.Process().create_time())

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        try:
            host, pid, started = text.rsplit("/", 2)
            return cls(host, int(pid), float(started))
        except ValueError:
            return None

    def alive(self) -> bool | None:
        """True/False on this host; None when the owner ran on another host (cannot tell)."""
        if self.host != platform.node():
            return None
        try:
            return abs(psutil.Process(self.pid).create_time() - self.started) < 0.05
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True  # it exists; assume it is ours rather than kill a live try
