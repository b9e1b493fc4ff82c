"""The task spec: Harbor / Terminal-Bench 2 ``task.toml`` field names, plus provenance.

A task directory holds ``task.toml``, ``instruction.md``, ``tests/test.sh`` (the
verifier: writes a reward to ``reward.txt`` or ``reward.json`` under the logs
dir the orchestrator provides) and ``solution/solve.sh`` (the oracle).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EnvironmentSpec(BaseModel):
    """Base resources. The request and the limit are derived from these by a ResourceConfig."""

    model_config = ConfigDict(extra="allow")

    cpus: float = Field(gt=0, description="CPU cores the task is specified to need")
    memory_mb: int = Field(gt=0, description="memory the task is specified to need, MiB")
    storage_mb: int = Field(default=10240, gt=0, description="ephemeral storage, MiB")
    docker_image: str | None = Field(default=None, description="image for container backends")
    build_timeout_sec: float | None = None


class StepSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    timeout_sec: float = Field(gt=0)


class ProvenanceSpec(BaseModel):
    """Where a task came from; the registry fields the contamination checks rely on."""

    model_config = ConfigDict(extra="forbid")

    item_id: str | None = None
    source: str | None = None
    source_url_or_ticket: str | None = None
    created_at: str | None = None
    author_or_owner: str | None = None
    license_or_access: str | None = None
    transformation: str | None = None
    cluster_id: str | None = None
    answer_owner: str | None = None
    release_status: str | None = None


class TaskSpec(BaseModel):
    """The parsed ``task.toml``."""

    model_config = ConfigDict(extra="allow")

    version: str = "1.0"
    environment: EnvironmentSpec
    agent: StepSpec
    verifier: StepSpec
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: ProvenanceSpec = Field(default_factory=ProvenanceSpec)


class Task(BaseModel):
    """A loaded task: its id (the directory name), location, spec and content digest."""

    model_config = ConfigDict(frozen=True)

    id: str
    path: str
    spec: TaskSpec
    instruction: str
    digest: str = Field(description="sha256 over every file of the task directory")

    @property
    def cluster_id(self) -> str:
        return self.spec.provenance.cluster_id or self.id
