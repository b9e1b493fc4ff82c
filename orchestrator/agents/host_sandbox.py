"""The host-side (external) agent's own sandbox: bubblewrap, around the agent program, whatever the backend.

An external agent runs on headroom's host, so without a sandbox it would see everything headroom's user
sees: the task's ``tests/``, the store, other tries' files and processes, headroom's ``/proc`` (its
environment and command line), the host's credentials. In its sandbox it sees:

* the system read-only (``/usr`` and the ``/bin``, ``/lib`` links) and a short list of ``/etc`` entries a
  program needs to start, resolve names and check certificates (:data:`ETC_ENTRIES`; no keys, no
  ``pip.conf``, no kubeconfig);
* its own files read-only, at their host paths (so a virtualenv's absolute paths hold): ``agent.path``,
  the program of its command (the virtualenv it lives in, and the Python install that virtualenv was made
  from) and the script its interpreter is given, and whatever the user names in ``agent.host_paths``;
* a private work area: ``HOME`` (:data:`HOME`), ``/tmp``, ``/dev/shm`` and its logs dir (:data:`LOGS`), each a
  tmpfs of a bounded size (:mod:`.host_bounds`; the logs dir is copied out after the step, :mod:`.host_logs`);
  the instruction file;
* the try's exec channel and, without the network, the model gateway (:data:`RUN`; see
  :mod:`orchestrator.agents.relay`);
* its own PID, IPC, UTS, cgroup and mount namespaces (a fresh ``/proc``: no other process of the host,
  headroom and other agents included), and the network namespace unless the agent has the network;
* the local sandbox's seccomp filter (no kernel keyring) and ``/proc/keys`` masked.

When headroom runs as root, bubblewrap runs as root to build the view (so it can bind the agent's files
wherever they are), and the agent is dropped, inside, to ``nobody`` with no capability and
``no_new_privs`` (``setpriv``): unprivileged on the host. Otherwise bubblewrap runs unprivileged in a user
namespace, as the local backend's sandbox does.

``--die-with-parent`` and the end of the PID namespace's init take every process of the agent with it
when its main process ends: nothing it starts outlives its step.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.contract import agent_check
from orchestrator.errors import SandboxUnavailable
from orchestrator.isolation import hostenv, sandbox, seccomp
from orchestrator.isolation.process import OPEN_FD3
from orchestrator.isolation.sandbox import MASKED_PROC, SECCOMP_FD

#: The agent's unprivileged host uid when headroom runs as root.
AGENT_UID = 65534
AGENT_GID = 65534
#: Fixed paths inside the sandbox.
HOME = "/home/agent"
TMP = "/tmp"
SHM = "/dev/shm"
LOGS = "/logs/agent"
RUN = "/run/headroom"
LIB = f"{RUN}/lib"
EXEC_SOCKET = f"{RUN}/exec.sock"
EXEC_COMMAND = f"{RUN}/bin/headroom-exec"
GATEWAY_SOCKET = f"{RUN}/gateway.sock"
INSTRUCTION = f"{RUN}/instruction.md"
#: Read-only system directories (symlinks such as /bin -> usr/bin are recreated). Not /opt, /srv, /home, /root.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc a program needs: the loader, users and groups by name, name resolution, certificates, time zone,
#: terminal and locale data, the Debian alternatives links. Nothing with a credential in it.
ETC_ENTRIES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "resolv.conf",
    "gai.conf",
    "protocols",
    "services",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "localtime",
    "timezone",
    "mime.types",
    "os-release",
    "debian_version",
    "lsb-release",
    "bash.bashrc",
    "profile",
    "profile.d",
    "inputrc",
    "terminfo",
    "locale.alias",
    "locale.conf",
    "magic",
    "magic.mime",
)
#: Host variables an agent program keeps (its HOME, TMPDIR and USER are the sandbox's own).
HOST_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TERM")


@dataclass(frozen=True)
class Bind:
    host: str
    inside: str
    writable: bool = False


@dataclass(frozen=True)
class Tmpfs:
    """A private, size-bounded, memory-backed directory (its pages count in the agent's cgroup)."""

    inside: str
    size_bytes: int


@dataclass
class View:
    """What one agent process sees besides the system."""

    binds: list[Bind] = field(default_factory=list)
    tmpfs: list[Tmpfs] = field(default_factory=list)
    network: bool = False
    cwd: str = HOME  # made (empty, read-only) where nothing is bound: headroom's own working directory, say


class HostSandbox:
    def __init__(
        self,
        bwrap: str,
        setpriv: str | None,
        filter: seccomp.Filter | None,
        offline_filter: seccomp.Filter | None,
        filter_fallback_reason: str | None = None,
    ) -> None:
        self.bwrap = bwrap
        #: set when headroom runs as root: bwrap builds the view as root, the agent is dropped to AGENT_UID inside
        self.setpriv = setpriv
        self.filter = filter
        self.offline_filter = offline_filter if filter is not None else None
        self.filter_fallback_reason = filter_fallback_reason

    @property
    def owner(self) -> tuple[int, int] | None:
        """Who must own the agent's writable dirs and its sockets (None: headroom's own user)."""
        return (AGENT_UID, AGENT_GID) if self.setpriv else None

    def describe(self) -> dict[str, object]:
        return {
            "tool": "bubblewrap",
            "bwrap": self.bwrap,
            "agent_uid": AGENT_UID if self.setpriv else os.getuid(),
            "namespaces": ["pid", "ipc", "uts", "cgroup", "mount", "net (unless the agent has the network)"]
            + ([] if self.setpriv else ["user"]),
            "seccomp": self.filter.describe()
            if self.filter
            else {"filter": None, "fallback_reason": self.filter_fallback_reason},
            "sees": "the system read-only, its own files, a private HOME and /tmp, its logs dir, the exec channel "
            "and the model gateway",
        }

    def argv(self, view: View, command: list[str], setenv: Mapping[str, str] | None = None) -> list[str]:
        """``command`` in a fresh sandbox showing ``view``. ``setenv``: variables for ``command`` only
        (:func:`~orchestrator.isolation.hostenv.split`'s workload-only ones), set by ``env`` in the sandbox after the
        uid drop, so neither bwrap (root when headroom is) nor setpriv ever runs with them."""
        args: list[str] = []
        flt = self.filter if view.network else (self.offline_filter or self.filter)
        if flt:
            args += ["/bin/sh", "-c", OPEN_FD3, "headroom-seccomp", flt.path]
        args.append(self.bwrap)
        if self.setpriv:
            args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
            if not view.network:
                args.append("--unshare-net")
            # setpriv needs these three, and nothing else, to drop the agent to nobody
            args += ["--cap-drop", "ALL"] + [
                a for c in ("SETUID", "SETGID", "SETPCAP") for a in ("--cap-add", f"CAP_{c}")
            ]
        else:
            args.append("--unshare-all")
            if view.network:
                args.append("--share-net")
            args += ["--cap-drop", "ALL"]
        args += ["--die-with-parent", "--new-session", "--hostname", "headroom-agent"]
        made: set[str] = {"/"}
        args += sandbox.system_binds(SYSTEM_DIRS)
        made.update(SYSTEM_DIRS)
        args += ["--perms", "0755", "--dir", "/etc"]
        for name in ETC_ENTRIES:
            p = Path("/etc") / name
            if p.exists():  # a dangling link (resolv.conf to a stopped resolver) cannot be bound
                args += ["--ro-bind", str(p), str(p)]
        made.add("/etc")
        args += ["--proc", "/proc", "--dev", "/dev"]
        for masked in MASKED_PROC:
            if Path(masked).exists():
                args += ["--ro-bind", "/dev/null", masked]
        if flt:
            args += ["--seccomp", str(SECCOMP_FD)]
        for d in ("/run", "/var", "/home", "/logs"):
            args += ["--perms", "0755", "--dir", d]
            made.add(d)
        args += ["--symlink", TMP, "/var/tmp"]
        mounts: list[Bind | Tmpfs] = [*view.binds, *view.tmpfs]
        for m in sorted(mounts, key=lambda m: (m.inside.count("/"), m.inside)):
            for parent in _parents(m.inside):
                if parent not in made and not under(parent, SYSTEM_DIRS + ("/etc",)):
                    args += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
            if isinstance(m, Tmpfs):
                # as root bwrap makes it root's: open to the agent's uid, the only one in the sandbox
                perms = "1777" if self.setpriv or m.inside in (TMP, SHM) else "0700"
                args += ["--size", str(m.size_bytes), "--perms", perms, "--tmpfs", m.inside]
            else:
                args += ["--bind" if m.writable else "--ro-bind", m.host, m.inside]
            made.add(m.inside)
        if view.cwd not in made and not under(view.cwd, SYSTEM_DIRS + ("/etc",)):
            for d in [*_parents(view.cwd), view.cwd]:
                if d not in made:  # inside a writable bind (the private /tmp) it is made there
                    args += ["--perms", "0755", "--dir", d]
                    made.add(d)
        args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", view.cwd, "--"]
        if self.setpriv:
            args += [
                self.setpriv,
                f"--reuid={AGENT_UID}",
                f"--regid={AGENT_GID}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        return args + hostenv.env_argv(setenv or {}) + command


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def under(path: str, roots: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or below one."""
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


# -- the agent's own files ------------------------------------------------------------------------


def interpreter_root() -> str:
    """The Python install headroom runs on (not a virtualenv): the exec client and the relay run on it."""
    return os.path.realpath(sys.base_prefix)


def interpreter() -> str:
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return os.path.realpath(base if base.exists() else sys.executable)


def _venv_root(path: Path) -> Path | None:
    for parent in list(path.parents)[:3]:
        if (parent / "pyvenv.cfg").is_file():
            return parent
    return None


def _venv_home(venv: Path) -> str | None:
    """The Python install a virtualenv was made from (pyvenv.cfg's ``home`` is its bin dir)."""
    try:
        for line in (venv / "pyvenv.cfg").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "home":
                return os.path.realpath(Path(value.strip()).parent)
    except OSError:
        pass
    return None


def _install_root(real: Path) -> str:
    """A resolved interpreter's install (``PREFIX/bin/python3.11`` -> PREFIX: it needs its lib beside bin); any
    other program is the file alone (``~/bin/tool`` must not show the home directory)."""
    if real.name.startswith("python") and real.parent.name == "bin" and real.parent.parent != Path("/"):
        return str(real.parent.parent)
    return str(real)


def _system_has(program: str, path_env: str | None) -> bool:
    """Whether ``program`` resolves on the system dirs of ``path_env`` (those the sandbox shows)."""
    dirs = [d for d in (path_env or os.defpath).split(":") if d and under(os.path.realpath(d), SYSTEM_DIRS)]
    return bool(dirs) and shutil.which(program, path=":".join(dirs)) is not None


def own_files(command: str, agent_path: str | None, host_paths: Iterable[str], path_env: str | None) -> list[str]:
    """The host paths an agent's command needs read-only: its dir, its program (with its virtualenv and the
    interpreter that made it), its script, and what the user named. Never ``/``."""
    found: list[str] = []
    covered = list(SYSTEM_DIRS)

    def add(p: str) -> None:
        p = os.path.abspath(p)
        if p != "/" and not under(p, covered) and os.path.exists(p):
            found.append(p)
            covered.append(p)

    if agent_path:
        add(agent_path)
    for p in host_paths:
        add(p)
    t = agent_check.target(command)
    base = agent_path or os.getcwd()
    if t is not None:
        prog = (
            os.path.join(base, t.program) if "/" in t.program else shutil.which(t.program, path=path_env or os.defpath)
        )
        # a shim in front of a system program (pyenv's) is left out: in the sandbox the system's one runs
        if prog and os.path.isfile(prog) and ("/" in t.program or not _system_has(t.program, path_env)):
            real = os.path.realpath(prog)
            for candidate in (os.path.abspath(prog), real):  # a pipx link leads into its virtualenv
                if (venv := _venv_root(Path(candidate))) is not None:
                    add(str(venv))
                    if (home := _venv_home(venv)) is not None:
                        add(home)
            add(prog)
            add(_install_root(Path(real)))
        if t.script:
            add(os.path.join(base, t.script))
    return found


#: Where a host keeps credentials an agent must not see unless the user names them (agent.host_paths): the
#: container and cluster sockets and configs. Each HOME's credential stores (:data:`IN_HOME`) are added.
CREDENTIALS = (
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/etc/kubernetes",
    "/var/lib/kubelet",
)

#: The homes whose credentials are guarded: root's and headroom's own. A view must not hold a home (its dotfiles
#: are credentials); it may show a part of one that is no credential store (an interpreter under ~/.pyenv).
HOMES = ("/root",)

#: Inside a home, what holds credentials, configs that point at them, or what was typed: a view lying in one of
#: these (or holding it) is refused. Everything else in a home is the user's files, shown only where a view names it.
IN_HOME = (
    ".kube",
    ".docker",
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config",
    ".local/share/keyrings",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".gitconfig",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials.toml",
    ".bash_history",
    ".python_history",
)


def homes() -> list[str]:
    return sorted({*HOMES, os.path.expanduser("~")} - {"", "/"})


def credentials(env: Mapping[str, str]) -> list[str]:
    """Host paths a view must neither hold nor lie in unless named: :data:`CREDENTIALS`, each home's credential
    stores (:data:`IN_HOME`), the kubeconfigs (``KUBECONFIG``), the Docker socket of ``DOCKER_HOST``. A view that
    holds a whole home is refused apart (:func:`homes`, ``conflicts(..., inside=False)``)."""
    found = [*CREDENTIALS, *(os.path.join(home, part) for home in homes() for part in IN_HOME)]
    found += [p for p in env.get("KUBECONFIG", "").split(":") if p.startswith("/")]
    host = env.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        found.append(host.removeprefix("unix://"))
    return [p for p in found if p not in ("", "/")]


def conflicts(paths: Iterable[str], protected: Iterable[str], *, inside: bool = True) -> str | None:
    """A path of the agent's view that holds, or (``inside``) lies in, something it must not see (the tasks, the
    store), or None."""
    for p in paths:
        real = os.path.realpath(p)
        for q in protected:
            q = os.path.realpath(q)
            if under(q, [real]):
                return f"{p} (it holds {q})"
            if inside and under(real, [q]):
                return f"{p} (it lies in {q})"
    return None


# -- probing --------------------------------------------------------------------------------------

_lock = threading.Lock()
_probed: list[HostSandbox | SandboxUnavailable] = []


def probe() -> HostSandbox:
    """A host sandbox that really starts here, or :class:`SandboxUnavailable` with the reason (asked once per
    process: every try of a run gets the same answer the run recorded)."""
    with _lock:
        if not _probed:
            try:
                _probed.append(_probe())
            except SandboxUnavailable as exc:
                _probed.append(exc)
        got = _probed[0]
    if isinstance(got, SandboxUnavailable):
        raise got
    return got


def _probe() -> HostSandbox:
    def make(t: sandbox.Tools) -> HostSandbox:
        # setpriv runs inside the sandbox, where only the system dirs are
        if t.setpriv is not None and not under(t.setpriv, SYSTEM_DIRS):
            raise SandboxUnavailable(f"setpriv is at {t.setpriv}, outside the system dirs the agent's sandbox shows")
        return HostSandbox(t.bwrap, t.setpriv, t.filter, t.offline_filter, t.filter_fallback_reason)

    return sandbox.probe_with(make, lambda box: box.argv(View(cwd="/"), ["/bin/sh", "-c", "exit 0"]))


def sandbox_env(host: Mapping[str, str]) -> dict[str, str]:
    """The host variables an agent keeps, and the sandbox's own HOME and TMPDIR."""
    env = {k: host[k] for k in HOST_ENV if k in host}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return {**env, "HOME": HOME, "TMPDIR": TMP, "PYTHONPATH": LIB}
