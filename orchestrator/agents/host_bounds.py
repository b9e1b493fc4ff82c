"""The bounds of a host-side (external) agent's process tree: a cgroup of its own per try, size-bounded tmpfs mounts.

The sandbox (:mod:`.host_sandbox`) decides what the agent sees; this decides how much of the host it can take.
Each try's agent runs in a cgroup of its own (the local backend's cgroup code, :mod:`orchestrator.isolation.cgroups`),
under a per-process parent ``headroom-agents-PID`` beside the local backend's, with:

* a memory limit (``memory_mb``), which also holds its private ``HOME``, ``/tmp``, ``/dev/shm`` and its logs dir:
  they are memory-backed tmpfs mounts of ``disk_mb`` each, so a disk filler there meets ENOSPC (the kernel's,
  at once, however fast it writes) or the memory limit, never the host's disk;
* a process ceiling (``pids``): a fork bomb stops there;
* an end: when the agent's main process ends, or its step times out, everything still in the cgroup is
  SIGKILLed and the cgroup removed (a process that left the sandbox's PID namespace, were there a way, would
  still be in it).

The logs dir's tmpfs is ``disk_mb``, or half the try's storage limit where the backend counts the logs dir in it
(the local backend), the lesser: what the agent wrote is copied out to the try's host logs dir after its step
(:mod:`.host_logs`), so the agent's own bound is met first and a filler stays its own failure, not an eviction.

All of these are the agent's own doing: an OOM kill, a refused fork or a full logs dir ends the agent's step (or
fails its writes) as its failure, graded as any other, never ``infra_error(oom_killed)``; the reason is kept in
the step's ``termination_reason``. Where no writable cgroup hierarchy exists, the agent's memory is capped by
``RLIMIT_DATA`` (its tmpfs pages are then not counted) and its processes by ``RLIMIT_NPROC``, set in the sandbox
after the drop to the agent's uid (:mod:`.handoff`); the run's provenance says which.

``RLIMIT_NPROC`` is a count per user, not per tree. When headroom runs as root the agent is ``nobody`` on the
host, so the ceiling counts every process of ``nobody`` on the machine: the other tries' agents (concurrent
tries share it: a fork bomb in one can refuse another's forks until it ends) and any daemon running as
``nobody``. Unprivileged, the sandbox has a user namespace of its own and the kernel counts (5.14 and later)
per user per namespace: the ceiling is the one sandbox's. A trusted agent run with no sandbox gets no process
ceiling (the count would be headroom's own user's).

A trusted agent with no sandbox has no tmpfs logs dir: it writes to the host dir, which is walked while it runs
(the local backend's disk watcher) and an agent whose logs pass the bound is killed.
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.agents import host_logs
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


def describe(limits: HostLimits, *, sandboxed: bool = True) -> dict[str, object]:
    """The bounds, for the run's provenance: each with the mechanism this host applies it by (``applied``)."""
    d = driver()
    mech = None if isinstance(d, str) else d.mechanism
    cg = mech is not None
    applied: dict[str, str] = {
        "memory": f"{mech} memory limit" if cg else "RLIMIT_DATA (tmpfs pages not counted)",
        "pids": f"{mech} pids limit"
        if cg
        else ("RLIMIT_NPROC (a per-uid count: see docs/isolation.md)" if sandboxed else "none"),
        "private_dirs": "tmpfs, size-bounded" if sandboxed else "none (the host's HOME and /tmp)",
        "logs_dir": "tmpfs, size-bounded, copied out after the step" if sandboxed else "watched, killed past it",
        "inodes": "not bounded by count (bubblewrap sets no nr_inodes): by the memory limit"
        if cg
        else "not bounded by count (bubblewrap sets no nr_inodes): the copy-out keeps 10000 entries",
    }
    return {
        "memory_mb": limits.memory_mb,
        "pids": limits.pids if cg or sandboxed else None,
        "disk_mb": limits.disk_mb,
        "enforcement": mech or "rlimit",
        "applied": applied,
        **({"fallback_reason": d} if isinstance(d, str) else {}),
    }


@dataclass
class Bounds:
    """One try's agent bounds while its step runs; :meth:`close` ends every process left in them."""

    limits: HostLimits
    logs_dir: Path
    logs_bytes: int
    cgroup: cgroups.TrialCgroup | None = None
    #: RLIMIT_NPROC for the agent, set in its sandbox (no cgroup: the pids ceiling's fallback)
    nproc: int | None = None
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
        """Start watching the logs dir (a trusted agent with no sandbox: its logs dir is the host's, no tmpfs);
        ``kill`` ends the agent (its session, where there is no cgroup)."""
        self._kill.append(kill)
        self.watcher = DiskWatcher([self.logs_dir], self.logs_bytes, lambda _used: self._over())
        self.watcher.__enter__()

    def _over(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()
        for k in self._kill:
            k()

    def settle(self, facts: StepFacts, logs: host_logs.Copied | None = None) -> None:
        """The agent's own bounds in its facts: a kill they caused is its failure, with the reason as evidence;
        ``logs``: what was copied out of its tmpfs logs dir."""
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
        if logs is not None and logs.full:
            why.append(
                f"its logs dir filled the host agent's bound of {self.logs_bytes / MIB:.1f} MiB (a tmpfs: writes "
                "past it failed with ENOSPC)"
            )
        if logs is not None and logs.not_copied:
            why.append(f"{logs.not_copied} entries of its logs dir not copied out: {'; '.join(logs.left_out)}")
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
        b.nproc = limits.pids
        return b
    amounts = ResourceAmounts(
        request_cpus=0.1, request_memory_bytes=0, limit_cpus=None, limit_memory_bytes=b.memory_bytes
    )
    # an OSError here (the hierarchy worked when probed) is the host's failure: the caller's spawn error
    b.cgroup = d.create(f"{name[:40]}-{secrets.token_hex(4)}", amounts, pids_max=limits.pids)
    b._oom_before = b.cgroup.oom_kills()
    b._forks_refused_before = b.cgroup.pids_events().get("max", 0)
    return b
