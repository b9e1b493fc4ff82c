"""What one try runs: the engine decides it, every backend carries it out.

A backend never reads the Experiment. It gets a :class:`Launch`: the two steps
(agent, verifier) with their commands, environment and timeouts, the names of
the host variables that are secrets, the request and limit amounts, and where
the task's files come from. Paths inside the trial (work dir, logs dir, where
the tests appear) are the backend's to choose, and it adds them to the
environment under the names of the contract (``HEADROOM_WORKDIR``,
``HEADROOM_LOGS_DIR``, ...), see :mod:`orchestrator.launch`.
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
    def _one_command(self) -> "StepLaunch":
        if (self.script is None) == (self.shell is None):
            raise ValueError("a step runs either a script of the task or a shell command")
        return self


class TaskSource(BaseModel):
    """Where a try finds the task's files; container backends also get the image."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    path: str = Field(description="the task directory on the orchestrator's machine")
    digest: str = Field(description="content digest: what a cluster bundle of the files is keyed by")
    docker_image: str | None = None
    include_solution: bool = Field(description="the solution is delivered to the oracle only")


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
    agent_kind: Literal["oracle", "command"]
    task: TaskSource
    agent: StepLaunch
    verifier: StepLaunch | None = Field(
        description="None: a golden task without tests/; the verifier step is skipped and the grader decides")
    amounts: ResourceAmounts
    request_storage_bytes: int
    limit_storage_bytes: int | None
    allow_internet: bool
    gpus: int = 0
    labels: dict[str, str] = Field(description="run, task, configuration, attempt, try: for selectors and humans")
    spec_digest: str = Field(description="sha256 of the experiment spec this try belongs to")
    placement: Literal["default", "limit-aware"] = Field(
        default="default", description="the experiment's placement: a cluster backend schedules a limit-aware try "
        "by its memory limit (an extended resource), the engine caps the local host")
