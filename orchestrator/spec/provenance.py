"""A run's provenance and its enforcement canary's verdict: one typed, versioned record from writer to reader.

:class:`Provenance` is what a run records about itself: enough to rerun it and to explain a difference
between two runs. Each part is owned by the code that produces it, and only that code fills it:

* ``orchestrator``, ``python``, ``packages``, ``backend`` (the backend's ``facts()``), ``started_at*``,
  ``command``: :func:`orchestrator.engine.provenance.collect`;
* ``faithful``: :mod:`orchestrator.engine.faithful`; ``overcommit``: :mod:`orchestrator.engine.overcommit`;
  ``agent_sandbox``, ``agent_preflight``, ``paused``: :mod:`orchestrator.engine.sweep`;
* ``canary`` and ``canary_resumed`` (a :class:`CanaryVerdict` each): :mod:`orchestrator.engine.canary`;
* ``oracle_check``, ``oracle_check_for``: :mod:`orchestrator.engine.oracle_check`;
* ``import``: :mod:`orchestrator.importers.results`; ``cluster``: :mod:`orchestrator.controller.export`;
  ``regrade``: :mod:`orchestrator.engine.regrade`;
* ``tasks``: the store, on read, from the run's tasks table (never stored in the provenance row).

Readers (reports, the viewer, bundles, ``runs calibrate``, ``resume``) read attributes, never keys.

The field names are the JSON keys the provenance had as a dict, so stored rows, bundles and the report's
``provenance`` block keep their shape; a field appears in the JSON only when a writer set it, and
``schema_version`` is always written. Secrets never enter: the sweep redacts the whole record before the
store writes it (:func:`orchestrator.engine.sweep.start`).

Unknown keys, decided as :mod:`orchestrator.spec.evidence` decides them: every model refuses a key it does
not declare, so a writer cannot invent one. A stored row (read with :func:`read_stored`, as the store, a
bundle's import and every reader do) of this or an older version reads: a key this version has no field for
(an older writer's, or a newer writer's optional addition at the same version) moves to
:attr:`Provenance.legacy` by its dotted path, so nothing is lost when the row is re-stored. A row of a newer
version is refused. The backend's ``facts()`` is :class:`orchestrator.spec.backend.BackendFacts`, read from
any older shape by its own ``from_stored``. The open-ended records of other systems are kept as written: an
import's mapping tables and the source's own summary.

Versions: :data:`SCHEMA_VERSION`; bump it when a field is removed, renamed or changes meaning, and say what
the older version's rows become in :func:`_migrate`. Provenance stored before it was typed has no
``schema_version`` (version 0); its keys are version 1's (``isolation``, written at the top level by early
versions, is kept in ``legacy``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, ValidationInfo, model_validator

from orchestrator.spec.backend import BackendFacts
from orchestrator.spec.grader import GoldenGrader
from orchestrator.spec.stored import OnlySet, check_version, set_aside

SCHEMA_VERSION: Final = 1
#: The validation context key that marks a stored row (see :func:`read_stored`).
STORED: Final = "headroom_stored_provenance"


class _Part(OnlySet):
    # defer_build: a report, the viewer and `runs` import these models; each is built on its first use
    model_config = ConfigDict(populate_by_name=True, defer_build=True)


# -- the enforcement canary (orchestrator/engine/canary.py) ---------------------------------------------------


class CanaryTry(_Part):
    """One canary try in brief: the verdict it got and what the backend measured."""

    verdict: str | None = Field(default=None, description="the try's outcome, or why there is none")
    error: str | None = Field(default=None, description="the backend's error, when it refused or failed the try")
    enforcement: str | None = None
    limit_memory_bytes: int | None = None
    peak_memory_bytes: int | None = None
    cpu_time_s: float | None = None
    duration_s: float | None = None
    agent_duration_s: float | None = None
    oom_evidence: str | None = None
    exit_code: int | None = None
    signal: int | None = None


class CanaryArm(_Part):
    """The memory verdict for one configuration on one target, from its above- and below-limit tries."""

    config: str
    target: str = "local"
    status: str = Field(description="enforced | not_enforced | weak | inconclusive | skipped")
    limit_memory_bytes: int | None = None
    limit_cpus: float | None = None
    above: CanaryTry = Field(default_factory=CanaryTry)
    below: CanaryTry = Field(default_factory=CanaryTry)
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class CpuCheck(_Part):
    """Whether a CPU quota bites on a target: a spin under the quota against the same spin without one."""

    limit_cpus: float
    declared: bool = Field(description="whether the backend declares a CPU quota")
    cpu_share: float | None = None
    unlimited_cpu_share: float | None = None
    limited: bool | None = Field(default=None, description="None: not checkable (host too busy, no CPU time)")
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class SkippedTarget(_Part):
    """A candidate node the canary left out, and why."""

    target: str
    reason: str


class CanaryVerdict(_Part):
    """The enforcement canary's record: per configuration and target whether the limits bite (or why not run)."""

    status: str = Field(description="enforced | flagged | not run (a report adds: unknown (imported), not recorded)")
    reason: str | None = Field(default=None, description="why the canary did not run")
    backend: str | None = None
    enforcement: str | None = None
    started_at: str | None = None
    resumed_at: str | None = Field(default=None, description="set on the canary of a --resume")
    targets: list[str] = Field(default_factory=list)
    by_target: dict[str, str] = Field(default_factory=dict, description="per target: its configurations' worst")
    skipped_targets: list[SkippedTarget] = Field(default_factory=list)
    arms: list[CanaryArm] = Field(default_factory=list)
    cpu: dict[str, CpuCheck] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)

    @property
    def flagged(self) -> bool:
        """True when the run must not be presented as a resource sweep."""
        return self.status == "flagged"


# -- what the sweep records around it ------------------------------------------------------------------------


class OrchestratorInfo(_Part):
    version: str | None = None
    revision: str | None = None
    dirty: bool | None = None


class FaithfulCheck(_Part):
    """The faithful-or-refused check's record (orchestrator/engine/faithful.py)."""

    backend: str
    run_on_host: bool = False
    tasks_run_on_host: dict[str, str] = Field(default_factory=dict, description="task id -> the image it needed")
    architectures: list[str] = Field(default_factory=list)


class NodeFill(_Part):
    node: str
    capacity_bytes: int
    trials: int
    limit_bytes: int


class OvercommitPlan(_Part):
    """Per configuration, the worst sum of limits at the run's concurrency (orchestrator/engine/overcommit.py)."""

    capacity_bytes: int | None = None
    placement: str = "default"
    concurrency: int = 1
    worst_concurrent_limit_bytes: dict[str, int | None] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    worst_node: dict[str, NodeFill] | None = None
    nodes_checked: int | str | None = None


class SeccompRecord(_Part):
    """The host sandbox's seccomp filter (orchestrator/isolation/seccomp.py), or why there is none."""

    filter: str | None = None
    library: str | None = None
    blocked: list[str] | None = None
    errno: str | None = None
    arches: list[str] | None = None
    socket_families: list[str] | None = None
    fallback_reason: str | None = None


class HostBoundsRecord(_Part):
    """An external agent's bounds on the host (orchestrator/agents/host_bounds.py)."""

    memory_mb: int | None = None
    pids: int | None = None
    disk_mb: int | None = None
    enforcement: str | None = None
    applied: dict[str, str] | None = Field(default=None, description="per bound, the mechanism that applies it")
    fallback_reason: str | None = None


class AgentSandbox(_Part):
    """An external agent's own sandbox on the host (orchestrator/agents/host_sandbox.py), or why it has none."""

    sandboxed: bool
    trusted: bool
    fallback_reason: str | None = None
    shown_read_only: list[str] | None = None
    tool: str | None = None
    bwrap: str | None = None
    agent_uid: int | None = None
    namespaces: list[str] | None = None
    seccomp: SeccompRecord | None = None
    sees: str | None = None
    bounds: HostBoundsRecord | None = None


class AgentPreflight(_Part):
    """Whether the agent's command was checked to start before the sweep (orchestrator/engine/preflight.py)."""

    where: str
    checked: bool
    note: str | None = None


class Paused(_Part):
    """A pause of the sweep by the model gateway's circuit breaker."""

    at: str
    why: str


class OraclePass(_Part):
    passes_from: float | Literal["unbounded"] | None = Field(
        default=None, description="the smallest limit multiplier at which the oracle passed; null: at none"
    )


class OracleCheck(_Part):
    """``sweep --oracle-check``: the task's own solution once per configuration (orchestrator/engine/oracle_check.py)."""

    run_id: str = ""
    configurations: list[str] = Field(default_factory=list)
    results: dict[str, dict[str, str]] = Field(default_factory=dict, description="task -> configuration -> outcome")
    too_low: dict[str, list[str]] = Field(default_factory=dict)
    fails_everywhere: list[str] = Field(default_factory=list)
    lowest_passing: dict[str, str] = Field(default_factory=dict)
    tasks: dict[str, OraclePass] = Field(default_factory=dict)
    no_solution: list[str] | None = None


class ImportedSource(_Part):
    """One source an import read (orchestrator/importers/results.py)."""

    name: str | None = None
    path: str | None = None
    format: str | None = None
    harness: str | None = None
    harness_version: str | None = None
    files_sha256: dict[str, str] | None = None
    digest: str | None = None
    details: dict[str, Any] | None = Field(default=None, description="the source's own settings, as it gave them")
    reported: dict[str, Any] | None = Field(default=None, description="the source's own numbers, as it gave them")


class ImportRecord(_Part):
    """Where an imported run came from and how its verdicts were mapped."""

    imported_at: str | None = None
    harnesses: list[str] = Field(default_factory=list)
    sources: list[ImportedSource] = Field(default_factory=list)
    mapping: dict[str, Any] | None = Field(default=None, description="the mapping tables the import applied")
    summary: dict[str, Any] | None = Field(default=None, description="the import's own account of every file")


class ClusterRecord(_Part):
    """The in-cluster Experiment a run was exported from (orchestrator/controller/export.py)."""

    namespace: str | None = None
    experiment: str | None = None
    uid: str | None = None
    run_id: str | None = None
    server_version: str | None = None
    task_set: str | None = None
    started_at: str | None = None
    completed_at: str | None = None


class RegradeRecord(_Part):
    """What a re-grade applied (orchestrator/engine/regrade.py)."""

    from_run: str
    grader_file: str
    default: GoldenGrader | None = None
    per_task: dict[str, GoldenGrader] = Field(default_factory=dict)


class RunTask(_Part):
    """One task of the run as the store holds it: filled on read, never written into the provenance row."""

    digest: str
    cluster_id: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict, description="the task's own [provenance] fields")


class Provenance(_Part):
    """Everything a run records about itself (see the module's docstring for who writes which part)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    orchestrator: OrchestratorInfo | None = None
    python: str | None = None
    packages: dict[str, str | None] | None = None
    backend: BackendFacts | None = None
    started_at: str | None = None
    started_at_local: str | None = None
    command: list[str] | None = None
    faithful: FaithfulCheck | None = None
    overcommit: OvercommitPlan | None = None
    agent_sandbox: AgentSandbox | None = None
    agent_preflight: AgentPreflight | None = None
    canary: CanaryVerdict | None = None
    canary_resumed: list[CanaryVerdict] = Field(default_factory=list)
    paused: list[Paused] = Field(default_factory=list)
    oracle_check: OracleCheck | None = None
    oracle_check_for: str | None = Field(default=None, description="an oracle check's run: the experiment it checks")
    import_: ImportRecord | None = Field(default=None, alias="import")
    cluster: ClusterRecord | None = None
    regrade: RegradeRecord | None = None
    tasks: dict[str, RunTask] = Field(default_factory=dict, description="filled by the store on read")
    legacy: dict[str, Any] = Field(
        default_factory=dict,
        description="read-only: keys of a stored row this version has no field for (by dotted path), "
        "filled only when reading stored rows, never by a writer",
    )

    @model_validator(mode="before")
    @classmethod
    def _stored(cls, data: Any, info: ValidationInfo) -> Any:
        if not (info.context or {}).get(STORED) or not isinstance(data, Mapping):
            return data
        return _migrate(dict(data))

    def canaries(self) -> list[tuple[str, CanaryVerdict]]:
        """Every canary of the run, labelled: the one at its start, then one per ``--resume``."""
        out = [("at start", self.canary)] if self.canary is not None else []
        return out + [(f"on resume at {c.resumed_at or '?'}", c) for c in self.canary_resumed]

    def to_stored(self) -> dict[str, Any]:
        """The row the store writes: every part a writer set, by its JSON name; never the tasks (the store's own)."""
        return self.model_dump(mode="json", by_alias=True, exclude={"tasks"})


def read_stored(data: Mapping[str, Any]) -> Provenance:
    """Provenance as stored by any version of headroom up to this one (see the module's docstring)."""
    return Provenance.model_validate(data, context={STORED: True})


def _migrate(data: dict[str, Any]) -> dict[str, Any]:
    check_version("provenance", data, SCHEMA_VERSION)
    # The backend's facts have their own reader of every older shape (a flat dict before they were typed),
    # which keeps what it has no field for in the facts' own legacy part.
    legacy = dict(data.get("legacy") or {})
    if isinstance(data.get("backend"), Mapping):
        data["backend"] = BackendFacts.from_stored(data["backend"])
    elif data.get("backend") is not None:  # a shape no version wrote: kept aside, never read as facts
        legacy["backend"] = data.pop("backend")
    # Version 0 (untyped) used version 1's names; what no field holds is kept aside.
    set_aside(Provenance, data, "", legacy)
    data["schema_version"] = SCHEMA_VERSION
    if legacy:
        data["legacy"] = legacy
    return data
