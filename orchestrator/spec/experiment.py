"""The experiment: which tasks, which resource configurations, how many attempts, which agent.

Agent, model and sampling metadata are opaque to the engine: recorded in
provenance, never interpreted. Environment variables passed to the agent are
recorded by NAME only, so an API key never reaches the store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.outcome import TRIAL_CAUSED, InfraReason
from orchestrator.spec.resources import ResourceConfig

DEFAULT_MULTIPLIERS = ("1", "1.5", "2", "3", "unbounded")
BACKENDS = ("local", "kubernetes", "docker")


class AgentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["oracle", "command"] = "oracle"
    command: str | None = Field(default=None, description="shell command for kind=command")
    env_passthrough: list[str] = Field(
        default_factory=list,
        description="names of host environment variables handed to the agent (values are never recorded)",
    )

    @model_validator(mode="before")
    @classmethod
    def _command_implies_kind(cls, data: Any) -> Any:
        # {command: ...} alone means the user's agent, never the oracle.
        if isinstance(data, dict) and data.get("command") and "kind" not in data:
            return {**data, "kind": "command"}
        return data

    @model_validator(mode="after")
    def _command_needs_command(self) -> "AgentSpec":
        if self.kind == "command" and not (self.command and self.command.strip()):
            raise ValueError("agent kind 'command' needs a command")
        if self.kind == "oracle" and self.command:
            raise ValueError("the oracle agent runs the task's solution and takes no command; use kind 'command'")
        return self


class ModelSpec(BaseModel):
    """Who is being evaluated. Opaque to the engine; recorded with every run."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)


class RetryPolicy(BaseModel):
    """Bounded retries of infrastructure errors. Every try stays on record."""

    model_config = ConfigDict(extra="forbid")

    max_retries: int = Field(default=0, ge=0, le=10)
    reasons: list[InfraReason] = Field(
        default_factory=lambda: [r for r in InfraReason if r not in TRIAL_CAUSED],
        description="infra reasons worth retrying; by default none a trial's own processes can cause (OOM kills, "
                    "the storage limit): those are the measurement, and retrying them "
                    "would let an agent re-roll a try it is failing",
    )


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "sweep"
    tasks_dir: str
    tasks: list[str] | None = Field(default=None, description="task ids or glob patterns; None = all")
    configurations: list[ResourceConfig] = Field(
        default_factory=lambda: [ResourceConfig.parse(m) for m in DEFAULT_MULTIPLIERS], min_length=1
    )
    attempts: int = Field(default=3, ge=1, le=10_000)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    concurrency: int = Field(default=2, ge=1, le=256)
    seed: int = 0
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout_multiplier: float = Field(default=1.0, gt=0)
    reward_threshold: float = Field(default=1.0, allow_inf_nan=False, description="reward at or above this passes")
    backend: Literal["local", "kubernetes", "docker"] = Field(default="local", description="where trials run")
    image: str | None = Field(default=None, description="container backends: image for every task, instead of each task's docker_image")
    allow_internet: bool = Field(
        default=False, description="give trials network access (a task with allow_internet = false still gets none)"
    )
    kubernetes: KubernetesOptions | None = Field(default=None, description="backend kubernetes: namespace, queue, ...")
    placement: Literal["default", "limit-aware"] = Field(
        default="default",
        description="limit-aware: the memory limits of concurrently running trials never add up to more than the "
        "machine has (local backend: a cap in the engine; kubernetes: per node, through the extended resource "
        "headroom.dev/memory-limit-mib that `headroom nodes advertise` puts on nodes); default: only --concurrency "
        "and the scheduler's requests bound them",
    )
    docker: DockerOptions | None = Field(default=None, description="options of the docker backend")

    @field_validator("configurations", mode="before")
    @classmethod
    def _parse_labels(cls, value: Any) -> Any:
        if isinstance(value, list):  # YAML gives [1, 3, unbounded] as ints and strings
            return [ResourceConfig.parse(str(v)) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else v
                    for v in value]
        return value

    @model_validator(mode="after")
    def _unique_configurations(self) -> "Experiment":
        labels = [c.label for c in self.configurations]
        dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
        if dupes:
            raise ValueError(f"configuration listed twice: {', '.join(dupes)}")
        return self
