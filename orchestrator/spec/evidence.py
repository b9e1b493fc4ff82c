"""The evidence a backend (and the engine) records about one try, beside the facts a verdict is made from.

``TrialFacts.extra`` is an :class:`Evidence`: one versioned schema that every backend fills in part.
It is made of one model per concern -- the trial contract's phases, the cgroup counters, the local
sandbox's disk, the Docker container, the Pod, placement, an external agent, what the engine adds
when a try settles, a Trial exported from the cluster -- and each nested value is a model of its own.

The field names are the JSON keys the evidence had as a dict, so stored evidence, the Trial
resource's ``status.evidence`` and the reports keep their shape: the concerns are mixins whose
fields sit at the top level, as they always did. A field appears in the JSON only when a writer set
it (to a value or to None), so a try's evidence holds what its backend saw and nothing else;
``schema_version`` is always written.

Every model refuses a key it does not declare: a writer cannot invent one, and a reader reads only
typed fields. The exceptions are the open-ended records of other systems, whose keys are not ours
to fix: kernel counter files (typed as integers, whatever their names) and raw Kubernetes objects
(the fields headroom reads are typed; the rest are kept as the API server gave them).

Versions: :data:`SCHEMA_VERSION`; bump it when a field is removed, renamed or changes meaning,
and say what the older version's rows become in :func:`_migrate`. Evidence stored before the
schema was typed has no ``schema_version`` (version 0); its keys are the same as version 1's. Stored
evidence of any version is read with :meth:`orchestrator.spec.facts.TrialFacts.from_stored` (or
:func:`read_stored`): a key this version has no field for (``link_scan``, written before the
sanitiser replaced the link scan) moves to :attr:`Evidence.legacy`, by its dotted path, so an old row
reads and a re-stored copy (a re-grade) loses nothing. ``legacy`` is filled only by reading stored
evidence, never by a writer. Evidence newer than this version is refused.

SQL readers of the stored JSON name their path with :func:`evidence_path`, which checks it against
these models, so renaming a field breaks at import, not in a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from orchestrator.spec.steps import StepFacts
from orchestrator.spec.stored import OnlySet, check_version, set_aside, submodels

SCHEMA_VERSION: Final = 1
#: The validation context key that marks stored evidence (see :func:`read_stored`).
STORED: Final = "headroom_stored_evidence"


class _Part(OnlySet):
    """Every evidence model: unknown keys refused, assignments validated, only what was set written."""


class _Counters(_Part):
    """A kernel counter file (``memory.events``, ``cpu.stat``, ...): the counters headroom reads are
    fields; any other line the kernel adds (newer kernels add some) is kept as an integer under its name."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, int] = Field(init=False)


class _Raw(_Part):
    """A raw Kubernetes object: the fields headroom reads are typed, the rest kept as the API server gave them."""

    model_config = ConfigDict(extra="allow")


# -- nested values -----------------------------------------------------------------------------------


class AgentSetup(_Part):
    """The agent's install phase (``agent_setup``)."""

    exit_code: int | None = None
    duration_s: float = 0.0
    timed_out: bool = False


class AgentCheck(_Part):
    """headroom's check, before the agent ran, that the agent command's program resolves."""

    status: str = Field(description="ok | not_found | unchecked")
    program: str | None = Field(default=None, description="the program word checked")
    detail: str | None = None


class SanitiserReport(_Part):
    """What the sanitiser did before the verifier (orchestrator/contract/sanitiser.py): its verdict and counts."""

    status: str = Field(description="ok | exhausted | incomplete | crashed")
    links_removed: int | None = None
    links_unjudged: int | None = None
    links_unremovable: int | None = None
    links_kept: int | None = None
    roots_replaced: int | None = None
    special_removed: int | None = None
    special_left: int | None = None
    unlistable: int | None = None
    roots_scanned: int | None = None
    judging_stopped: int | None = None
    detail: str | None = None
    resolve_bound: str | None = Field(default=None, description="how one link resolution was bounded")
    duration_s: float | None = None


class MemoryEvents(_Counters):
    """The memory cgroup's events: cgroup v2 ``memory.events``, or v1 ``memory.oom_control`` and ``failcnt``."""

    low: int | None = None
    high: int | None = None
    max: int | None = None
    oom: int | None = None
    oom_kill: int | None = None
    oom_group_kill: int | None = None
    oom_kill_disable: int | None = None
    under_oom: int | None = None
    failcnt: int | None = None


class CpuThrottling(_Counters):
    """The CPU quota's counters, in the spelling of whoever counted them: cgroup v2 ``cpu.stat``
    (``throttled_usec``), cgroup v1 ``cpu.stat`` (``throttled_time``, ns), or Docker's stats
    endpoint (``periods``, ``throttled_periods``, ``throttled_time``, ns)."""

    nr_periods: int | None = None
    nr_throttled: int | None = None
    throttled_usec: int | None = None
    throttled_time: int | None = None
    periods: int | None = None
    throttled_periods: int | None = None

    def read(self) -> tuple[float | None, float | None, float | None]:
        """(periods, throttled periods, throttled seconds), whatever the spelling; None where not counted."""
        periods = self.nr_periods if self.nr_periods is not None else self.periods
        throttled = self.nr_throttled if self.nr_throttled is not None else self.throttled_periods
        if self.throttled_usec is not None:
            seconds: float | None = self.throttled_usec / 1e6
        else:  # cgroup v1 and Docker count nanoseconds
            seconds = None if self.throttled_time is None else self.throttled_time / 1e9
        return (None if periods is None else float(periods), None if throttled is None else float(throttled), seconds)


class PidsEvents(_Counters):
    """``pids.events``: ``max`` counts forks refused at the process ceiling."""

    max: int | None = None


class ContainerImage(_Part):
    """The image a Docker try ran: what the tag resolved to, so a moved tag is visible."""

    ref: str
    id: str
    repo_digests: list[str] = Field(default_factory=list)
    built_here: bool = False


class ContainerState(_Part):
    """The container's last ``State`` as the Docker engine reported it (its own key names)."""

    OOMKilled: bool | None = None
    ExitCode: int | None = None
    Error: str | None = None


class PodCondition(_Raw):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class ContainerStatus(_Raw):
    name: str | None = None
    image: str | None = None
    imageID: str | None = None
    state: dict[str, Any] | None = None
    lastState: dict[str, Any] | None = None


class PodStatus(_Part):
    """The parts of the pod's ``status`` kept as evidence (signals.py chooses them)."""

    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    qosClass: str | None = None
    startTime: str | None = None
    conditions: list[PodCondition] | None = None
    initContainerStatuses: list[ContainerStatus] | None = None
    containerStatuses: list[ContainerStatus] | None = None


class PodEvent(_Part):
    """One of the pod's Events, trimmed to what a report shows."""

    type: str | None = None
    reason: str | None = None
    message: str | None = None
    count: int | None = None
    time: str | None = None


class PodImage(_Part):
    """What a container's image resolved to on the node."""

    image: str | None = None
    image_id: str | None = None


class RunnerEvidence(_Part):
    """The Pod runner's termination message, the keys kept as evidence (their values as the runner wrote them)."""

    workdir: str | None = None
    memcg: str | None = None
    ptrace_scope: str | None = None
    verifier_skipped: str | None = None
    detail: str | None = None
    agent_sweep_left: str | None = None
    verifier_sweep_left: str | None = None
    truncated: str | None = None
    agent_result_size: str | None = None
    verifier_only_links_removed: str | None = None
    sanitise: str | None = None
    sanitise_special_removed: str | None = None
    sanitise_special_left: str | None = None
    sanitise_unlistable: str | None = None
    sanitise_links_unremovable: str | None = None
    agent_external: str | None = None
    work_out: str | None = Field(default=None, description="the agent's work dir copied out of its container")
    work_in: str | None = Field(default=None, description="that copy put into the verifier's fresh container")
    duplicate_keys: list[str] | None = Field(default=None, description="keys the message named twice: forged")

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The runner's own keys this evidence keeps."""
        return tuple(k for k in cls.model_fields if k != "duplicate_keys")


class RecordsEvidence(_Part):
    """What became of a Pod try's full record (the runner's tar of the steps' output)."""

    status: str = Field(description="kept | not_kept | unreadable | mismatch | runner:<why>")
    bytes: int = 0
    verified: str = Field(default="none", description="sha256 | size | none")
    written_by: str = "agent (the runner archived it; never read for the verdict)"
    truncated: bool | None = None
    errors: list[str] | None = None


class ApiRefusal(_Part):
    """The API server's refusal of a pod: its own status, reason and words."""

    status: int | None = None
    reason: str | None = None
    message: str | None = None


class QueueHold(_Part):
    """Time a pod was held by a queue (Kueue's scheduling gate) before admission."""

    name: str | None = None
    gated: bool = False
    gated_s: float | None = None


class Overcommit(_Part):
    """What the try ran beside (orchestrator/engine/overcommit.py): the engine's record per host, a cluster
    backend's per node."""

    scope: str = Field(description="host | node")
    placement: str = Field(description="default | limit-aware")
    capacity_bytes: int | None = None
    concurrent_limit_bytes_max: int = 0
    ratio_max: float | None = None
    concurrent_tries_max: int = 0
    unbounded_in_flight: bool = False
    node: str | None = None
    node_memory_pressure: bool | None = None
    node_read_at: str | None = None
    limits_counted: str | None = None
    others_read_at: str | None = None
    other_pods: int | None = None
    other_limit_bytes: int | None = None
    other_pods_without_limit: int | None = None


class ExternalAgent(_Part):
    """An agent that ran on the host and acted in the try only through exec."""

    ran_on: str = "host"
    execs: int = 0
    problem: str | None = None
    runner_phase: StepFacts | None = Field(default=None, description="the Pod runner's own record of the phase")


class GradeRecord(_Part):
    """A golden task's grader on the agent's answer."""

    checks: dict[str, bool] = Field(default_factory=dict)
    abstained: bool = False
    notes: dict[str, str] | None = None


class AgentNotFound(_Part):
    """The agent's step ended as a shell reports a command not found: evidence, never a verdict."""

    exit_code: int | None = None
    evidence: str | None = None


class ArtifactCut(_Part):
    name: str
    kept: int
    original_size: int | None = None


class ArtifactsSummary(_Part):
    """The try's artifacts in brief: counts, what the cap cut, what failed."""

    count: int | None = None
    bytes: int | None = None
    max_bytes_per_try: int | None = None
    statuses: dict[str, int] | None = None
    cap_hit: list[ArtifactCut] | None = None
    errors: list[str] | None = None


# -- the concerns (their fields sit at the top level of the evidence) -----------------------------------


class ContractEvidence(_Part):
    """The trial contract's phases, the same keys on every backend (orchestrator/contract)."""

    agent_setup: AgentSetup | None = None
    agent_check: AgentCheck | None = None
    sanitiser: SanitiserReport | None = None
    verifier_only_links_removed: int | None = Field(
        default=None, description="agent-made links the verifier will not follow (removed, unjudged or replaced)"
    )
    handover_s: float | None = Field(default=None, description="Docker: from the agent's end to the sanitiser")


class CgroupEvidence(_Part):
    """The trial's cgroup counters (local: the trial cgroup; Docker: the container's; Pods: the runner's)."""

    cgroup: str | None = Field(default=None, description="Docker: the container cgroup's version, None unreadable")
    memory_events: MemoryEvents | None = None
    cpu_throttling: CpuThrottling | None = None
    pids_events: PidsEvents | None = None
    usage_source: str | None = Field(default=None, description="set when usage came from Docker's stats endpoint")


class StorageEvidence(_Part):
    """The local backend's disk watch of the try's work tree."""

    storage_peak_bytes: int | None = None
    storage_peak_inodes: int | None = None
    storage_inode_ceiling: int | None = None


class HostEvidence(_Part):
    """The local backend's sandbox."""

    isolation: str | None = Field(default=None, description="none | namespaces (the backend's capability)")
    workdir: str | None = Field(default=None, description="the work tree, when it was kept (--keep-workdirs)")


class ContainerEvidence(_Part):
    """The Docker backend's container."""

    image: ContainerImage | None = None
    container_state: ContainerState | None = None


class PodEvidence(_Part):
    """The Kubernetes backend's pod: its status, Events, runner report, log tail and record."""

    pod: str | None = None
    node: str | None = None
    namespace: str | None = None
    ran_in: str | None = None
    pod_status: PodStatus | None = None
    events: list[PodEvent] | None = None
    pod_events_total: int | None = None
    images: dict[str, PodImage] | None = None
    log_tail: str | None = Field(default=None, description="the task container's log, when the try did not pass")
    runner: RunnerEvidence | None = None
    runner_incomplete: str | None = Field(default=None, description="how the runner ended without a whole report")
    records: RecordsEvidence | None = None
    api_refusal: ApiRefusal | None = None


class PlacementEvidence(_Part):
    """Where the try ran and beside what: overcommit (engine or cluster backend) and a queue's hold."""

    overcommit: Overcommit | None = None
    queue: QueueHold | None = None


class ExternalAgentEvidence(_Part):
    external_agent: ExternalAgent | None = None


class EngineEvidence(_Part):
    """What the engine adds as a try settles (orchestrator/engine/settle.py, orchestrator/engine/services.py)."""

    artifacts: ArtifactsSummary | None = None
    grade: GradeRecord | None = None
    agent_not_found: AgentNotFound | None = None
    orchestrator_error: str | None = Field(default=None, description="the exception a try failed with inside headroom")
    storage_error: str | None = Field(default=None, description="why the store refused the try's evidence")


class ExportEvidence(_Part):
    """A try exported from a Trial resource whose evidence was cut to fit (controller/export.py)."""

    trial: str | None = None
    evidence: dict[str, Any] | None = Field(
        default=None, description="the Trial's evidence as cut: its largest values replaced by a marker, so raw"
    )
    evidence_truncated: bool | None = None


class Evidence(
    ContractEvidence,
    CgroupEvidence,
    StorageEvidence,
    HostEvidence,
    ContainerEvidence,
    PodEvidence,
    PlacementEvidence,
    ExternalAgentEvidence,
    EngineEvidence,
    ExportEvidence,
):
    """Everything besides the verdict's facts that a backend and the engine recorded about one try."""

    schema_version: Literal[1] = SCHEMA_VERSION
    legacy: dict[str, Any] = Field(
        default_factory=dict,
        description="read-only: keys of stored evidence this version has no field for "
        "(by dotted path), filled only when reading stored rows, never by a writer",
    )

    @model_validator(mode="before")
    @classmethod
    def _stored(cls, data: Any, info: ValidationInfo) -> Any:
        if not (info.context or {}).get(STORED) or not isinstance(data, Mapping):
            return data
        return _migrate(dict(data))


def read_stored(data: Mapping[str, Any]) -> Evidence:
    """Evidence as stored by any version of headroom up to this one (see the module's docstring)."""
    return Evidence.model_validate(data, context={STORED: True})


def _migrate(data: dict[str, Any]) -> dict[str, Any]:
    check_version("evidence", data, SCHEMA_VERSION)
    # Version 0 (untyped) used version 1's names; what no field holds is kept aside.
    legacy = dict(data.get("legacy") or {})
    set_aside(Evidence, data, "", legacy)
    data["schema_version"] = SCHEMA_VERSION
    if legacy:
        data["legacy"] = legacy
    return data


def evidence_path(*keys: str) -> str:
    """The SQLite JSON path of an evidence field in a stored row (``$.extra.a.b``), checked against the models."""
    model: type[BaseModel] | None = Evidence
    for key in keys:
        if model is None or key not in model.model_fields:
            raise KeyError(f"evidence has no field {'.'.join(keys)!r}")
        subs = [m for m, shape in submodels(model.model_fields[key].annotation) if shape == "one"]
        model = subs[0] if subs else None
    return "$.extra." + ".".join(keys)
