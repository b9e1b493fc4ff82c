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

It runs in headroom's working directory (a relative path in the command means what it
means where ``headroom sweep`` was started), in a session of its own that ends with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.agents.exec import COMMAND_VAR, SOCKET_VAR
from orchestrator.agents.exec.server import ExecServer
from orchestrator.agents.exec.target import ExecTarget, StepExec, StepExecTarget
from orchestrator.backends.local.process import Limits, run_step
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.launch import Launch

#: Host variables an agent process needs to behave like itself (its tools find their config under HOME).
HOST_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "USER", "LOGNAME", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR")
#: Variables of the model gateway: the agent's, never the environment's.
GATEWAY_PREFIXES = ("HEADROOM_MODEL_", "OPENAI_", "ANTHROPIC_")


@dataclass
class ExternalRun:
    agent: StepFacts
    exec_log: bytes
    execs: int


def environment_env(launch: Launch) -> dict[str, str]:
    """What a command exec'd in the environment sees of the agent's variables: the contract and the task's own,
    never the gateway's key or the agent's secrets."""
    return {k: v for k, v in launch.agent.env.items() if not k.startswith(GATEWAY_PREFIXES)}


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
) -> ExternalRun:
    """Serve ``target`` on the try's exec channel and run the agent's command on the host until it ends or times out.

    ``host_dir``: a private directory of the try for the agent's stdout, stderr and instruction copy.
    """
    instruction = host_dir / "instruction.md"
    instruction.write_text(launch.agent.env.get("HEADROOM_INSTRUCTION", ""))
    secrets = {k: os.environ[k] for k in launch.agent.secret_env if k in os.environ}
    assert launch.agent.shell is not None, "an external agent is a command"
    with ExecServer(target, default_cwd=workdir_inside, base_env=exec_env, max_timeout_s=launch.agent.timeout_s) as srv:
        env = {
            **{k: os.environ[k] for k in HOST_ENV if k in os.environ},
            **launch.agent.env,
            **secrets,
            COMMAND_VAR: srv.command_path,
            SOCKET_VAR: srv.socket_path,
            "HEADROOM_LOGS_DIR": str(logs_dir),
            "HEADROOM_AGENT_RESULT": str(logs_dir / "result.json"),
            "HEADROOM_INSTRUCTION_FILE": str(instruction),
            "HEADROOM_WORKDIR": workdir_inside,
            "HEADROOM_TASK_DIR": task_dir_inside,
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        facts, _usage = run_step(
            "agent",
            ["bash", "-c", launch.agent.shell],
            env=env,
            cwd=Path.cwd(),
            logs_dir=host_dir,
            timeout_s=launch.agent.timeout_s,
            cgroup=None,
            limits=Limits(memory_bytes=None),
            on_spawn=on_spawn,
        )
        srv.close()  # nothing the agent left behind acts on the environment after its phase
        return ExternalRun(facts, srv.log_bytes(), srv.count)


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
