"""Per-trial cgroups: the same kernel knobs the kubelet turns, on cgroup v1 and v2.

=====================  ===============================  =====================
what                   cgroup v2                        cgroup v1
=====================  ===============================  =====================
memory hard limit      memory.max (+ memory.oom.group)  memory.limit_in_bytes
memory guarantee       memory.min                       memory.soft_limit_in_bytes
CPU limit              cpu.max                          cpu.cfs_quota_us
CPU request            cpu.weight                       cpu.shares
OOM kills              memory.events ``oom_kill``       memory.oom_control ``oom_kill``
peak memory            memory.peak                      memory.max_usage_in_bytes
CPU time               cpu.stat ``usage_usec``          cpuacct.usage
process count limit    pids.max                         pids.max
=====================  ===============================  =====================

The process limit is the kubelet's ``podPidsLimit``: a fork storm stops at the
trial's own ceiling instead of exhausting the host's pid space.

Trial cgroups live under the orchestrator's own cgroup, so whatever bounds the
orchestrator also bounds its trials.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import CgroupUnavailable
from orchestrator.processes import pid_alive
from orchestrator.spec.resources import ResourceAmounts

CFS_PERIOD_US = 100_000
#: Processes and threads one trial may hold at once (the kubelet's podPidsLimit).
TRIAL_PIDS_MAX = 4096
#: ``kill_all``'s first and longest wait between looks at a cgroup it is emptying
KILL_POLL_MIN_S = 0.0005
KILL_POLL_MAX_S = 0.01


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_keyed(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def cpu_shares(cpus: float) -> int:
    """Kubelet's conversion: milliCPU * 1024 / 1000, at least 2."""
    return max(2, int(round(cpus * 1024)))


def cpu_weight(cpus: float) -> int:
    """Kubelet's shares->weight mapping for cgroup v2."""
    shares = cpu_shares(cpus)
    return 1 + ((shares - 2) * 9999) // 262142


@dataclass
class Mounts:
    """Where the hierarchies are mounted and where this process sits in them."""

    v2_root: Path | None = None
    v2_own: str = "/"
    v1: dict[str, tuple[Path, str]] = field(default_factory=dict)  # controller -> (mount, own path)


def parse_proc_cgroup(text: str) -> tuple[dict[str, str], str | None]:
    """A ``/proc/PID/cgroup`` file: (v1 controller -> path, the v2 path or None)."""
    v1: dict[str, str] = {}
    v2: str | None = None
    for line in text.splitlines():
        hier, ctrls, path = line.split(":", 2)
        if hier == "0" and ctrls == "":
            v2 = path
        else:
            for c in ctrls.split(","):
                v1[c] = path
    return v1, v2


def read_mounts(
    mountinfo: Path = Path("/proc/self/mountinfo"), cgroup_file: Path = Path("/proc/self/cgroup")
) -> Mounts:
    own_v1, own_v2 = parse_proc_cgroup(cgroup_file.read_text())
    m = Mounts(v2_own=own_v2 or "/")
    for line in mountinfo.read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fstype, _src, superopts = (post.split() + ["", "", ""])[:3]
        mountpoint = Path(pre.split()[4])
        if fstype == "cgroup2":
            m.v2_root = m.v2_root or mountpoint
        elif fstype == "cgroup":
            for c in superopts.split(","):
                if c in ("memory", "cpu", "cpuacct", "freezer", "pids"):
                    m.v1[c] = (mountpoint, own_v1.get(c, "/"))
    return m


class TrialCgroup:
    """One trial's cgroup (one directory per controller on v1)."""

    version: str

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    # -- joining ------------------------------------------------------------------
    def procs_files(self) -> list[Path]:
        """Files a new process writes its pid into to join this cgroup."""
        return sorted({d / "cgroup.procs" for d in self.dirs.values()})

    def pids(self) -> list[int]:
        seen: set[int] = set()
        for f in self.procs_files():
            try:
                seen.update(int(x) for x in f.read_text().split())
            except OSError:
                pass
        return sorted(seen)

    def kill_all(self, deadline_s: float = 5.0) -> None:
        """SIGKILL every process in the cgroup until it is empty (forks race us, so loop).

        The wait between looks starts short and doubles up to :data:`KILL_POLL_MAX_S`: after a sandboxed
        step's main process is reaped, bubblewrap's PID-namespace init is usually still tearing its
        namespaces down, listed here for a median 0.7 ms (max 5 ms, load 5); a fixed 10 ms sleep made the
        step wait 10 ms for it most times."""
        end = time.monotonic() + deadline_s
        pause = KILL_POLL_MIN_S
        while time.monotonic() < end:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(pause)
            pause = min(pause * 2, KILL_POLL_MAX_S)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.02)

    def pids_events(self) -> dict[str, int]:
        """``max``: forks refused at the trial's process ceiling (pids.max)."""
        d = self.dirs.get("pids", self.dirs.get("unified"))
        return _read_keyed(d / "pids.events") if d else {}

    # -- counters (implemented per version) ----------------------------------------
    def oom_kills(self) -> int:
        raise NotImplementedError

    def peak_memory_bytes(self) -> int | None:
        raise NotImplementedError

    def cpu_time_s(self) -> float | None:
        raise NotImplementedError

    def memory_events(self) -> dict[str, int]:
        raise NotImplementedError

    def cpu_throttling(self) -> dict[str, int]:
        """nr_periods / nr_throttled / throttled time: proof the CPU quota bit."""
        raise NotImplementedError


class TrialCgroupV1(TrialCgroup):
    version = "cgroup-v1"

    def oom_kills(self) -> int:
        ctl = _read_keyed(self.dirs["memory"] / "memory.oom_control")
        if "oom_kill" in ctl:
            return ctl["oom_kill"]
        # Kernels before 4.13 lack the counter; under_oom is the next best evidence.
        return ctl.get("under_oom", 0)

    def peak_memory_bytes(self) -> int | None:
        return _read_int(self.dirs["memory"] / "memory.max_usage_in_bytes")

    def cpu_time_s(self) -> float | None:
        d = self.dirs.get("cpuacct")
        ns = _read_int(d / "cpuacct.usage") if d else None
        return None if ns is None else ns / 1e9

    def memory_events(self) -> dict[str, int]:
        ev = _read_keyed(self.dirs["memory"] / "memory.oom_control")
        fc = _read_int(self.dirs["memory"] / "memory.failcnt")
        if fc is not None:
            ev["failcnt"] = fc
        return ev

    def cpu_throttling(self) -> dict[str, int]:
        return _read_keyed(self.dirs["cpu"] / "cpu.stat")


class TrialCgroupV2(TrialCgroup):
    version = "cgroup-v2"

    def oom_kills(self) -> int:
        return _read_keyed(self.dirs["unified"] / "memory.events").get("oom_kill", 0)

    def peak_memory_bytes(self) -> int | None:
        return _read_int(self.dirs["unified"] / "memory.peak")

    def cpu_time_s(self) -> float | None:
        us = _read_keyed(self.dirs["unified"] / "cpu.stat").get("usage_usec")
        return None if us is None else us / 1e6

    def memory_events(self) -> dict[str, int]:
        return _read_keyed(self.dirs["unified"] / "memory.events")

    def cpu_throttling(self) -> dict[str, int]:
        stat = _read_keyed(self.dirs["unified"] / "cpu.stat")
        return {k: v for k, v in stat.items() if k in ("nr_periods", "nr_throttled", "throttled_usec")}

    def kill_all(self, deadline_s: float = 5.0) -> None:
        kill = self.dirs["unified"] / "cgroup.kill"
        if kill.exists():
            try:
                _write(kill, "1")
            except OSError:
                pass
        super().kill_all(deadline_s)


#: a run parent: the local backend's, its supervisor leaf, the host agents' (orchestrator/agents/host_bounds.py)
_RUN_DIR = re.compile(r"^headroom-(?:supervisor-|agents-)?(\d+)$")


def reap_stale(base: Path, kept: list[str] | None = None) -> list[str]:
    """Kill and remove trial cgroups left by an orchestrator that died (kill -9).

    Its trials ran in their own sessions, so they may outlive it; their results
    were never recorded and a resume runs them again. Returns the cgroups reaped;
    one that is still there afterwards goes to ``kept`` (with why), never to the result.
    """
    reaped: list[str] = []
    try:
        children = list(base.iterdir())
    except OSError:
        return reaped
    for run_dir in children:
        m = _RUN_DIR.match(run_dir.name)
        if not m or not run_dir.is_dir() or pid_alive(int(m.group(1))):
            continue
        for trial_dir in [d for d in run_dir.iterdir() if d.is_dir()]:
            TrialCgroup({"x": trial_dir}).remove()
            if trial_dir.exists():
                if kept is not None:
                    kept.append(f"{trial_dir} (could not be removed: a process in it survived SIGKILL)")
            else:
                reaped.append(str(trial_dir))
        try:
            run_dir.rmdir()
        except OSError:
            pass
    return reaped


class CgroupDriver:
    """Creates trial cgroups under a per-run parent; one subclass per cgroup version."""

    mechanism: str
    #: where this process's run parents live (what ``reap_stale`` scans)
    bases: list[Path]
    #: trial cgroups of dead orchestrators reaped when this driver started
    reaped: list[str]
    #: ...and those it could not remove, with why
    kept: list[str]

    def reap_stale(self, kept: list[str] | None = None) -> list[str]:
        return [p for base in self.bases for p in reap_stale(base, kept)]

    def create(self, name: str, amounts: ResourceAmounts, pids_max: int | None = TRIAL_PIDS_MAX) -> TrialCgroup:
        """A fresh cgroup for one trial, with its limits set; nothing is left behind if a knob fails."""
        cg = self._make(name)
        try:
            self._configure(cg, amounts)
            pids_dir = cg.dirs.get("pids", cg.dirs.get("unified"))
            if pids_max is not None and pids_dir is not None and (pids_dir / "pids.max").exists():
                _write(pids_dir / "pids.max", str(pids_max))
        except OSError:
            cg.remove()
            raise
        return cg

    def _make(self, name: str) -> TrialCgroup:
        raise NotImplementedError

    def _configure(self, cg: TrialCgroup, amounts: ResourceAmounts) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def describe(self) -> dict[str, str]:
        raise NotImplementedError


class CgroupV1Driver(CgroupDriver):
    mechanism = "cgroup-v1"
    CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")

    def __init__(self, mounts: Mounts, run_name: str) -> None:
        missing = [c for c in ("memory", "cpu") if c not in mounts.v1]
        if missing:
            raise CgroupUnavailable(f"cgroup v1 controllers not mounted: {', '.join(missing)}")
        self.parents: dict[str, Path] = {}
        self.bases = []
        self.reaped = []
        self.kept: list[str] = []
        for c in self.CONTROLLERS:
            if c not in mounts.v1:
                continue
            mount, own = mounts.v1[c]
            self.bases.append(mount / own.lstrip("/"))
            self.reaped += reap_stale(self.bases[-1], self.kept)
            parent = mount / own.lstrip("/") / run_name
            try:
                parent.mkdir(exist_ok=True)
            except OSError as exc:
                self.close()
                raise CgroupUnavailable(f"cannot create {parent}: {exc.strerror}") from None
            self.parents[c] = parent
        # Comounted controllers (cpu,cpuacct) share a directory; keep one entry per path.

    def _make(self, name: str) -> TrialCgroupV1:
        dirs: dict[str, Path] = {}
        for c, parent in self.parents.items():
            d = parent / name
            d.mkdir()  # never share: an existing directory is another trial's
            dirs[c] = d
        return TrialCgroupV1(dirs)

    def _configure(self, cg: TrialCgroup, amounts: ResourceAmounts) -> None:
        mem, cpu = cg.dirs["memory"], cg.dirs["cpu"]
        if amounts.limit_memory_bytes is not None:
            _write(mem / "memory.limit_in_bytes", str(amounts.limit_memory_bytes))
            memsw = mem / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # no swapping past the limit, as the kubelet runs nodes
                try:
                    _write(memsw, str(amounts.limit_memory_bytes))
                except OSError:
                    pass
        _write(mem / "memory.soft_limit_in_bytes", str(amounts.request_memory_bytes))
        _write(cpu / "cpu.shares", str(cpu_shares(amounts.request_cpus)))
        _write(cpu / "cpu.cfs_period_us", str(CFS_PERIOD_US))
        if amounts.limit_cpus is not None:
            _write(cpu / "cpu.cfs_quota_us", str(max(1000, int(amounts.limit_cpus * CFS_PERIOD_US))))

    def close(self) -> None:
        for p in self.parents.values():
            try:
                p.rmdir()
            except OSError:
                pass

    def describe(self) -> dict[str, str]:
        return {"cgroup_version": "v1", **{f"cgroup_parent_{c}": str(p) for c, p in self.parents.items()}}


class CgroupV2Driver(CgroupDriver):
    mechanism = "cgroup-v2"

    def __init__(self, mounts: Mounts, run_name: str) -> None:
        if mounts.v2_root is None:
            raise CgroupUnavailable("no cgroup2 mount")
        own = mounts.v2_root / mounts.v2_own.lstrip("/")
        controllers = (
            set((own / "cgroup.controllers").read_text().split()) if (own / "cgroup.controllers").exists() else set()
        )
        if not {"memory", "cpu"} <= controllers:
            raise CgroupUnavailable(
                f"cgroup v2 at {own} lacks memory/cpu controllers (has: {' '.join(sorted(controllers)) or 'none'})"
            )
        self.bases = [own]
        self.kept = []
        self.reaped = reap_stale(own, self.kept)
        self.parent = own / run_name
        try:
            self.parent.mkdir(exist_ok=True)
            self._enable(own)
            self._enable(self.parent)
        except OSError as exc:
            raise CgroupUnavailable(f"cannot delegate controllers under {own}: {exc.strerror}") from None

    @staticmethod
    def _enable(cg: Path) -> None:
        ctl = cg / "cgroup.subtree_control"
        try:
            _write(ctl, "+memory +cpu")
            CgroupV2Driver._enable_pids(cg)
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            # "No internal processes": move this orchestrator (only it) into a leaf, then delegate.
            # If other processes share the cgroup the write still fails, and detect() falls back.
            leaf = cg / f"headroom-supervisor-{os.getpid()}"
            leaf.mkdir(exist_ok=True)
            _write(leaf / "cgroup.procs", str(os.getpid()))
            _write(ctl, "+memory +cpu")
            CgroupV2Driver._enable_pids(cg)

    @staticmethod
    def _enable_pids(cg: Path) -> None:
        """The pids controller where the hierarchy offers it; without it trials simply have no process ceiling."""
        try:
            if "pids" in (cg / "cgroup.controllers").read_text().split():
                _write(cg / "cgroup.subtree_control", "+pids")
        except OSError:
            pass

    def _make(self, name: str) -> TrialCgroupV2:
        d = self.parent / name
        d.mkdir()  # never share: an existing directory is another trial's
        return TrialCgroupV2({"unified": d})

    def _configure(self, cg: TrialCgroup, amounts: ResourceAmounts) -> None:
        d = cg.dirs["unified"]
        if amounts.limit_memory_bytes is not None:
            _write(d / "memory.max", str(amounts.limit_memory_bytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
        if (d / "memory.oom.group").exists():  # one OOM kills the whole trial, as in a container
            _write(d / "memory.oom.group", "1")
        _write(d / "memory.min", str(amounts.request_memory_bytes))
        _write(d / "cpu.weight", str(cpu_weight(amounts.request_cpus)))
        if amounts.limit_cpus is not None:
            _write(d / "cpu.max", f"{max(1000, int(amounts.limit_cpus * CFS_PERIOD_US))} {CFS_PERIOD_US}")

    def close(self) -> None:
        try:
            self.parent.rmdir()
        except OSError:
            pass

    def describe(self) -> dict[str, str]:
        return {"cgroup_version": "v2", "cgroup_parent": str(self.parent)}


def detect(run_name: str, mounts: Mounts | None = None) -> CgroupDriver:
    """Pick cgroup v2 when it carries memory and cpu, else v1; raise CgroupUnavailable if neither works."""
    mounts = mounts or read_mounts()
    reasons: list[str] = []
    for driver in (CgroupV2Driver, CgroupV1Driver):
        try:
            return driver(mounts, run_name)
        except (CgroupUnavailable, OSError) as exc:
            reasons.append(str(exc))
    raise CgroupUnavailable("; ".join(reasons))
