"""Each local trial step in a bubblewrap sandbox, so an agent cannot touch what grades it.

bubblewrap (``bwrap``, the Debian package ``bubblewrap``) builds the sandbox from
kernel namespaces without a daemon or an image. Per step it gives:

* its own user, PID, IPC, UTS, cgroup and (unless the experiment allows the
  internet) network namespaces: the step sees only its own processes, and none
  of the orchestrator's;
* an unprivileged uid: when headroom runs as root, ``setpriv`` drops to
  :data:`SANDBOX_UID` (``nobody``) *before* bwrap, so the step is unprivileged on
  the host too, not merely inside its user namespace;
* a read-only view of the system (``/usr``, ``/etc``, ``/opt``, ``/sys`` with
  the cgroup hierarchy), a fresh ``/proc`` and ``/dev``;
* the task's files read-only under :data:`TASK` (the agent sees neither
  ``tests/`` nor, unless it is the oracle, ``solution/``);
* one writable work dir (:data:`APP`), and a fresh ``HOME``, ``/tmp`` and ``/dev/shm`` per step,
  all host dirs in the trial's work dir (so the storage limit counts them); the rest of
  ``/dev`` is read-only;
* the verifier's logs dir (:data:`VERIFIER_LOGS`) exists only in the verifier's
  sandbox, which starts after every agent process is gone;
* a seccomp filter (:mod:`.seccomp`) that refuses the kernel keyring syscalls, as
  Docker's default profile does: the keyring is the one kernel store the namespaces
  above do not separate (a step would inherit the orchestrator's session keyring,
  and keys one step adds would be seen by later trials); and
  ``/proc/keys``, ``/proc/key-users`` masked, as Docker masks them.

Nothing else of the host is mounted: not the store, not other trials' work
dirs, not the orchestrator's home or checkout. ``--die-with-parent`` kills the
sandbox if headroom dies (even by ``kill -9``), and the end of the PID namespace's
init takes every process of the step with it, daemons included.

The caller joins the trial's cgroup before this argv is exec'd, so bwrap and
everything under it are inside the trial's limits.
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from orchestrator.errors import FilterUnavailable, SandboxUnavailable
from orchestrator.isolation import seccomp
from orchestrator.isolation.process import FD3, OPEN_FD3

S = TypeVar("S")

#: ``nobody``: owns nothing on the host, so a sandboxed step can change nothing it is not given.
SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: Where a step finds things inside its sandbox. Fixed, so nothing of the host layout leaks in.
TASK = "/task"
APP = "/app"
AGENT_LOGS = "/logs/agent"
VERIFIER_LOGS = "/logs/verifier"
HOME = "/home/headroom"
TMP = "/tmp"
SHM = "/dev/shm"
#: Read-only system directories (those that exist; symlinks such as /bin -> usr/bin are recreated).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")
#: Host files hidden from a step (Docker's maskedPaths for the keyring): they list keys by description.
MASKED_PROC = ("/proc/keys", "/proc/key-users")
#: The fd on which bwrap reads the seccomp program (0-2 are the step's stdio; nothing else is inherited).
#: Opened with :data:`~orchestrator.isolation.process.OPEN_FD3` where no wrapper opened it: a fresh open file per
#: step, so concurrent steps never share a read offset, and nothing but the sandbox's own bwrap ever holds it.
SECCOMP_FD = FD3
#: Task entries a step never sees unless it is named for it.
TESTS_DIR = "tests"
SOLUTION_DIR = "solution"


@dataclass(frozen=True)
class Bind:
    host: Path
    inside: str
    writable: bool = False


@dataclass
class StepView:
    """What one step sees besides the read-only system."""

    task_dir: Path
    task_entries: list[str]  # names of the task dir's top-level entries bound under TASK
    binds: list[Bind] = field(default_factory=list)
    network: bool = False


def task_entries(task_dir: Path, *, tests: bool, solution: bool) -> list[str]:
    """The task's top-level entries a step may see: never the tests for an agent, the solution for the oracle only."""
    hidden = set()
    if not tests:
        hidden.add(TESTS_DIR)
    if not solution:
        hidden.add(SOLUTION_DIR)
    return sorted(p.name for p in task_dir.iterdir() if p.name not in hidden)


class Sandbox:
    """Builds the argv that runs a command in a fresh bwrap sandbox."""

    def __init__(
        self,
        bwrap: str,
        setpriv: str | None,
        filter: seccomp.Filter | None = None,
        filter_fallback_reason: str | None = None,
        offline_filter: seccomp.Filter | None = None,
    ) -> None:
        self.bwrap = bwrap
        #: set when headroom runs as root: drop to SANDBOX_UID on the host before bwrap
        self.setpriv = setpriv
        #: the seccomp program bwrap installs before exec'ing the step; None (with the reason) where it cannot be built
        self.filter = filter
        self.filter_fallback_reason = filter_fallback_reason
        #: the same program plus the socket-family rules, for steps without the network
        self.offline_filter = offline_filter if filter is not None else None

    @property
    def uid(self) -> int:
        return SANDBOX_UID if self.setpriv else os.getuid()

    @property
    def gid(self) -> int:
        return SANDBOX_GID if self.setpriv else os.getgid()

    def describe(self) -> dict[str, object]:
        return {
            "tool": "bubblewrap",
            "bwrap": self.bwrap,
            "version": _version(self.bwrap),
            "host_uid": self.uid,
            "namespaces": ["user", "pid", "ipc", "uts", "cgroup", "mount", "net (unless allow_internet)"],
            "seccomp": (
                self.filter.describe()
                if self.filter
                else {"filter": None, "fallback_reason": self.filter_fallback_reason}
            ),
            "seccomp_offline": self.offline_filter.describe() if self.offline_filter else None,
            "masked": [p for p in MASKED_PROC if Path(p).exists()],
        }

    def filter_for(self, view: StepView) -> seccomp.Filter | None:
        """The seccomp program a step with ``view`` runs under (None where none could be built)."""
        return self.filter if view.network else (self.offline_filter or self.filter)

    def argv(
        self,
        view: StepView,
        command: list[str],
        cwd: str = APP,
        *,
        filter_opened: bool = False,
        setenv: dict[str, str] | None = None,
    ) -> list[str]:
        """``command`` in a fresh sandbox showing ``view``. ``filter_opened``: the caller starts this argv with
        :meth:`filter_for`'s program already open on :data:`SECCOMP_FD` (``run_step(fd3=...)`` does, from the
        wrapper that joins the cgroup), so no process of its own opens it. ``setenv``: variables bwrap sets for
        the step only (:func:`~orchestrator.isolation.hostenv.split`'s workload-only ones, which ``setpriv`` and
        ``bwrap`` on the host must not see)."""
        args: list[str] = []
        flt = self.filter_for(view)
        if flt and not filter_opened:
            args += ["/bin/sh", "-c", OPEN_FD3, "headroom-seccomp", flt.path]
        if self.setpriv:
            user, group = setpriv_ids()
            args += [
                self.setpriv,
                f"--reuid={user}",
                f"--regid={group}",
                "--clear-groups",
                "--inh-caps=-all",
                "--no-new-privs",
                "--",
            ]
        args += [self.bwrap, "--unshare-all"]
        if view.network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--hostname", "headroom", "--cap-drop", "ALL"]
        for k, v in (setenv or {}).items():
            args += ["--setenv", k, v]
        args += system_binds()
        args += ["--proc", "/proc", "--dev", "/dev", "--dir", "/run", "--dir", "/var", "--symlink", TMP, "/var/tmp"]
        for masked in MASKED_PROC:
            if Path(masked).exists():  # a kernel without keyrings has no such file, and bwrap cannot bind onto nothing
                args += ["--ro-bind", "/dev/null", masked]  # nodev: opening it fails with EACCES
        if flt:
            args += ["--seccomp", str(SECCOMP_FD)]
        # Lower mounts first: a bind under /home or /logs needs its parent to exist in the sandbox.
        args += ["--dir", TASK]
        for name in view.task_entries:
            args += ["--ro-bind", str(view.task_dir / name), f"{TASK}/{name}"]
        for b in sorted(view.binds, key=lambda b: b.inside.count("/")):
            args += ["--bind" if b.writable else "--ro-bind", str(b.host), b.inside]
        # The sandbox's own root (a tmpfs holding the mount points) is read-only too, and so is
        # bwrap's /dev tmpfs (its device nodes still work; only new files are refused): a step
        # writes only where it was given a writable bind, all of it counted against storage. An
        # uncapped /dev or /dev/shm tmpfs once took 300 MB under a 30 MiB limit; /dev/shm is a bind
        # of the step's own host dir (SHM) when the caller gives one, and read-only otherwise.
        args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", cwd, "--"]
        return args + command


@functools.cache
def setpriv_ids() -> tuple[str, str]:
    """How ``setpriv`` is told :data:`SANDBOX_UID` and :data:`SANDBOX_GID`: by name where the host's name for each
    resolves back to exactly that id, else by number. setpriv looks its argument up as a name first: a number is
    no name in ``/etc/passwd``, so NSS goes on to its next module (``systemd`` on Debian, which it loads for
    it), about 0.5 ms of a sandboxed step's CPU; a name the files module finds ends the lookup there."""
    try:
        user, group = pwd.getpwuid(SANDBOX_UID).pw_name, grp.getgrgid(SANDBOX_GID).gr_name
        same = pwd.getpwnam(user).pw_uid == SANDBOX_UID and grp.getgrnam(group).gr_gid == SANDBOX_GID
    except KeyError:
        same = False
    if not same or user.isdigit() or group.isdigit():
        return str(SANDBOX_UID), str(SANDBOX_GID)
    return user, group


def _version(bwrap: str) -> str | None:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


@dataclass(frozen=True)
class Tools:
    """What a bubblewrap sandbox is built from here: the binaries and the seccomp programs (or why none)."""

    bwrap: str
    #: set when headroom runs as root (the resolved path): the step is dropped to an unprivileged uid with it
    setpriv: str | None
    filter: seccomp.Filter | None
    offline_filter: seccomp.Filter | None
    filter_fallback_reason: str | None

    def without_filter(self, why: str) -> Tools:
        return Tools(self.bwrap, self.setpriv, None, None, f"bwrap refused the seccomp filter: {why}")


def system_binds(dirs: tuple[str, ...] = SYSTEM_DIRS) -> list[str]:
    """bwrap arguments showing ``dirs`` read-only (a merged-/usr link stays a link)."""
    args: list[str] = []
    for d in dirs:
        p = Path(d)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            args += ["--ro-bind", d, d]
    return args


def probe_with(make: Callable[[Tools], S], argv: Callable[[S], list[str]]) -> S:
    """A sandbox ``make`` builds that really starts here (``argv`` of a no-op in it), or
    :class:`SandboxUnavailable` with the reason: the local backend's steps and the host-side agents' sandbox
    (:mod:`orchestrator.agents.host_sandbox`) are probed alike.

    It really starts one (with every namespace and the uid drop), because a bwrap binary that exists may still
    be refused user namespaces by the kernel or a container runtime. Where the same sandbox starts without the
    seccomp filter, the filter is what failed: it runs without, and says so.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
    setpriv = None
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable(
                "running as root but setpriv (util-linux) is missing: cannot drop to an unprivileged uid"
            )
        setpriv = os.path.realpath(setpriv)
    try:
        flt: seccomp.Filter | None = seccomp.build()
        offline: seccomp.Filter | None = seccomp.build(network=False)
        reason = None
    except FilterUnavailable as exc:
        flt, offline, reason = None, None, str(exc)
    tools = Tools(bwrap, setpriv, flt, offline, reason)
    box = make(tools)
    err = start_once(argv(box))
    if err and flt is not None:
        bare = make(tools.without_filter(err))
        if start_once(argv(bare)) is None:
            return bare
    if err:
        raise SandboxUnavailable(err)
    return box


def start_once(argv: list[str]) -> str | None:
    """Run a sandbox's no-op ``argv``; None if it worked, else why not."""
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not be started: {exc}"
    if res.returncode != 0:
        msg = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        return f"bwrap cannot create a sandbox here: {msg}"
    return None


def probe() -> Sandbox:
    """A working sandbox for the local backend's steps, or :class:`SandboxUnavailable` with the reason."""
    return probe_with(
        lambda t: Sandbox(t.bwrap, t.setpriv, t.filter, t.filter_fallback_reason, t.offline_filter),
        lambda box: box.argv(StepView(task_dir=Path("/"), task_entries=[]), ["/bin/sh", "-c", "exit 0"], cwd="/"),
    )
