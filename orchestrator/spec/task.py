"""The task spec: Harbor / Terminal-Bench 2 ``task.toml`` field names, plus provenance.

A task directory holds ``task.toml``, ``instruction.md``, ``tests/test.sh`` (the
verifier: writes a reward to ``reward.txt`` or ``reward.json`` under the logs
dir the orchestrator provides) and ``solution/solve.sh`` (the oracle).

Both of Harbor's spellings of sizes are accepted: ``memory = "2G"`` /
``storage = "10G"`` (docker-style units, ``G`` = GiB) and ``memory_mb`` /
``storage_mb``. They are stored as MiB, the unit every backend scales.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from orchestrator.spec.grader import GoldenGrader
from orchestrator.spec.unknown import RECORDED, refuse_unknown

#: Harbor's task.toml fields that headroom reads but does not act on, by section: accepted, listed as
#: ignored by `tasks validate` / `tasks import` (orchestrator/importers/harbor_task.py). Any other key
#: is an error naming the closest valid one (orchestrator/spec/unknown.py).
HARBOR_IGNORED: dict[str, frozenset[str]] = {
    "": frozenset({"schema_version", "task", "source"}),
    "environment": frozenset({"gpu_types", "mcp_servers", "skills_dir", "healthcheck", "user", "workdir"}),
    "agent": frozenset({"user"}),
    "verifier": frozenset({"user"}),
    "solution": frozenset(),
}
#: Harbor's fields that headroom does not act on but reads as a task's needs (orchestrator/tasks/needs.py): a backend
#: or sweep that cannot give them refuses the task (docs/import.md, "What a backend refuses").
HARBOR_NEEDS: dict[str, frozenset[str]] = {
    "environment": frozenset({"network_mode", "allowed_hosts", "os", "tpu"}),
    "agent": frozenset({"network_mode", "allowed_hosts"}),
    "verifier": frozenset({"network_mode", "allowed_hosts"}),
}
NETWORK_MODES = ("no-network", "public", "allowlist")  # Harbor's [environment]/[agent]/[verifier] network_mode
TASK_OS = ("linux", "windows")  # Harbor's [environment] os


def _harbor_needs(data: Any, section: str, context: Any) -> Any:
    """Harbor's own checks of the fields read as needs: a value Harbor would refuse is refused here too."""
    if not isinstance(data, dict) or (isinstance(context, dict) and context.get(RECORDED)):
        return data
    mode = data.get("network_mode")
    if mode is not None and (not isinstance(mode, str) or mode.lower() not in NETWORK_MODES):
        raise ValueError(f"{section}.network_mode must be one of {', '.join(NETWORK_MODES)}")
    hosts = data.get("allowed_hosts")
    if hosts is not None and (not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts)):
        raise ValueError(f"{section}.allowed_hosts must be a list of host names")
    if hosts and mode is not None and mode.lower() != "allowlist":
        raise ValueError(f"{section}.allowed_hosts is only valid with network_mode = 'allowlist'")
    if section == "environment":
        os_ = data.get("os")
        if os_ is not None and (not isinstance(os_, str) or os_.lower() not in TASK_OS):
            raise ValueError(f"environment.os must be one of {', '.join(TASK_OS)}")
        tpu = data.get("tpu")
        if tpu is not None and not (isinstance(tpu, dict) and tpu.get("type") and tpu.get("topology")):
            raise ValueError(
                "environment.tpu must be a table with type and topology (e.g. type = 'v6e', topology = '2x4')"
            )
        if (
            "allow_internet" in data
            and mode is not None
            and bool(data["allow_internet"]) != (mode.lower() != "no-network")
        ):
            raise ValueError(
                f"environment.allow_internet = {str(data['allow_internet']).lower()} contradicts network_mode = {mode!r}: "
                "give one"
            )
    return data


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)\s*$", re.I)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}
MAX_MB = 16 * 1024 * 1024  # 16 TiB: beyond any machine, and far inside SQLite's INTEGER


def size_to_mb(text: str | int | float) -> int:
    """``"2G"``, ``"512Mi"``, ``"1.5GB"``, ``"4096"`` (MiB) -> MiB.

    Docker's convention: K/M/G/T and Ki/Mi/Gi/Ti are binary; KB/MB/GB/TB are decimal.
    A bare number is MiB, as in ``memory_mb``.
    """
    if isinstance(text, bool):
        raise ValueError("expected a size such as '2G' or a number of MiB")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _SIZE.match(text)
        if m is None:
            raise ValueError(f"cannot read size {text!r}; expected e.g. '2G', '512M', '1.5Gi'")
        number, unit, binary, decimal_b = m.groups()
        unit = unit.lower()
        if not unit:
            value = float(number)
        else:
            base = 1000 if (decimal_b and not binary) else 1024
            value = float(number) * base ** _POW[unit] / (1024 * 1024)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("size must be positive")
    return max(1, math.ceil(value))


class EnvironmentSpec(BaseModel):
    """Base resources. The request and the limit are derived from these by a ResourceConfig."""

    model_config = ConfigDict(extra="allow")  # only HARBOR_IGNORED["environment"]: see _known_keys
    SPELLINGS: ClassVar[tuple[str, ...]] = ("memory", "storage", "memory_limit")

    cpus: float = Field(gt=0, le=4096, allow_inf_nan=False, description="CPU cores the task is specified to need")
    memory_mb: int = Field(
        gt=0, le=MAX_MB, description='memory the task is specified to need, MiB (or `memory = "2G"`)'
    )
    storage_mb: int = Field(default=10240, gt=0, le=MAX_MB, description='ephemeral storage, MiB (or `storage = "10G"`)')
    gpus: int = Field(default=0, ge=0, le=64, description="GPUs the task needs; refused where a backend has none")
    allow_internet: bool = Field(default=True, description="false: the task must run without network")
    docker_image: str | None = Field(default=None, description="image for container backends")
    runs_on_host: bool = Field(
        default=False,
        description="headroom: the task's scripts need nothing from its docker_image or environment/Dockerfile "
        "(only $HEADROOM_* paths and the host's tools), so the local backend runs it faithfully on the host; "
        "without it such a task is refused there (docs/import.md)",
    )
    build_timeout_sec: float | None = None
    env: dict[str, str] = Field(default_factory=dict, description="[environment.env]: set for every step")
    # The task's own ceiling (headroom's fields; Harbor has none): where a `task-band`
    # configuration kills it. `memory_mb`/`cpus` above are the floor. Written by
    # `headroom runs calibrate`; see docs/resource-specs.md.
    memory_limit_mb: int | None = Field(
        default=None,
        gt=0,
        le=MAX_MB,
        description='headroom: the task\'s memory ceiling (hard limit), MiB; `memory_limit = "2G"` also works',
    )
    cpus_limit: float | None = Field(
        default=None, gt=0, le=4096, allow_inf_nan=False, description="headroom: the task's CPU ceiling (quota), cores"
    )

    @property
    def network_allowed(self) -> bool:
        """False when the author says the task runs offline (allow_internet = false, Harbor's network_mode =
        "no-network"): it then gets no network whatever the sweep allows."""
        mode = (self.model_extra or {}).get("network_mode")
        return self.allow_internet and not (isinstance(mode, str) and mode.lower() == "no-network")

    @model_validator(mode="after")
    def _ceiling_not_below_floor(self) -> EnvironmentSpec:
        if self.memory_limit_mb is not None and self.memory_limit_mb < self.memory_mb:
            raise ValueError(
                f"memory_limit_mb {self.memory_limit_mb} is below memory_mb {self.memory_mb}: "
                "the ceiling cannot be under the floor"
            )
        if self.cpus_limit is not None and self.cpus_limit < self.cpus:
            raise ValueError(
                f"cpus_limit {self.cpus_limit:g} is below cpus {self.cpus:g}: the ceiling cannot be under the floor"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any, info: ValidationInfo) -> Any:
        refuse_unknown(cls, data, HARBOR_IGNORED["environment"] | HARBOR_NEEDS["environment"], info.context)
        return _harbor_needs(data, "environment", info.context)

    @model_validator(mode="before")
    @classmethod
    def _harbor_sizes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for short, long in (("memory", "memory_mb"), ("storage", "storage_mb"), ("memory_limit", "memory_limit_mb")):
            if short in data:
                if long in data:
                    raise ValueError(f"give either {short} or {long}, not both")
                data[long] = size_to_mb(data.pop(short))
        return data


class StepSpec(BaseModel):
    model_config = ConfigDict(extra="allow")  # only HARBOR_IGNORED["agent"/"verifier"]: see _known_keys

    timeout_sec: float = Field(gt=0, le=7 * 24 * 3600, allow_inf_nan=False)
    env: dict[str, str] = Field(default_factory=dict, description="variables set for this step only")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any, info: ValidationInfo) -> Any:
        refuse_unknown(
            cls,
            data,
            HARBOR_IGNORED["agent"] | HARBOR_IGNORED["verifier"] | HARBOR_NEEDS["agent"] | HARBOR_NEEDS["verifier"],
            info.context,
        )
        return _harbor_needs(data, "verifier" if cls.__name__ == "VerifierSpec" else "agent", info.context)


class VerifierSpec(StepSpec):
    outputs: list[str] = Field(
        default_factory=list,
        description="headroom: folders besides the work dir and /logs/agent that a container backend carries from the "
        "agent's environment to the verifier's, which starts from the task's pristine image "
        "(docs/container-contract.md)",
    )

    @field_validator("outputs")
    @classmethod
    def _carriable(cls, v: list[str]) -> list[str]:
        from orchestrator.contract.carry import problem  # the contract's rule, one place

        for p in v:
            if (why := problem(p)) is not None:
                raise ValueError(f"[verifier] outputs: {why}")
        return v


class SolutionSpec(BaseModel):
    model_config = ConfigDict(extra="allow")  # only HARBOR_IGNORED["solution"]: see _known_keys

    env: dict[str, str] = Field(default_factory=dict, description="[solution.env]: set for the oracle only")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any, info: ValidationInfo) -> Any:
        refuse_unknown(cls, data, HARBOR_IGNORED["solution"], info.context)
        return data


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
    paraphrase_of: str | None = Field(
        default=None, description="id of the task this one paraphrases (for the paraphrase gap)"
    )


class TaskSpec(BaseModel):
    """The parsed ``task.toml``."""

    model_config = ConfigDict(extra="allow")  # only HARBOR_IGNORED[""]: see _known_keys

    version: str = "1.0"
    environment: EnvironmentSpec
    agent: StepSpec
    verifier: VerifierSpec
    solution: SolutionSpec = Field(default_factory=SolutionSpec)
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: ProvenanceSpec = Field(default_factory=ProvenanceSpec)
    grader: GoldenGrader | None = Field(
        default=None, description="a declarative golden-set grader instead of the tests' reward"
    )

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any, info: ValidationInfo) -> Any:
        refuse_unknown(cls, data, HARBOR_IGNORED[""], info.context)
        return data


class Task(BaseModel):
    """A loaded task: its id (the directory name), location, spec and content digest."""

    model_config = ConfigDict(frozen=True)

    id: str
    path: str
    spec: TaskSpec
    instruction: str
    digest: str = Field(description="sha256 over every file of the task directory")
    has_tests: bool = Field(default=True, description="False: a golden task without tests/; its grader alone decides")

    @property
    def cluster_id(self) -> str:
        return self.spec.provenance.cluster_id or self.id
