"""An external agent: a process on the host, with the host's network, acting on the trial only through the exec channel.

The backend provides the trial's environment as an
:class:`~orchestrator.agents.exec.target.ExecTarget`; this module serves it on the
try's exec channel (:mod:`orchestrator.agents.exec.server`), runs the agent's
command on the host with a hard timeout, and gives back the agent's step facts and
the exec log. What the agent gets besides the contract's variables:

* ``HEADROOM_EXEC`` (a command: ``$HEADROOM_EXEC -- ls /app``) and
  ``HEADROOM_EXEC_SOCKET`` (for :func:`orchestrator.agents.exec.run`);
* ``HEADROOM_LOGS_DIR`` and ``HEADROOM_AGENT_RESULT``: host paths of the try's agent
  logs dir (the environment sees the same dir as its own logs dir), kept as the try's
  ``logs/…`` artifacts;
* ``HEADROOM_INSTRUCTION_FILE``: a host copy of the instruction;
* ``HEADROOM_WORKDIR`` and ``HEADROOM_TASK_DIR``: paths *inside* the environment, for
  the commands it execs.

It runs in a sandbox of its own (:mod:`orchestrator.agents.host_sandbox`): in it the paths above are the
sandbox's (``HEADROOM_LOGS_DIR`` is ``/logs/agent``, the channel is under ``/run/headroom``), its working
directory is ``agent.path`` (else its private ``HOME``), and nothing of the host it was not given is there.
Only an agent declared trusted (``agent.trusted``) runs without it, where it cannot start: then as before,
on the host as headroom's user, in headroom's working directory, in a session of its own that ends with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.agents import host_bounds, host_logs, relay
from orchestrator.agents import host_sandbox as hb
from orchestrator.agents.exec import COMMAND_VAR, SOCKET_VAR
from orchestrator.agents.exec.server import ExecServer
from orchestrator.agents.exec.target import ExecTarget, StepExec, StepExecTarget
from orchestrator.contract import paths as cc
from orchestrator.errors import SandboxUnavailable
from orchestrator.isolation import hostenv
from orchestrator.isolation.process import Limits, kill_tree, run_step
from orchestrator.isolation.removal import remove_tree
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.launch import HostAgent, Launch

#: Host variables an agent process needs to behave like itself (its tools find their config under HOME).
HOST_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "USER", "LOGNAME", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR")
#: Variables of the model gateway: the agent's, never the environment's.
GATEWAY_PREFIXES = ("HEADROOM_MODEL_", "OPENAI_", "ANTHROPIC_")


@dataclass
class ExternalRun:
    agent: StepFacts
    exec_log: bytes
    execs: int


@dataclass(frozen=True)
class HostStep:
    """Which of the external agent's host steps a run is: the agent (``launch.agent``) or its install step
    (``launch.host_agent.setup``, the try's agent_setup phase). The step's output is ``<name>.stdout|stderr``."""

    name: str
    shell: str
    timeout_s: float


def agent_step(launch: Launch) -> HostStep:
    assert launch.agent.shell is not None, "an external agent is a command"
    return HostStep("agent", launch.agent.shell, launch.agent.timeout_s)


def tagged(exec_log: bytes, phase: str) -> bytes:
    """An exec log (the channel's own JSON lines) with each record marked as the ``phase``'s: the install step's
    commands are kept in the try's one exec log, told apart from the agent's."""
    out = []
    for line in exec_log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line + b"\n")
            continue
        if isinstance(record, dict):
            record["phase"] = phase
        out.append(json.dumps(record).encode() + b"\n")
    return b"".join(out)


def setup_step(launch: Launch) -> HostStep | None:
    """The external agent's install step, when it has one."""
    setup = launch.host_agent.setup if launch.host_agent is not None else None
    return HostStep("agent_setup", setup.shell, setup.timeout_s) if setup is not None else None


def environment_env(launch: Launch) -> dict[str, str]:
    """What a command exec'd in the environment sees of the agent's variables: the contract and the task's own,
    never the gateway's key or the agent's secrets."""
    return {k: v for k, v in launch.agent.env.items() if not k.startswith(GATEWAY_PREFIXES)}


def exec_paths(workdir: str, *, task_dir: str = cc.TASK_DIR, logs_dir: str = cc.AGENT_LOGS) -> dict[str, str]:
    """The contract's path variables of a command run through the exec channel: the agent step's, at the
    environment's own paths (``HEADROOM_WORKDIR``, ``HEADROOM_TASK_DIR``, ``HEADROOM_LOGS_DIR``...). Every
    backend's exec target gives them, so a command sees the same contract whichever backend runs it."""
    env = cc.step_paths("agent", workdir, task_dir)
    env["HEADROOM_LOGS_DIR"] = logs_dir
    env["HEADROOM_AGENT_RESULT"] = f"{logs_dir}/result.json"
    return env


def exec_env(
    launch: Launch, workdir: str, *, task_dir: str = cc.TASK_DIR, logs_dir: str = cc.AGENT_LOGS
) -> dict[str, str]:
    """Everything of the contract a command run through the exec channel sees: the agent's variables
    (:func:`environment_env`: never the gateway's key, never a secret) and the paths (:func:`exec_paths`)."""
    return {**environment_env(launch), **exec_paths(workdir, task_dir=task_dir, logs_dir=logs_dir)}


def run_external(
    launch: Launch,
    target: ExecTarget,
    *,
    host_dir: Path,
    logs_dir: Path,
    workdir_inside: str,
    task_dir_inside: str,
    exec_env: Mapping[str, str],
    on_spawn: Callable[[int], None] | None = None,
    step: HostStep | None = None,
) -> ExternalRun:
    """Serve ``target`` on the try's exec channel and run the agent's command (or ``step``: its install step), in
    its host sandbox, until it ends or times out. Each step gets a channel and a sandbox of its own; what the
    install step leaves is in the environment and the agent's logs dir.

    ``host_dir``: a private directory of the try for the agent's stdout, stderr, instruction copy and its
    sandbox's private work area.
    """
    step = step or agent_step(launch)
    instruction = host_dir / "instruction.md"
    instruction.write_text(launch.agent.env.get("HEADROOM_INSTRUCTION", ""))
    secrets = {k: os.environ[k] for k in launch.agent.secret_env if k in os.environ}
    host = launch.host_agent or HostAgent()
    try:
        box: hb.HostSandbox | None = hb.probe()
    except SandboxUnavailable as exc:
        if not host.trusted:  # the sweep refuses this before it starts; a try never runs it unsandboxed
            return ExternalRun(
                StepFacts(name=step.name, spawn_error=f"the external agent's sandbox cannot start here: {exc}"), b"", 0
            )
        box = None
    try:
        bounds = host_bounds.open_bounds(launch.name, host.limits, logs_dir, launch.limit_storage_bytes)
    except OSError as exc:
        return ExternalRun(
            StepFacts(name=step.name, spawn_error=f"the host agent's cgroup could not be made: {exc}"), b"", 0
        )
    spawned: list[int] = []

    def spawn(pid: int) -> None:
        spawned.append(pid)
        if on_spawn is not None:
            on_spawn(pid)

    def kill() -> None:  # the agent's session: what the cgroup holds is killed through it (host_bounds)
        for pid in spawned:
            kill_tree(pid, None)

    try:
        with ExecServer(target, default_cwd=workdir_inside, base_env=exec_env, max_timeout_s=step.timeout_s) as srv:
            contract = {
                **launch.agent.env,
                **secrets,
                "HEADROOM_WORKDIR": workdir_inside,
                "HEADROOM_TASK_DIR": task_dir_inside,
                "PYTHONDONTWRITEBYTECODE": "1",
            }
            # the task's env tables are in it: what would act in a host-side process (the wrapper, bwrap, setpriv)
            # reaches the agent's program only (hostenv); the host's secrets are never put in an argv
            untrusted, inside = hostenv.split({k: v for k, v in contract.items() if k not in secrets})
            contract = {**untrusted, **{k: v for k, v in contract.items() if k in secrets}}
            with _sandboxed(box, step.shell, launch, host, srv, host_dir, logs_dir, instruction, bounds, inside) as (
                argv,
                base,
                paths,
                cwd,
                handoff,
            ):
                if handoff is None:  # no sandbox, no tmpfs: the host logs dir is watched
                    bounds.watch(kill)
                facts, _usage = run_step(
                    step.name,
                    argv,
                    env={**base, **contract, **paths},
                    cwd=cwd,
                    logs_dir=host_dir,
                    timeout_s=step.timeout_s,
                    cgroup=bounds.cgroup,
                    # without a cgroup: RLIMIT_DATA here, RLIMIT_NPROC in the sandbox (the provenance says so)
                    limits=Limits(memory_bytes=None if bounds.cgroup else bounds.memory_bytes),
                    on_spawn=spawn,
                    pass_fds=(handoff[1].fileno(),) if handoff else (),
                )
                copied = _copy_logs(handoff[0], logs_dir, facts) if handoff else None
                bounds.settle(facts, copied)
            srv.close()  # nothing the agent left behind acts on the environment after its phase
            return ExternalRun(facts, srv.log_bytes(), srv.count)
    finally:
        bounds.close()  # every process still in the agent's cgroup is killed, and the cgroup removed


def _unsandboxed_paths(srv: ExecServer, logs_dir: Path, instruction: Path) -> dict[str, str]:
    return {
        COMMAND_VAR: srv.command_path,
        SOCKET_VAR: srv.socket_path,
        "HEADROOM_LOGS_DIR": str(logs_dir),
        "HEADROOM_AGENT_RESULT": str(logs_dir / "result.json"),
        "HEADROOM_INSTRUCTION_FILE": str(instruction),
    }


#: argv, the variables under the contract's, the paths over them, the directory the process starts in, and the
#: logs dir's hand-over socket pair (headroom's end, the sandbox's end; None without a sandbox)
Handoff = tuple[socket.socket, socket.socket]
Prepared = tuple[list[str], dict[str, str], dict[str, str], Path, Handoff | None]


def _copy_logs(ours: socket.socket, logs_dir: Path, facts: StepFacts) -> host_logs.Copied | None:
    """What the agent wrote to its tmpfs logs dir, copied into the try's host logs dir (the backend keeps it)."""
    got = host_logs.receive(ours)
    if got is None:
        if not facts.spawn_error and not facts.timed_out:  # the sandbox's first program never ran
            why = (facts.stderr_tail or "").strip().splitlines()[-1:] or [f"exit {facts.exit_code}"]
            facts.spawn_error = f"the host agent's sandbox did not start: {why[0][:300]}"
        return None
    try:
        return host_logs.copy_out(got, logs_dir)
    except OSError as exc:  # the host's side failed (its disk): the record says so; nothing of the agent's is read
        facts.termination_reason = f"its logs dir could not be copied out: {exc}"
        return None
    finally:
        os.close(got)


@contextlib.contextmanager
def _sandboxed(
    box: hb.HostSandbox | None,
    shell: str,
    launch: Launch,
    host: HostAgent,
    srv: ExecServer,
    host_dir: Path,
    logs_dir: Path,
    instruction: Path,
    bounds: host_bounds.Bounds,
    inside: Mapping[str, str],
) -> Iterator[Prepared]:
    """How the agent's process (``shell``: its command or its install step's) starts; its sandbox's work area (and
    gateway relay) end with it."""
    if box is None:  # trusted, and no sandbox here: as headroom's user, in headroom's working directory
        env = {k: os.environ[k] for k in HOST_ENV if k in os.environ}
        paths = _unsandboxed_paths(srv, logs_dir, instruction)
        argv = [*hostenv.env_argv(inside), "bash", "-c", shell]
        yield argv, env, paths, Path(host.path) if host.path else Path.cwd(), None
        return
    area = Path(tempfile.mkdtemp(prefix="agent-sandbox-", dir=host_dir))
    try:
        with contextlib.ExitStack() as stack:
            # a datagram pair: the sandbox's first program sends its logs dir on one end, headroom reads the other
            pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            for end in pair:
                stack.callback(end.close)
            argv, base, paths, cwd = _prepare(
                box, shell, launch, host, srv, area, logs_dir, instruction, stack, bounds, pair[1], inside
            )
            yield argv, base, paths, cwd, pair
    finally:
        remove_tree(area)


#: where an earlier step's logs are seen (read-only) in the sandbox, for handoff.py to copy into the logs dir
CARRIED = f"{hb.RUN}/carried-logs"


def _carry_logs(logs_dir: Path, area: Path) -> Path | None:
    """A private copy of what the try's host logs dir holds before this step (None: nothing), made with the same
    copier that takes the logs out (links never followed, entries bounded): the sandbox sees the copy, not the dir."""
    try:
        src = os.open(logs_dir, host_logs.DIR_FLAGS)
        try:
            with os.scandir(src) as entries:
                if not any(entries):
                    return None
            carried = area / "carried-logs"
            carried.mkdir(mode=0o755)
            host_logs.copy_out(src, carried)
        finally:
            os.close(src)
    except OSError:  # nothing to carry is the first step's case too: the step starts with an empty logs dir
        return None
    return carried


def _prepare(
    box: hb.HostSandbox,
    shell: str,
    launch: Launch,
    host: HostAgent,
    srv: ExecServer,
    area: Path,
    logs_dir: Path,
    instruction: Path,
    stack: contextlib.ExitStack,
    bounds: host_bounds.Bounds,
    handoff: socket.socket,
    inside: Mapping[str, str],
) -> tuple[list[str], dict[str, str], dict[str, str], Path]:
    owner = box.owner
    if owner is not None:
        os.chown(srv.socket_path, *owner)
    lib, bin_ = area / "lib", area / "bin"
    lib.mkdir(mode=0o755)
    bin_.mkdir(mode=0o755)
    here = Path(__file__).parent
    shutil.copyfile(here / "exec" / "__init__.py", lib / "headroom_exec.py")
    shutil.copyfile(here / "exec" / "client.py", lib / "headroom_exec_cli.py")
    shutil.copyfile(here / "relay.py", lib / "headroom_relay.py")
    shutil.copyfile(here / "handoff.py", lib / "headroom_handoff.py")
    python = hb.interpreter()
    (bin_ / "headroom-exec").write_text(f'#!/bin/sh\nexec {python} -E -s -S {hb.LIB}/headroom_exec_cli.py "$@"\n')
    for f in (*lib.iterdir(), bin_ / "headroom-exec"):
        os.chmod(f, 0o755 if f.parent == bin_ else 0o644)
    os.chmod(area, 0o755)
    path_env = os.environ.get("PATH")
    own = hb.own_files(shell, host.path, host.host_paths, path_env)
    ro = [*own, *([] if hb.under(hb.interpreter_root(), [*hb.SYSTEM_DIRS, *own]) else [hb.interpreter_root()])]
    binds = [hb.Bind(p, p) for p in ro]
    binds += [
        hb.Bind(str(lib), hb.LIB),
        hb.Bind(str(bin_), f"{hb.RUN}/bin"),
        hb.Bind(srv.socket_path, hb.EXEC_SOCKET),
        hb.Bind(str(instruction), hb.INSTRUCTION),
    ]
    agent = ["bash", "-c", shell]
    gateway_port = urlsplit(launch.model_gateway).port if launch.model_gateway else None
    if not host.network and gateway_port:
        short = Path(tempfile.mkdtemp(prefix="headroom-gw-"))  # a unix socket's path is at most 107 bytes
        stack.callback(shutil.rmtree, short, True)
        sock = short / "gateway.sock"
        stack.enter_context(relay.UnixToTcp(str(sock), gateway_port, owner))
        binds.append(hb.Bind(str(sock), hb.GATEWAY_SOCKET))
        agent = [
            python,
            "-E",
            "-s",
            "-S",
            f"{hb.LIB}/headroom_relay.py",
            str(gateway_port),
            hb.GATEWAY_SOCKET,
            "--",
            *agent,
        ]
    # what an earlier host step of this try left in its logs dir (an installed agent's setup, its state for the run)
    # is carried into this step's fresh tmpfs logs dir, as one logs dir across the try's steps would hold it
    carried = _carry_logs(logs_dir, area)
    if carried is not None:
        binds.append(hb.Bind(str(carried), CARRIED))
    # first in the sandbox: the logs dir handed out, the process ceiling set where there is no cgroup (handoff.py)
    nproc = str(bounds.nproc) if bounds.nproc is not None else ""
    command = [python, "-E", "-s", "-S", f"{hb.LIB}/headroom_handoff.py", str(handoff.fileno()), hb.LOGS, nproc]
    command += [CARRIED if carried is not None else ""]
    command += ["--", *agent]
    # HOME, /tmp, /dev/shm and the logs dir: private, memory-backed (counted in the agent's cgroup) and of a
    # bounded size: a write past it fails with ENOSPC. The logs dir is copied out after the step (host_logs.py).
    private = [hb.Tmpfs(inside, bounds.tmpfs_bytes) for inside in (hb.HOME, hb.TMP, hb.SHM)]
    private.append(hb.Tmpfs(hb.LOGS, bounds.logs_bytes))
    view = hb.View(binds=binds, tmpfs=private, network=host.network, cwd=host.path or str(Path.cwd()))
    paths = {
        COMMAND_VAR: hb.EXEC_COMMAND,
        SOCKET_VAR: hb.EXEC_SOCKET,
        "HEADROOM_LOGS_DIR": hb.LOGS,
        "HEADROOM_AGENT_RESULT": f"{hb.LOGS}/result.json",
        "HEADROOM_INSTRUCTION_FILE": hb.INSTRUCTION,
    }
    return box.argv(view, command, setenv=inside), hb.sandbox_env(os.environ), paths, area


def contract_agent(
    launch: Launch,
    *,
    host_dir: Path,
    logs_dir: Path,
    workdir_inside: str,
    task_dir_inside: str,
    on_exec_log: Callable[[bytes], None],
    on_spawn: Callable[[int], None] | None = None,
) -> Callable[[StepExec], StepFacts]:
    """The external agent as the trial contract's host-side agent phase (``Plan.agent``): given the contract's
    exec, it serves it on the try's exec channel and runs the agent; the exec log goes to ``on_exec_log``."""

    def agent(exec_: StepExec) -> StepFacts:
        run = run_external(
            launch,
            StepExecTarget(exec_),
            host_dir=host_dir,
            logs_dir=logs_dir,
            workdir_inside=workdir_inside,
            task_dir_inside=task_dir_inside,
            exec_env={},
            on_spawn=on_spawn,
        )
        on_exec_log(run.exec_log)
        return run.agent

    return agent
