"""The bounds of a host-side (external) agent's process tree: a cgroup of its own per try, and a watch on its logs dir.

The sandbox (:mod:`.host_sandbox`) decides what the agent sees; this decides how much of the host it can take.
Each try's agent runs in a cgroup of its own (the local backend's cgroup code, :mod:`orchestrator.isolation.cgroups`),
under a per-process parent ``headroom-agents-PID`` beside the local backend's, with:

* a memory limit (``memory_mb``), which also holds its private ``HOME``, ``/tmp`` and ``/dev/shm``: they are
  memory-backed tmpfs mounts of ``disk_mb`` each, so a disk filler there meets ENOSPC or the memory limit,
  never the host's disk;
* a process ceiling (``pids``): a fork bomb stops there;
* an end: when the agent's main process ends, or its step times out, everything still in the cgroup is
  SIGKILLed and the cgroup removed (a process that left the sandbox's PID namespace, were there a way, would
  still be in it).

Its logs dir is a host directory (kept as the try's artifacts after the sandbox is gone), so it cannot be a
tmpfs: it is walked while the agent runs (the local backend's disk watcher), and an agent whose logs pass
``disk_mb`` is killed.

All three are the agent's own doing: an OOM kill, a refused fork or a logs dir over its bound ends the agent's
step as a kill (its failure, then graded as any other), never ``infra_error(oom_killed)``; the reason is kept
in the step's ``termination_reason``. Where no writable cgroup hierarchy exists the agent's memory is capped
by ``RLIMIT_DATA`` instead and it has no process ceiling; the run's provenance says so.
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import CgroupUnavailable
from orchestrator.isolation import cgroups
from orchestrator.isolation.storage import DiskWatcher
from orchestrator.spec.launch import HostLimits
from orchestrator.spec.resources import MIB, ResourceAmounts
from orchestrator.spec.steps import StepFacts

#: The per-process parent of the agents' cgroups (reaped, as the local backend's, once this process is gone).
PARENT = f"headroom-agents-{os.getpid()}"

_lock = threading.Lock()
_driver: list[cgroups.CgroupDriver | str] = []


def driver() -> cgroups.CgroupDriver | str:
    """The agents' cgroup driver, or why there is none (asked once per process)."""
    with _lock:
        if not _driver:
            try:
                d = cgroups.detect(PARENT)
                atexit.register(d.close)
                _driver.append(d)
            except (CgroupUnavailable, OSError) as exc:
                _driver.append(f"no writable cgroup for host agents: {exc}")
        return _driver[0]


def describe(limits: HostLimits) -> dict[str, object]:
    """The bounds, for the run's provenance."""
    d = driver()
    return {
        "memory_mb": limits.memory_mb,
        "pids": limits.pids if not isinstance(d, str) else None,
        "disk_mb": limits.disk_mb,
        "enforcement": d.mechanism if not isinstance(d, str) else "rlimit",
        **({"fallback_reason": d} if isinstance(d, str) else {}),
    }


@dataclass
class Bounds:
    """One try's agent bounds while its step runs; :meth:`close` ends every process left in them."""

    limits: HostLimits
    logs_dir: Path
    logs_bytes: int
    cgroup: cgroups.TrialCgroup | None = None
    fallback_reason: str | None = None
    watcher: DiskWatcher | None = None
    _oom_before: int = 0
    _forks_refused_before: int = 0
    _kill: list[Callable[[], None]] = field(default_factory=list)

    @property
    def memory_bytes(self) -> int:
        return self.limits.memory_mb * MIB

    @property
    def tmpfs_bytes(self) -> int:
        return self.limits.disk_mb * MIB

    def watch(self, kill: Callable[[], None]) -> None:
        """Start watching the logs dir; ``kill`` ends the agent (its session, where there is no cgroup)."""
        self._kill.append(kill)
        self.watcher = DiskWatcher([self.logs_dir], self.logs_bytes, lambda _used: self._over())
        self.watcher.__enter__()

    def _over(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()
        for k in self._kill:
            k()

    def settle(self, facts: StepFacts) -> None:
        """The agent's own bounds in its facts: a kill they caused is its failure, with the reason as evidence."""
        if self.watcher is not None:
            self.watcher.__exit__(None, None, None)
            self.watcher.check()  # once more, every process gone: an agent that wrote fast and ended is judged too
        why: list[str] = []
        if self.cgroup is not None:
            ooms = self.cgroup.oom_kills() - self._oom_before
            refused = self.cgroup.pids_events().get("max", 0) - self._forks_refused_before
            if ooms:
                why.append(
                    f"OOM-killed at the host agent's memory limit of {self.limits.memory_mb} MiB "
                    f"({self.cgroup.version} oom_kill counter of its own cgroup)"
                )
            if refused:
                why.append(f"{refused} forks refused at the host agent's ceiling of {self.limits.pids} processes")
        # the environment's OOM kills are the backend's to report; the agent's own are not an infra error
        facts.oom_kills, facts.oom_evidence = 0, None
        if self.watcher is not None and self.watcher.exceeded is not None:
            used = self.watcher.exceeded
            why.append(
                f"its logs dir held {used.bytes / MIB:.1f} MiB in {used.inodes} entries, over the host agent's "
                f"bound of {self.logs_bytes / MIB:.1f} MiB: killed"
            )
        if why:
            facts.termination_reason = "; ".join(why)

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.__exit__(None, None, None)
        if self.cgroup is not None:
            self.cgroup.remove()  # SIGKILL to whatever is left, then the cgroup itself


def open_bounds(name: str, limits: HostLimits, logs_dir: Path, storage_limit_bytes: int | None) -> Bounds:
    """A fresh cgroup for one try's agent (where cgroups can be written), and the logs dir's bound: ``disk_mb``,
    or half the try's storage limit where the backend counts the logs dir in it (the local backend), so the
    agent's own bound is met first and a filler stays its own failure, not an eviction."""
    logs_bytes = limits.disk_mb * MIB
    if storage_limit_bytes is not None:
        logs_bytes = max(1, min(logs_bytes, storage_limit_bytes // 2))
    b = Bounds(limits, logs_dir, logs_bytes)
    d = driver()
    if isinstance(d, str):
        b.fallback_reason = d
        return b
    amounts = ResourceAmounts(
        request_cpus=0.1, request_memory_bytes=0, limit_cpus=None, limit_memory_bytes=b.memory_bytes
    )
    # an OSError here (the hierarchy worked when probed) is the host's failure: the caller's spawn error
    b.cgroup = d.create(f"{name[:40]}-{secrets.token_hex(4)}", amounts, pids_max=limits.pids)
    b._oom_before = b.cgroup.oom_kills()
    b._forks_refused_before = b.cgroup.pids_events().get("max", 0)
    return b
