"""The files of a Harbor job folder, as headroom writes them: Harbor 0.25's shapes, headroom's own models.

Harbor is never imported (it needs Python >= 3.12; headroom runs on 3.11). These models hold
only the fields headroom fills; every other field of Harbor's models has a default there.
tests/export/test_harbor_export.py loads each written file with the pinned Harbor's own models
(``scripts/harbor/install.sh``), so a shape that drifts from Harbor's fails there.

Names follow Harbor's, so a reader of both sees the same keys: ``JobResult``, ``JobStats``,
``TrialResult``, ``TrialConfig``, ``JobConfig``, ``JobLock``, ``TrialLock``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimingInfo(_Model):
    started_at: str | None = None
    finished_at: str | None = None


class ExceptionInfo(_Model):
    exception_type: str
    exception_message: str
    exception_traceback: str = ""  # headroom's verdicts are not Python exceptions: there is no traceback
    occurred_at: str


class ModelInfo(_Model):
    name: str
    provider: str | None = None


class AgentInfo(_Model):
    name: str
    version: str
    model_info: ModelInfo | None = None


class AgentContext(_Model):
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    metadata: dict[str, Any] | None = None


class VerifierResult(_Model):
    rewards: dict[str, float] | None = None


class LocalTaskId(_Model):
    path: str


class TaskConfig(_Model):
    path: str
    source: str | None = None


class AgentConfig(_Model):
    name: str
    model_name: str | None = None
    override_timeout_sec: float | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)


class EnvironmentConfig(_Model):
    """The environment a trial ran in: headroom's backend, named by ``import_path`` (no Harbor type fits)."""

    type: str | None = None
    import_path: str | None = None
    override_cpus: float | None = None
    override_memory_mb: int | None = None
    cpu_enforcement_policy: Literal["auto", "limit", "request", "guarantee", "ignore"] = "auto"
    memory_enforcement_policy: Literal["auto", "limit", "request", "guarantee", "ignore"] = "auto"


class VerifierConfig(_Model):
    disable: bool = False


class TrialConfig(_Model):
    task: TaskConfig
    trial_name: str
    trials_dir: str
    timeout_multiplier: float = 1.0
    agent: AgentConfig
    environment: EnvironmentConfig
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    job_id: str | None = None


class TrialResult(_Model):
    id: str
    task_name: str
    trial_name: str
    trial_uri: str
    task_id: LocalTaskId
    source: str | None = None
    task_checksum: str
    config: TrialConfig
    agent_info: AgentInfo
    agent_result: AgentContext | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: TimingInfo | None = None
    agent_setup: TimingInfo | None = None
    agent_execution: TimingInfo | None = None
    verifier: TimingInfo | None = None


class AgentDatasetStats(_Model):
    n_trials: int = 0
    n_errors: int = 0
    metrics: list[dict[str, float]] = Field(default_factory=list)
    pass_at_k: dict[int, float] = Field(default_factory=dict)
    reward_stats: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    exception_stats: dict[str, list[str]] = Field(default_factory=dict)


class JobStats(_Model):
    n_completed_trials: int = 0
    n_errored_trials: int = 0
    n_running_trials: int = 0
    n_pending_trials: int = 0
    n_cancelled_trials: int = 0
    n_retries: int = 0
    evals: dict[str, AgentDatasetStats] = Field(default_factory=dict)
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class JobResult(_Model):
    id: str
    started_at: str
    updated_at: str | None = None
    finished_at: str | None = None
    n_total_trials: int
    stats: JobStats


class RetryConfig(_Model):
    max_retries: int = 0


class JobConfig(_Model):
    job_name: str
    jobs_dir: str
    n_attempts: int = 1
    timeout_multiplier: float = 1.0
    n_concurrent_trials: int = 1
    retry: RetryConfig = Field(default_factory=RetryConfig)
    agents: list[AgentConfig]
    tasks: list[TaskConfig]


class HarborLockInfo(_Model):
    """Which Harbor wrote the job: none did, so every field stays empty (``exported_by`` says who did)."""

    version: str | None = None
    git_commit_hash: str | None = None


class TaskLock(_Model):
    name: str
    type: Literal["local"] = "local"
    digest: str  # sha256:<64 hex>
    path: str | None = None


class TrialLock(_Model):
    schema_version: int = 2
    task: TaskLock
    timeout_multiplier: float = 1.0
    agent: AgentConfig
    environment: EnvironmentConfig
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)


class ExportedBy(_Model):
    """An extra key Harbor's loaders ignore: which headroom run this folder was written from."""

    tool: Literal["headroom"] = "headroom"
    version: str
    run_id: str
    run_name: str


class JobLock(_Model):
    schema_version: int = 3
    created_at: str
    harbor: HarborLockInfo = Field(default_factory=HarborLockInfo)
    n_concurrent_trials: int = 1
    retry: RetryConfig = Field(default_factory=RetryConfig)
    trials: list[TrialLock] = Field(default_factory=list)
    exported_by: ExportedBy
