"""The report document as a typed, versioned model: what every renderer reads and what ``--format json`` writes.

:func:`orchestrator.report.document.build` fills it; the terminal, Markdown, HTML and viewer renderers read
its attributes, never string keys. The JSON format is :meth:`ReportDocument.to_json`: every field under its
JSON name (``model_dump`` by alias), and only the fields the builder set (``exclude_unset``), so a block that
leaves a figure out (a rule without a stderr) leaves it out of the JSON too.

Typed all the way down, and built typed: :func:`~orchestrator.report.document.build` composes the models the
statistics return (:mod:`orchestrator.spec.analysis`, produced by :func:`orchestrator.stats.analyze.analyze`)
with what the store knows, and each part is validated as it is made, never as a dict afterwards. The
statistical models forbid unknown keys, so a figure the statistics add without declaring it fails where it is
produced, never in a reader downstream. What other parts of headroom record and the
report passes through as recorded (the experiment spec, the provenance, the enforcement canary, the
overcommit record) is read through views that type the fields the renderers read and keep every other
field as it was written.

Bump :data:`SCHEMA_VERSION` when a field is removed or changes meaning; adding an optional field is not
a new version. Version 2: ``headline_rule`` names the headline once (version 1's ``statistics.headline``,
``statistics.headline_note``, ``statistics.scoring_rules.default`` and each configuration's ``headline`` are
gone); ``headline_intervals`` is ``score_intervals``; ``statistics`` is null, not ``{}``, before any trial
finished; ``checks.agent_not_found`` is new.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.report.blocks import ComparisonStatistics, Statistics
from orchestrator.report.inferred import Inferred
from orchestrator.spec.analysis import (
    Calibration,
    ConfigStats,
    Drift,
    ParaphraseGap,
    Rate,
)
from orchestrator.spec.backend import HostFacts
from orchestrator.spec.provenance import CanaryVerdict, Paused, Provenance

SCHEMA: Final = "headroom.report/2"
SCHEMA_VERSION: Final = 2


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class _View(BaseModel):
    """A record another part of headroom writes: the fields a renderer reads are typed, the rest kept as written."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class RunSection(_Model):
    """The run as the store records it, and what the backend declared about isolation."""

    run_id: str
    name: str
    status: str
    created_at: str | None = None
    finished_at: str | None = None
    backend: str
    enforcement: str
    axis: str = "resources"
    trials_planned: int
    trials_finished: int
    isolation: str = "unrecorded"
    storage_limit: bool | None = None
    network_control: str | bool | None = None
    run_on_host: list[str] = Field(
        default_factory=list,
        description="tasks that name a container image, run on the host without it by the experiment's run_on_host",
    )
    oracle_check: list[str] = Field(
        default_factory=list,
        description="sweep --oracle-check: what the task's own solution did per configuration (a run of its own)",
    )
    #: an external agent's own sandbox on the host: "bubblewrap", "none (trusted)", None (no external agent)
    agent_sandbox: str | None = None


class Configuration(ConfigStats):
    """One configuration's figures (:class:`~orchestrator.spec.analysis.ConfigStats`, as ``analyze`` produced
    them) and the enforcement its trials ran under (what only the store knows)."""

    enforcement: list[str] = Field(default_factory=list)
    qos_class: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, stats: ConfigStats, facts: dict[str, list[str]] | None) -> Configuration:
        """``stats``' own figures (the models, not copies) with the store's ``facts`` (enforcement, qos_class;
        None: none recorded, and the JSON leaves them out)."""
        figures = {name: getattr(stats, name) for name in stats.model_fields_set}
        if facts is None:
            return cls(**figures)
        return cls(**figures, enforcement=facts["enforcement"], qos_class=facts["qos_class"])


class Trust(_Model):
    abstentions: dict[str, Rate]
    paraphrase_gap: list[ParaphraseGap]


class ExcludedReason(_Model):
    outcome: str
    reason: str | None
    trials: int


class Exclusions(_Model):
    """What the infra-excluded score leaves out, and the tries that never became results."""

    excluded_from_infra_excluded_score: list[ExcludedReason]
    retried_tries: int
    abandoned_tries: int
    running_tries: int
    unfinished_trials: int


class ProvenanceMix(_Model):
    """How the task set is made up (one count per value of each provenance field)."""

    source: dict[str, int]
    license_or_access: dict[str, int]
    release_status: dict[str, int]
    transformation: dict[str, int]
    n_tasks: int
    n_clusters: int
    largest_cluster_size: int
    missing_provenance: list[str]
    access: dict[str, int]
    unknown_access_share: float | None


class ResourceSweep(_Model):
    valid: bool
    reasons: list[str]


# -- what other parts of headroom record (orchestrator.engine.overcommit; the provenance and the canary's verdict are
# orchestrator.spec.provenance's models, read as they are) --------------------------------------------------------


class ObservedOvercommit(_Model):
    ratio_max: float | None = None
    ratio_mean: float | None = None
    trials_recorded: int
    trials_beside_unbounded: int
    trials_under_memory_pressure: int


class Overcommit(_View):
    """The run's overcommit record (``orchestrator.engine.overcommit``) and what its trials ran beside."""

    warnings: list[str] = Field(default_factory=list)
    placement: str | None = None
    scope: str | None = None
    other_workloads: str | None = None
    observed: dict[str, ObservedOvercommit] = Field(default_factory=dict)


class AgentNotFound(_Model):
    """Trials whose agent could not start (exit 126/127, or harness_error(agent_not_found)), per configuration."""

    trials: int = 0
    by_configuration: dict[str, int] = Field(default_factory=dict)
    as_harness_error: int = 0  # of them, the trials whose outcome is harness_error(agent_not_found)


class UsageIncomplete(_Model):
    """Trials whose model usage is not all on record (the gateway's ModelUsage.incomplete), per configuration."""

    trials: int = 0
    by_configuration: dict[str, int] = Field(default_factory=dict)


class Checks(_Model):
    """Checks on the run itself (orchestrator/report/checks.py): canary, overcommit, drift, agents that did not start."""

    resource_sweep: ResourceSweep
    canary: CanaryVerdict
    canary_resumed: list[CanaryVerdict]
    overcommit: Overcommit
    drift: Drift | None
    agent_not_found: AgentNotFound = Field(default_factory=AgentNotFound)
    usage_incomplete: UsageIncomplete = Field(default_factory=lambda: UsageIncomplete())
    paused: list[Paused] = Field(default_factory=list)


class AgentSpec(_View):
    kind: str | None = None
    command: str | None = None
    names: list[str] | None = None
    name: str | None = None  # a Harbor agent's (kind harbor)
    import_path: str | None = None


class ModelSpec(_View):
    name: str | None = None
    sampling: dict[str, Any] | None = None


class RetrySpec(_View):
    max_retries: int | None = None
    reasons: list[str] | None = None


class Experiment(_View):
    """The experiment spec as the store records it (orchestrator.spec.experiment; an import writes its own)."""

    agent: AgentSpec | None = None
    model: ModelSpec | None = None
    attempts: int | None = None
    seed: int | None = None
    concurrency: int | None = None
    timeout_multiplier: float | None = None
    retry: RetrySpec | None = None


class ReportDocument(_Model):
    """One run's report."""

    schema_id: Literal["headroom.report/2"] = Field(SCHEMA, alias="schema")
    schema_version: Literal[2] = SCHEMA_VERSION
    run: RunSection
    #: The run's one headline: the scoring rule (orchestrator.stats.scoring_rules) every format's summary leads
    #: with. An imported submission's own rule (it reproduces the published figure), else headroom's.
    headline_rule: str
    experiment: Experiment
    provenance: Provenance
    task_provenance_mix: ProvenanceMix
    trust: Trust
    configurations: list[Configuration]
    tries: dict[str, int]
    exclusions: Exclusions
    statistics: Statistics | None
    checks: Checks | None = None
    #: verdicts inferred from an imported source's traces (orchestrator/report/inferred.py); absent when none
    inferred: Inferred | None = None

    @property
    def labels_axis(self) -> bool:
        """Configurations that are labels (agents, models, imports): no resource axis, trend or calibration."""
        return self.run.axis == "labels"

    @property
    def calibration(self) -> Calibration | None:
        return self.statistics.calibration if self.statistics else None

    @property
    def imported(self) -> bool:
        return self.provenance.import_ is not None

    @property
    def host(self) -> HostFacts:
        """The machine the tries ran on (empty for a cluster, an import or an old record without it)."""
        return (self.provenance.backend.host if self.provenance.backend else None) or HostFacts()

    def to_dict(self) -> dict[str, Any]:
        """The JSON format's content: every field the builder set, by its JSON name (None kept where it was set)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)


# -- the comparison of two runs (``headroom compare``) --------------------------------------------------


class RunRef(_Model):
    run_id: str
    name: str
    model: ModelSpec | None = None
    agent: AgentSpec | None = None
    enforcement: str
    #: What the user called this side (``runs compare --label``); shown instead of the agent's own name.
    label: str | None = None


class ComparisonDocument(_Model):
    """Two runs compared on the tasks and configurations both hold (what ``headroom compare`` prints)."""

    schema_id: Literal["headroom.comparison/2"] = Field("headroom.comparison/2", alias="schema")
    a: RunRef
    b: RunRef
    tasks_with_different_content: list[str]
    statistics: ComparisonStatistics

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)
