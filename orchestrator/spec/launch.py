"""What one try runs: the engine decides it, every backend carries it out.

A backend never reads the Experiment. It gets a :class:`Launch`: the two steps
(agent, verifier) with their commands, environment and timeouts, the names of
the host variables that are secrets, the request and limit amounts, and where
the task's files come from. Paths inside the trial (work dir, logs dir, where
the tests appear) are the backend's to choose, and it adds them to the
environment under the names of the contract (``HEADROOM_WORKDIR``,
``HEADROOM_LOGS_DIR``, ...), see :mod:`orchestrator.engine.launch`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.spec.resources import ResourceAmounts


class StepLaunch(BaseModel):
    """One step of a try: exactly one of ``script`` (a file of the task) or ``shell`` (a command)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Literal["agent", "verifier"]
    script: str | None = Field(default=None, description="path relative to the task directory, run with bash")
    shell: str | None = Field(default=None, description="shell command, run with bash -c")
    env: dict[str, str] = Field(default_factory=dict, description="variables of the contract and the task's env tables")
    secret_env: list[str] = Field(
        default_factory=list, description="NAMES of host variables handed to this step; values never leave the host"
    )
    timeout_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _one_command(self) -> StepLaunch:
        if (self.script is None) == (self.shell is None):
            raise ValueError("a step runs either a script of the task or a shell command")
        return self


class SetupLaunch(StepLaunch):
    """The optional agent install phase of a try (orchestrator/contract/phases.py): it runs before the agent,
    in the agent's environment, with its own timeout and network setting; a failure is
    ``infra_error(agent_setup_failed)``."""

    name: Literal["agent_setup"] = "agent_setup"  # type: ignore[assignment]
    network: bool = Field(
        default=False,
        description="network for the install (a package index), where the "
        "backend can give it to this phase alone (local); else the try's setting",
    )


class TaskSource(BaseModel):
    """Where a try finds the task's files; container backends also get the image."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    path: str = Field(description="the task directory on the orchestrator's machine")
    digest: str = Field(description="content digest: what a cluster bundle of the files is keyed by")
    docker_image: str | None = None
    include_solution: bool = Field(description="the solution is delivered to the oracle only")
    architecture: str | None = Field(
        default=None,
        description="the CPU architecture the task's files declare (FROM --platform, a compose platform); a cluster "
        "places the try on a node of it",
    )


class HostLimits(BaseModel):
    """The bounds of an external agent's own process tree on the host (orchestrator/agents/host_bounds.py): what a
    fork bomb, a memory hog or a disk filler of the agent can take from the host before it ends its own try."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_mb: int = Field(
        default=4096,
        gt=0,
        description="memory of the agent's processes and of its private HOME, /tmp, /dev/shm and logs dir",
    )
    pids: int = Field(
        default=1024,
        ge=16,
        description="processes and threads the agent may hold at once (without a cgroup: RLIMIT_NPROC, a per-uid count)",
    )
    disk_mb: int = Field(
        default=1024,
        gt=0,
        description="size of each of its private HOME, /tmp, /dev/shm and logs dir (tmpfs mounts: a write past it "
        "fails with ENOSPC; memory-backed, so counted in memory_mb too)",
    )


class HostSetup(BaseModel):
    """An external agent's own install step (a Harbor installed agent's ``setup``): a command run on the host in
    the agent's sandbox, acting on the environment through its exec channel, before the agent. It is the try's
    ``agent_setup`` phase: its own timeout, its time recorded apart, a failure ``infra_error(agent_setup_failed)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shell: str = Field(min_length=1, description="shell command, run with bash -c in the agent's host sandbox")
    timeout_s: float = Field(gt=0)


class HostAgent(BaseModel):
    """An external agent's view of the host (orchestrator/agents/host_sandbox.py): what its sandbox binds."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(default=None, description="the agent's directory: read-only at its host path, its cwd")
    host_paths: list[str] = Field(default_factory=list, description="more host paths the user named, read-only")
    network: bool = Field(default=False, description="the host's network; False: loopback and the gateway only")
    trusted: bool = Field(default=False, description="may run unsandboxed where the sandbox cannot start")
    limits: HostLimits = Field(default_factory=HostLimits, description="its own cgroup and private disk")
    setup: HostSetup | None = Field(default=None, description="its install step, the try's agent_setup phase")


class Launch(BaseModel):
    """Everything a backend needs to run one try, and nothing it may not see."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    trial_id: str
    try_index: int = Field(ge=0)
    name: str = Field(description="DNS-1123 name, deterministic in (run, trial, try): submit is idempotent on it")
    task_id: str
    config_label: str
    attempt: int
    seed: int
    agent_kind: Literal["oracle", "command", "external"]
    task: TaskSource
    agent: StepLaunch
    agent_setup: SetupLaunch | None = Field(default=None, description="the agent's install phase; None: none")
    verifier: StepLaunch | None = Field(
        description="None: a golden task without tests/; the verifier step is skipped and the grader decides"
    )
    amounts: ResourceAmounts
    request_storage_bytes: int
    limit_storage_bytes: int | None
    allow_internet: bool = Field(description="the trial environment's network (the verifier's, the exec channel's)")
    agent_network: bool | None = Field(
        default=None,
        description="the agent's own network; None: allow_internet. An external agent runs on the host "
        "(with its network) and acts on the environment only through the exec channel",
    )
    gpus: int = 0
    labels: dict[str, str] = Field(description="run, task, configuration, attempt, try: for selectors and humans")
    spec_digest: str = Field(description="sha256 of the experiment spec this try belongs to")
    model_gateway: str | None = Field(
        default=None,
        description="base URL of the model gateway this try's agent calls (its per-try key and the SDK "
        "variables are in agent.env, see docs/agents.md); None: no gateway. It listens on the host's 127.0.0.1: an "
        "agent on the host reaches it, one in a sandbox only through the host's network",
    )
    agent_dir: str | None = Field(default=None, description="an installed agent's host directory, seen at /agent")
    host_agent: HostAgent | None = Field(default=None, description="an external agent's sandbox on the host")
    placement: Literal["default", "limit-aware"] = Field(
        default="default",
        description="the experiment's placement: a cluster backend schedules a limit-aware try "
        "by its memory limit (an extended resource), the engine caps the local host",
    )


def agent_step_network(launch: Launch) -> bool:
    """Whether an agent that runs inside the environment (oracle, command) gets the network for its step."""
    return launch.allow_internet if launch.agent_network is None else launch.agent_network


def environment_network(launch: Launch) -> bool:
    """Whether the environment needs the network at any step (a container's network is chosen once, at creation)."""
    return (
        launch.allow_internet
        or (launch.agent_kind != "external" and agent_step_network(launch))
        or (launch.agent_setup is not None and launch.agent_setup.network)
    )
