"""What a backend can do, and what it recorded about where a run ran: one declaration, one record.

:class:`BackendAbilities` is the one declaration of a backend's abilities. Each backend class sets it once
(``abilities = BackendAbilities(...)``), with what it can give at best, so the CLI and ``tasks validate``
can read it without constructing the backend; a constructed backend narrows its copy to what this host or
cluster really gives (no cgroup: no CPU quota). Everything that asks what a backend can do reads it: the
refusals (``engine/faithful.py``, ``engine/sweep.py``, the flags the CLI refuses), the provenance (inside
:class:`BackendFacts`) and the reports.

:class:`BackendFacts` is what ``backend.facts()`` returns and a run's provenance keeps under ``backend``:
the abilities, the machine the tries ran on, and one typed block for the backend's own facts. Provenance
written before this model (a flat dict with ``capabilities`` and ``enforcement`` beside the host's facts)
still reads: :meth:`BackendFacts.from_stored` moves it into this shape, and keeps what it has no field for
in ``legacy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, model_validator

Isolation = Literal["none", "namespaces", "container", "pod"]


class BackendAbilities(BaseModel):
    """What a backend can do. Undeclared is not had: every default is the cautious one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # -- what it enforces ------------------------------------------------------------------------
    enforcement: str = Field(
        default="", description="the enforcement mechanism: cgroup-v1, cgroup-v2, rlimit, docker, kubernetes"
    )
    memory_limit: bool = Field(default=False, description="a hard memory limit with kernel OOM kills")
    memory_request: bool = Field(
        default=False, description="a memory guarantee (memory.min, soft limit, or the scheduler's request)"
    )
    cpu_quota: bool = Field(default=False, description="a CPU limit enforced by quota")
    cpu_request: bool = Field(default=False, description="CPU shares/weight from the request")
    storage_limit: bool = Field(default=False, description="the disk limit is enforced (storage_mb)")
    oom_signal: str = Field(default="none", description="where an OOM verdict comes from")
    # -- what it isolates ------------------------------------------------------------------------
    isolation: Isolation = Field(default="none", description="what keeps the agent away from what grades it")
    network_control: bool = Field(default=False, description="network can be switched off for a try")
    # -- what a task may need of it (engine/faithful.py refuses a task that needs what is not here) --
    task_images: bool = Field(
        default=False,
        description="runs each task in its docker_image or the image its environment/Dockerfile builds; without it "
        "a task runs on the host, and one that names an image is refused unless run_on_host",
    )
    multi_container: bool = Field(
        default=False, description="starts a task's docker-compose services beside it (multi-container tasks)"
    )
    gpus: bool = Field(default=False, description="can give a try GPUs where its machine has them")
    architectures: list[str] = Field(
        default_factory=list,
        description="CPU architectures trials run on (amd64, arm64); empty: not known (not checked)",
    )
    verifier_outputs: bool = Field(
        default=False,
        description="the verifier sees the folders a task declares in [verifier] outputs (the local backend's "
        "verifier shares the agent's files; Docker carries them into the verifier's container); without it such a "
        "task is refused",
    )
    skips_verifier: bool = Field(
        default=False, description="runs a golden task without tests/: the verifier step is skipped, the grader decides"
    )
    exec_channel: bool = Field(default=False, description="an exec channel into a try, which external agents need")
    # -- optional methods (orchestrator/backends/abilities.py gives their typed views) ---------------
    check_fit: bool = Field(
        default=False, description="check_fit(needs, placement=...): refuses a try no node could hold"
    )
    hold_run: bool = Field(
        default=False, description="hold_run(run_id): a liveness signal other processes' cleanup sees"
    )
    recorded: bool = Field(
        default=False, description="recorded(handle): told once a result is durable, to release its remains"
    )
    canary_targets: bool = Field(
        default=False, description="canary_targets() and canary_skipped(): the canary per node"
    )
    informer: bool = Field(
        default=False, description="informer(run_id): a cache of the run's pods (the controller reads it)"
    )
    node_architectures: bool = Field(
        default=False,
        description="node_architectures(): the CPU architectures of the machines its tries could land on, read "
        "when asked (a cluster's schedulable nodes); without it ``architectures`` is what it runs on",
    )
    # -- how the engine drives it ------------------------------------------------------------------
    places_tries: bool = Field(
        default=False, description="places each try on a node itself and records overcommit per node"
    )
    canary_needs_image: bool = Field(
        default=False, description="the canary's try needs the experiment's (or a task's) image"
    )
    force_cleanup: bool = Field(
        default=False, description="cleanup(run_id, force=True): also runs that still look alive"
    )
    flags: frozenset[str] = Field(default=frozenset(), description="backend-specific command-line flags it honours")
    notes: list[str] = Field(default_factory=list, description="anything a reader of the report must know")

    @field_serializer("flags")
    def _flags_in_order(self, flags: frozenset[str]) -> list[str]:
        # WHY: a set's order changes with each process's hash seed; a bundle's published report and its
        # recomputation (another process) must write the same list.
        return sorted(flags)

    def enforced(self) -> list[str]:
        """The resource controls it enforces, in words (the CLI's announcement)."""
        return [
            what
            for what, on in (
                ("memory limit", self.memory_limit),
                ("memory guarantee", self.memory_request),
                ("CPU quota", self.cpu_quota),
                ("CPU weight", self.cpu_request),
                ("storage limit", self.storage_limit),
            )
            if on
        ]


class HostFacts(BaseModel):
    """A machine as the backend saw it: this host (local), the daemon's (docker), headroom's own (docker)."""

    model_config = ConfigDict(extra="forbid")

    hostname: str | None = None
    kernel: str | None = None
    os: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_bytes: int | None = None
    python: str | None = None
    cgroup_version: str | None = Field(default=None, description="v1, v2 (local), cgroup-v1/cgroup-v2 (docker)")


class LocalFacts(BaseModel):
    """The local backend's own facts."""

    model_config = ConfigDict(extra="forbid")

    sandbox: dict[str, Any] = Field(
        default_factory=dict, description="the sandbox as it describes itself (bubblewrap, seccomp), or why none"
    )
    cgroup: dict[str, str] = Field(default_factory=dict, description="the trial cgroups' parents; empty: no cgroup")
    trial_pids_max: int | None = None
    enforcement_fallback_reason: str | None = Field(default=None, description="why rlimit, not a cgroup")


class DockerFacts(BaseModel):
    """The Docker (or Podman) daemon the docker backend drives."""

    model_config = ConfigDict(extra="forbid")

    engine: str | None = None
    engine_version: str | None = None
    address: str | None = None
    server_version: str | None = None
    api_version: str | None = None
    components: list[str] = Field(default_factory=list)
    cgroup_driver: str | None = None
    storage_driver: str | None = None
    default_runtime: str | None = None
    security_options: list[str] | None = None
    sdk: str | None = None
    options: dict[str, Any] = Field(default_factory=dict, description="the backend's options (docker.*) as given")


class NodeFacts(BaseModel):
    """One candidate node of a cluster."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kubelet_version: str | None = None
    kernel: str | None = None
    container_runtime: str | None = None
    os_image: str | None = None
    architecture: str | None = None
    instance_type: str | None = None
    zone: str | None = None
    allocatable: dict[str, str] = Field(default_factory=dict)


#: A cluster fact the caller may not read is recorded as ``not readable (403 Forbidden)``, never an error.
NotReadable = str


class ClusterFacts(BaseModel):
    """The kubernetes backend's cluster, as the caller could read it when the run started."""

    model_config = ConfigDict(extra="forbid")

    namespace: str
    server_version: dict[str, str | None] | NotReadable | None = None
    nodes: list[NodeFacts] | NotReadable = Field(default_factory=list)
    nodes_truncated: int | None = Field(default=None, description="the nodes there were, when the list was cut")
    other_workloads: NotReadable | None = Field(
        default=None, description="'counted': each try's overcommit record counts other pods on its node"
    )
    runtime_class: str | None = None
    runtime_class_handler: str | None = None
    resource_quotas: list[dict[str, Any]] | NotReadable = Field(default_factory=list)
    limit_ranges: list[dict[str, Any]] | NotReadable = Field(default_factory=list)
    pod_security: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict, description="the backend's options (kubernetes.*) as given")
    fit_check: dict[str, Any] = Field(default_factory=dict, description="whether oversized requests were checked")


class BackendFacts(BaseModel):
    """What ``backend.facts()`` returns and a run's provenance keeps under ``backend``."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, description="the backend; None in a record written before it was kept")
    abilities: BackendAbilities | None = Field(
        default=None, description="the backend's declaration, as this host narrowed it; None: not recorded"
    )
    host: HostFacts | None = Field(default=None, description="the machine the tries ran on (none for a cluster)")
    orchestrator_host: HostFacts | None = Field(
        default=None, description="where headroom ran, when not the tries' machine (docker)"
    )
    local: LocalFacts | None = None
    docker: DockerFacts | None = None
    kubernetes: ClusterFacts | None = None
    legacy: dict[str, Any] = Field(
        default_factory=dict, description="keys of a record from an earlier version this one has no field for"
    )

    @property
    def memory_bytes(self) -> int | None:
        """The memory of the machine the tries share (a cluster's: per node, not here)."""
        return self.host.memory_bytes if self.host else None

    @classmethod
    def from_stored(cls, data: Any) -> BackendFacts:
        """The ``backend`` of a stored provenance, written by this or any earlier version (``{}``: nothing known).

        Never fails a reader: a record that fits no shape is kept whole in ``legacy``."""
        if not isinstance(data, Mapping):
            return cls()
        try:
            return cls.model_validate(data if "abilities" in data else _from_flat(data))
        except ValidationError:
            return cls(legacy=dict(data))

    @model_validator(mode="after")
    def _name_from_its_block(self) -> BackendFacts:
        if self.name is None:
            self.name = next((n for n in ("local", "docker", "kubernetes") if getattr(self, n) is not None), None)
        return self


# -- provenance written before BackendFacts: one flat dict -------------------------------------------------
_HOST = frozenset(HostFacts.model_fields)
_CLUSTER = frozenset(ClusterFacts.model_fields) - {"nodes_truncated"}
_BY_ISOLATION = {"pod": "kubernetes", "container": "docker", "namespaces": "local", "none": "local"}


def _backend_of(flat: Mapping[str, Any], caps: Any) -> str | None:
    if isinstance(flat.get("docker"), Mapping):
        return "docker"
    if "namespace" in flat or "nodes" in flat:
        return "kubernetes"
    if isinstance(caps, Mapping):
        return _BY_ISOLATION.get(str(caps.get("isolation")))
    return "local" if {"isolation", "trial_pids_max", "enforcement_fallback_reason"} & set(flat) else None


def _known(model: type[BaseModel], block: Any, where: str, legacy: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``block`` that ``model`` has a field for; the rest set aside in ``legacy`` by dotted path."""
    if not isinstance(block, Mapping):
        return {}
    for key in set(block) - set(model.model_fields):
        legacy[f"{where}.{key}"] = block[key]
    return {k: v for k, v in block.items() if k in model.model_fields}


def _from_flat(data: Mapping[str, Any]) -> dict[str, Any]:
    """An old flat record in today's shape: ``capabilities`` and ``enforcement`` are the abilities; the host's
    keys, the local backend's (``isolation`` was its sandbox), the daemon's and the cluster's go to their blocks."""
    rest = dict(data)
    caps = rest.pop("capabilities", None)
    enforcement = rest.pop("enforcement", None)
    legacy: dict[str, Any] = {}
    out: dict[str, Any] = {"name": (name := _backend_of(rest, caps))}
    if isinstance(caps, Mapping):
        out["abilities"] = _known(BackendAbilities, caps, "capabilities", legacy)
        if isinstance(enforcement, str):
            out["abilities"]["enforcement"] = enforcement
    elif enforcement is not None:
        legacy["enforcement"] = enforcement
    if name == "kubernetes":
        cluster = out["kubernetes"] = {k: rest.pop(k) for k in list(rest) if k in _CLUSTER}
        cluster.setdefault("namespace", "default")
        if isinstance(nodes := cluster.get("nodes"), list):
            cluster["nodes"] = [_known(NodeFacts, n, f"nodes.{i}", legacy) for i, n in enumerate(nodes)]
    elif host := {k: rest.pop(k) for k in list(rest) if k in _HOST}:
        if host.get("cgroup_version") is not None:  # an int in some early records
            host["cgroup_version"] = str(host["cgroup_version"])
        out["host"] = host
    if name == "docker":
        out["docker"] = _known(DockerFacts, rest.pop("docker"), "docker", legacy)
        if "orchestrator_host" in rest:
            out["orchestrator_host"] = _known(HostFacts, rest.pop("orchestrator_host"), "orchestrator_host", legacy)
    if name == "local":
        sandbox = rest.pop("isolation", None)
        out["local"] = {
            "sandbox": dict(sandbox) if isinstance(sandbox, Mapping) else {},
            "cgroup": {k: str(rest.pop(k)) for k in list(rest) if k.startswith("cgroup_parent")},
            "trial_pids_max": rest.pop("trial_pids_max", None),
            "enforcement_fallback_reason": rest.pop("enforcement_fallback_reason", None),
        }
    out["legacy"] = {**rest, **legacy}
    return out
