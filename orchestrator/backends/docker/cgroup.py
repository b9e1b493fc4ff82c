"""Read a container's own cgroup counters from the host, when the daemon runs on this machine.

The Engine API reports neither the kernel's ``oom_kill`` counter nor (on cgroup
v2) peak memory, so the backend reads them where the kernel keeps them: the
container's cgroup, found through ``/proc/<pid>/cgroup`` of its first process.
That works when the daemon shares this machine's PID namespace (dockerd or
rootful Podman here, as root or with read access to /sys/fs/cgroup). Otherwise
:func:`locate` returns ``None`` and the backend falls back to the API's own
evidence (``oom`` events, ``State.OOMKilled``, the stats endpoint), and says so.

The counters are read with the local backend's readers; nothing here writes to
a cgroup or removes one (the runtime owns it).
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.isolation.cgroups import (
    Mounts,
    TrialCgroup,
    TrialCgroupV1,
    TrialCgroupV2,
    parse_proc_cgroup,
    read_mounts,
)


def locate(pid: int, container_id: str, proc: Path = Path("/proc"), mounts: Mounts | None = None) -> TrialCgroup | None:
    """The cgroup of the container whose first process is ``pid``, or None if it cannot be read from here.

    The container id must appear in the cgroup path (``/docker/<id>``, ``docker-<id>.scope``,
    ``libpod-<id>.scope``): a pid from another PID namespace never passes for ours.
    """
    if pid <= 0:
        return None
    try:
        v1, v2 = parse_proc_cgroup((proc / str(pid) / "cgroup").read_text())
        mounts = mounts or read_mounts()
    except OSError:
        return None
    if "memory" in v1 and "memory" in mounts.v1:
        dirs: dict[str, Path] = {}
        for ctrl in ("memory", "cpu", "cpuacct"):
            if ctrl in v1 and ctrl in mounts.v1 and container_id in v1[ctrl]:
                dirs[ctrl] = mounts.v1[ctrl][0] / v1[ctrl].lstrip("/")
        if {"memory", "cpu"} <= dirs.keys() and all(d.is_dir() for d in dirs.values()):
            return TrialCgroupV1(dirs)
        return None
    if v2 is not None and mounts.v2_root is not None and container_id in v2:
        d = mounts.v2_root / v2.lstrip("/")
        if (d / "memory.events").is_file():
            return TrialCgroupV2({"unified": d})
    return None
