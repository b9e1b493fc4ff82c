"""The local backend's :class:`~orchestrator.contract.runner.StepRunner`: one bubblewrap sandbox per command.

Every command of a try runs in a fresh sandbox (:mod:`.sandbox`) inside the try's cgroup:
``role="agent"`` sees the work dir, the agent's logs and the task without ``tests/`` (and
without ``solution/`` unless it is the oracle); ``role="verifier"`` also sees what the
handover put (the tests, a fresh verifier-logs dir). Each
role has its own ``HOME`` and ``/tmp``, kept across that role's commands (an agent's setup
installs into the ``HOME`` its agent step then uses). Without a sandbox (``isolation:
none``) the same commands run as this user with host paths.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from orchestrator.contract import sanitiser
from orchestrator.contract.outputs import read_regular_file
from orchestrator.contract.runner import Role
from orchestrator.errors import NotRegular
from orchestrator.isolation import cgroups, hostenv, sandbox
from orchestrator.isolation.process import Limits, kill_tree, run_step
from orchestrator.spec.facts import StepFacts


def make_dir(path: Path, owner: tuple[int, int] | None, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, *owner)
    return path


#: Where an installed agent's directory appears in the sandbox (read-only).
AGENT_DIR = "/agent"


class LocalRunner:
    """One try's environment on this machine. ``where`` maps the environment's paths to host paths."""

    def __init__(
        self,
        *,
        box: sandbox.Sandbox | None,
        workdir: Path,
        app: Path,
        agent_logs: Path,
        task_host: Path,
        include_solution: bool,
        network: bool,
        owner: tuple[int, int] | None,
        cgroup: cgroups.TrialCgroup | None,
        limits: Limits,
        on_spawn: Callable[[int], None],
        pids: set[int],
        base_env: Mapping[str, str],
        agent_network: bool | None = None,
        agent_dir: Path | None = None,
    ) -> None:
        self.box, self.workdir, self.app, self.agent_logs = box, workdir, app, agent_logs
        self.task_host, self.include_solution, self.network = task_host, include_solution, network
        self.owner, self.cg, self.limits, self.on_spawn, self.pids = owner, cgroup, limits, on_spawn, pids
        self.base_env = dict(base_env)
        #: the agent role's network (a command agent's own; None: the environment's), an installed agent's dir
        self.agent_network, self.agent_dir = agent_network, agent_dir
        self.out_dir = make_dir(workdir / "out", None, 0o700)  # step stdout/stderr: never inside a sandbox
        self.usage: list[dict[str, float | int | None]] = []
        self._homes: dict[Role, tuple[Path, Path]] = {}
        #: what the handover put for the verifier: environment path -> host path
        self.verifier_puts: dict[str, Path] = {}
        self._n = 0
        if box:
            self.paths = {
                "task": sandbox.TASK,
                "app": sandbox.APP,
                "agent_logs": sandbox.AGENT_LOGS,
                "verifier_logs": sandbox.VERIFIER_LOGS,
                "tests": f"{sandbox.TASK}/{sandbox.TESTS_DIR}",
                "solution": f"{sandbox.TASK}/{sandbox.SOLUTION_DIR}",
            }
        else:
            vlogs = Path(tempfile.mktemp(prefix="verifier-logs-", dir=workdir))  # made in the handover, not before
            self.paths = {
                "task": str(task_host),
                "app": str(app),
                "agent_logs": str(agent_logs),
                "verifier_logs": str(vlogs),
                "tests": str(task_host / sandbox.TESTS_DIR),
                "solution": str(task_host / sandbox.SOLUTION_DIR),
            }

    # -- StepRunner --------------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        role: Role,
        name: str,
        cwd: str,
        env: Mapping[str, str],
        timeout_s: float,
        stdin: bytes | None = None,
        network: bool | None = None,
    ) -> StepFacts:
        home, tmp = self._home(role)
        dirs_env = (
            {"HOME": sandbox.HOME, "TMPDIR": sandbox.TMP} if self.box else {"HOME": str(home), "TMPDIR": str(tmp)}
        )
        command = list(argv)
        host_cwd = self._host(cwd) if not self.box else self.app
        step_env = {**self.base_env, **env, **dirs_env}
        if self.box:
            # /dev/shm too is a dir of the work dir on the host: the storage limit counts it (an uncapped
            # tmpfs there once took 300 MB under a 30 MiB limit); the rest of /dev is read-only.
            binds = [
                sandbox.Bind(self.app, sandbox.APP, True),
                sandbox.Bind(home, sandbox.HOME, True),
                sandbox.Bind(tmp, sandbox.TMP, True),
                sandbox.Bind(home.parent / "shm", sandbox.SHM, True),
            ]
            # Writable for the verifier's role too: the sanitiser removes the agent's links there (the
            # agent's self-report was read before the handover).
            binds.append(sandbox.Bind(self.agent_logs, sandbox.AGENT_LOGS, True))
            if role == "agent":
                entries = sandbox.task_entries(self.task_host, tests=False, solution=self.include_solution)
                if self.agent_dir is not None:
                    binds.append(sandbox.Bind(self.agent_dir, AGENT_DIR))
            else:
                binds += [
                    sandbox.Bind(host, inside, inside == sandbox.VERIFIER_LOGS)
                    for inside, host in self.verifier_puts.items()
                ]
                entries = sandbox.task_entries(self.task_host, tests=False, solution=True)
            own = self.agent_network if role == "agent" and name == "agent" else None
            view = sandbox.StepView(
                task_dir=self.task_host,
                task_entries=entries,
                binds=binds,
                network=network if network is not None else own if own is not None else self.network,
            )
            flt = self.box.filter_for(view)
            fd3 = flt.path if flt else None
            # the loader's and a shell's start-up variables (a task's env tables may set them) are set by bwrap inside
            # the sandbox only: the wrapper, setpriv and bwrap run on the host, as headroom's user, before the uid drop
            step_env, inside = hostenv.split(step_env)
            command = self.box.argv(view, command, cwd=cwd, filter_opened=True, setenv=inside)
        else:
            fd3 = None
        self._n += 1
        facts, usage = run_step(
            f"{self._n:02d}-{name}",
            command,
            env=step_env,
            cwd=host_cwd or self.app,
            logs_dir=self.out_dir,
            timeout_s=timeout_s,
            cgroup=self.cg,
            limits=self.limits,
            on_spawn=self.on_spawn,
            stdin=stdin,
            fd3=fd3,
        )
        facts.name = name
        self.usage.append(usage)
        return facts

    def put_tree(self, src: Path | None, dest: str) -> None:
        """The verifier's view gets ``src`` (read-only, bound: the task snapshot is already a private copy)
        or, for ``None``, a fresh folder made now, after every agent process is dead."""
        if src is None:
            host = Path(tempfile.mkdtemp(prefix="put-", dir=self.workdir))
            make_dir(host, self.owner)
            if not self.box:
                os.rename(host, dest)
                host = Path(dest)
            self.verifier_puts[dest] = host
        elif self.box:
            self.verifier_puts[dest] = src
        # without a sandbox the tests are read where they are (the task's own folder): nothing to put

    def read_file(self, path: str, limit: int) -> bytes | None:
        host = self._host(path)
        if host is None:
            raise NotRegular(f"{path} is outside what this backend can read")
        try:
            raw = read_regular_file(host, limit)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR,):
                return None
            raise NotRegular(exc.strerror or str(exc)) from None
        if len(raw) > limit:
            raise NotRegular(f"larger than {limit} bytes")
        return raw

    def nothing_to_sanitise(self, roots: Sequence[str], never_searched: Sequence[str]) -> bool:
        """:class:`~orchestrator.contract.runner.HostWalk`: the roots are binds of host folders (nothing else is
        mounted inside them, in either view), so walking those host folders is walking what the verifier sees."""
        never = [os.path.normpath(p) for p in (*never_searched, "/proc", "/sys", "/dev")]
        host: list[Path] = []
        for r in (os.path.normpath(r) for r in roots):
            # a never-searched tree inside a root (or a root inside one) is the script's to prune
            if any(r == p or _under(r, p) or _under(p, r) for p in never):
                return False
            if (h := self._host(r)) is None or h != self._mount_of(r):
                return False
            host.append(h)
        uid = self.box.uid if self.box else os.getuid()  # the verifier's user on the host
        return sanitiser.nothing_to_judge(host, None if uid == 0 else uid)

    def sandboxed(self, argv: list[str], setenv: Mapping[str, str]) -> list[str]:
        """``argv`` in the agent's view of the environment, with the environment's network: the long-lived
        sandbox an external agent's exec channel serves (:mod:`.environment`). ``setenv``: what of its environment
        only ``argv`` may get (:func:`hostenv.split`), set inside the sandbox (without one, by ``env`` before it)."""
        if not self.box:
            return [*hostenv.env_argv(setenv), *argv]
        home, tmp = self._home("agent")
        binds = [
            sandbox.Bind(self.app, sandbox.APP, True),
            sandbox.Bind(home, sandbox.HOME, True),
            sandbox.Bind(tmp, sandbox.TMP, True),
            sandbox.Bind(home.parent / "shm", sandbox.SHM, True),
            sandbox.Bind(self.agent_logs, sandbox.AGENT_LOGS, True),
        ]
        view = sandbox.StepView(
            task_dir=self.task_host,
            binds=binds,
            network=self.network,
            task_entries=sandbox.task_entries(self.task_host, tests=False, solution=self.include_solution),
        )
        return self.box.argv(view, argv, setenv=dict(setenv))

    def dirs_env(self) -> dict[str, str]:
        home, tmp = self._home("agent")
        return {"HOME": sandbox.HOME, "TMPDIR": sandbox.TMP} if self.box else {"HOME": str(home), "TMPDIR": str(tmp)}

    def stop_all(self) -> None:
        for pid in list(self.pids):
            kill_tree(pid, self.cg)
            kill_tree(pid, None)

    # -- helpers ------------------------------------------------------------------------------------
    def _home(self, role: Role) -> tuple[Path, Path]:
        if role not in self._homes:
            self._homes[role] = (
                make_dir(self.workdir / role / "home", self.owner, 0o700),
                make_dir(self.workdir / role / "tmp", self.owner, 0o700),
            )
            make_dir(self.workdir / role / "shm", self.owner, 0o700)
        return self._homes[role]

    def _mount_of(self, path: str) -> Path | None:
        """The host folder bound at exactly ``path`` (the work dir, the agent's logs, a put folder), if any."""
        return {self.paths["app"]: self.app, self.paths["agent_logs"]: self.agent_logs, **self.verifier_puts}.get(path)

    def _host(self, path: str) -> Path | None:
        """The host path of an environment path under the work dir, the agent's logs or a put folder."""
        p = Path(path)
        mounts = {
            self.paths["app"]: self.app,
            self.paths["agent_logs"]: self.agent_logs,
            **{k: v for k, v in self.verifier_puts.items()},
        }
        for inside, host in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if p == Path(inside) or Path(inside) in p.parents:
                return host / p.relative_to(inside)
        return None


def _under(path: str, parent: str) -> bool:
    return path.startswith(parent.rstrip("/") + "/")
