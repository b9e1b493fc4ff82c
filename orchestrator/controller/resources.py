"""The custom resources' shapes, as pydantic models: the CRD schemas are generated from these.

* Experiment ``spec`` is the experiment file itself (:class:`ExperimentResourceSpec`, the
  engine's :class:`~orchestrator.spec.experiment.Experiment` plus where the tasks come from),
  so the same YAML runs locally and in a cluster. Its field names are therefore the
  engine's (snake_case).
* Experiment ``status`` and both halves of Trial follow Kubernetes conventions (camelCase).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from orchestrator.agents.pods import pod_agent_problem
from orchestrator.spec.experiment import AgentSpec, Experiment

GROUP = "headroom.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
EXPERIMENT_PLURAL = "experiments"
TRIAL_PLURAL = "trials"

# Labels the controller puts on what it creates (selectors and the metrics rely on them).
LABEL_EXPERIMENT = f"{GROUP}/experiment"
LABEL_RUN = f"{GROUP}/run"
LABEL_TASK = f"{GROUP}/task"
LABEL_CONFIGURATION = f"{GROUP}/configuration"
LABEL_FINAL = f"{GROUP}/final"
LABEL_TASK_BUNDLE = f"{GROUP}/task-bundle"
LABEL_TASK_SET = f"{GROUP}/task-set"
ANNOTATION_TRIAL_ID = f"{GROUP}/trial-id"

#: Evidence kept on a Trial is cut to this many bytes of JSON: an API object must stay small
#: (etcd's limit is about 1.5 MB per object, and 10,000 Trials are listed at once).
EVIDENCE_LIMIT_BYTES = 8192


class TaskSource(BaseModel):
    """Where trial pods get the task files: exactly one of a pushed bundle or a task-set image. Never a host path."""

    model_config = ConfigDict(extra="forbid")

    bundle: str | None = Field(
        default=None,
        description="name of the task-set ConfigMap written by `headroom tasks push DIR` (content-addressed)",
        min_length=1,
        max_length=253,
    )
    image: str | None = Field(
        default=None,
        description="a task-set image built by `headroom tasks image DIR` (/headroom-tasks/catalog.json and one "
        "folder per task); pin it by digest or use an immutable tag: its catalog is read once and cached",
        min_length=1,
        max_length=1024,
        pattern=r"^\S+$",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> TaskSource:
        if (self.bundle is None) == (self.image is None):
            raise ValueError("give exactly one of bundle (a pushed ConfigMap task set) or image (a task-set image)")
        return self

    @property
    def key(self) -> str:
        return f"image:{self.image}" if self.image else f"bundle:{self.bundle}"


class ExperimentResourceSpec(Experiment):
    """An Experiment resource's spec: the experiment file, with the tasks named by source."""

    # A host path means nothing inside a cluster: left out of the CRD schema (the API server
    # prunes it) and filled in by the controller with where it unpacked the task set.
    tasks_dir: SkipJsonSchema[str] = ""
    task_source: TaskSource
    backend: Literal["kubernetes"] = Field(default="kubernetes", description="a cluster runs trials as pods")

    @field_validator("agent")
    @classmethod
    def _agent_runs_in_the_cluster(cls, agent: AgentSpec) -> AgentSpec:
        # Refused here, so `headroom cluster submit` says it in one line and the controller marks the
        # Experiment SpecInvalid (terminal, one Warning event) instead of retrying it.
        problem = pod_agent_problem(agent.kind, agent.path, in_cluster=True)
        if problem:
            raise ValueError(problem)
        return agent

    @field_validator("gateway")
    @classmethod
    def _no_gateway_in_the_cluster(cls, gateway: Any) -> Any:
        # The gateway listens on the loopback of the process that runs the engine; the controller
        # starts none, so a trial pod's calls would go nowhere and be recorded as model failures.
        if gateway is not None:
            raise ValueError(
                "the in-cluster controller runs no model gateway: its trial pods could not reach "
                "one; run the sweep from the CLI (`headroom sweep --backend kubernetes`) to measure "
                "usage, or drop `gateway`"
            )
        return gateway

    @field_serializer("task_source")
    def _only_the_source_given(self, source: TaskSource) -> dict[str, str]:
        # {"bundle": name} as before the image source existed: same resources, same experiment digests.
        return source.model_dump(exclude_none=True)


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class ConfigurationRef(_Camel):
    label: str
    request_multiplier: float
    limit_multiplier: float | None = Field(default=None, description="absent = unbounded")


class TrialSpec(_Camel):
    """One try of one planned trial. Immutable once created."""

    experiment: str = Field(description="the owning Experiment's name")
    run_id: str
    trial_id: str = Field(description="the engine's trial id: task:configuration:attempt")
    task: str
    task_digest: str
    configuration: ConfigurationRef
    attempt: int = Field(ge=0)
    try_: int = Field(ge=0, alias="try", description="0 for the first try; retries of infra errors count up")
    retry_of: str | None = Field(default=None, description="the Trial this one retries")
    seed: int
    order: int = Field(ge=0, description="position in the block-randomized plan")


class TrialTimings(_Camel):
    """When each phase began, and how long the agent and verifier steps took."""

    queued: str | None = Field(default=None, description="Trial created (RFC 3339)")
    scheduled: str | None = Field(default=None, description="pod bound to a node")
    started: str | None = Field(default=None, description="containers started")
    finished: str | None = Field(default=None, description="result harvested")
    agent_seconds: float | None = None
    verifier_seconds: float | None = None


class TrialStatus(_Camel):
    phase: Literal["Pending", "Running", "Finished", "Abandoned"] = Field(
        default="Pending", description="Abandoned: its pod vanished while no controller ran; never counted, run again"
    )
    # Every orchestrator.spec.outcome.Outcome (tests/controller checks the two stay equal).
    outcome: Literal["passed", "failed", "timeout", "infra_error", "harness_error", "abstained"] | None = None
    reason: str | None = None
    final: bool | None = Field(default=None, description="this try is the trial's result (false: it was retried)")
    reward: float | None = None
    message: str | None = None
    pod: str | None = None
    node: str | None = None
    qos_class: str | None = None
    enforcement: str | None = None
    request_cpus: float | None = None
    request_memory_bytes: int | None = None
    limit_cpus: float | None = None
    limit_memory_bytes: int | None = None
    peak_memory_bytes: int | None = None
    oom_kills: int | None = None
    duration_seconds: float | None = None
    timings: TrialTimings = Field(default_factory=TrialTimings)
    evidence: dict[str, Any] | None = Field(
        default=None, description=f"the backend's raw facts, redacted and cut to {EVIDENCE_LIMIT_BYTES} bytes"
    )
    evidence_truncated: bool | None = None
    handle: dict[str, Any] | None = Field(
        default=None, description="the backend's handle of the submitted pod, so a restarted controller adopts it"
    )


class Interval(_Camel):
    """k of n, with a Wilson 95% interval (absent while n is 0)."""

    k: int
    n: int
    estimate: float | None = None
    low: float | None = None
    high: float | None = None


class ConfigurationStatus(_Camel):
    configuration: str
    planned: int
    finished: int
    in_flight: int
    passed: int
    failed: int
    timeout: int
    infra_error: int
    harness_error: int
    abstained: int = Field(default=0, description='honest "cannot answer" a golden grader allows: not a pass')
    retried: int
    pass_rate: Interval
    infra_error_rate: Interval
    abstention_rate: Interval = Field(default_factory=lambda: Interval(k=0, n=0))


class Condition(_Camel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: str
    observed_generation: int | None = None


class ExperimentStatus(_Camel):
    observed_generation: int | None = None
    phase: Literal["Pending", "Running", "Complete", "Failed"] = "Pending"
    run_id: str | None = None
    planned: int = 0
    finished: int = 0
    in_flight: int = 0
    tries: int = 0
    progress: str = Field(default="", description="finished/planned, for kubectl get")
    infra_errors: str = Field(default="", description="infra-error rate per configuration, for kubectl get")
    started_at: str | None = None
    completed_at: str | None = None
    task_digests: dict[str, str] = Field(default_factory=dict)
    cluster: dict[str, Any] | None = Field(
        default=None,
        description="cluster provenance recorded when the run started: server version, nodes "
        "(when the chart's nodeProvenance is on), quotas, limit ranges, the backend's abilities (orchestrator/spec/backend.py)",
    )
    configurations: list[ConfigurationStatus] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
