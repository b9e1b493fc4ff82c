"""The report document as a typed, versioned model: what every renderer reads and what ``--format json`` writes.

:func:`orchestrator.report.document.build` fills it; the terminal, Markdown, HTML and viewer renderers
read its attributes, never string keys at the top or configuration level. The JSON format is
:meth:`ReportDocument.to_json` (``model_dump`` by alias), so its keys are the field names below plus
``schema`` and ``schema_version``.

Typed down to the configuration level. The statistical blocks inside a configuration (rates, intervals,
spread, clusters, cost) and ``statistics`` are the plain results of :mod:`orchestrator.stats` and stay
``dict[str, Any]`` here; their shape is owned there. Every model forbids unknown keys, so a block the
builder adds without declaring it here fails the build (and the test suite), not a reader downstream.

Bump :data:`SCHEMA_VERSION` when a field is removed or changes meaning; adding an optional field is not
a new version.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA: Final = "headroom.report/2"
SCHEMA_VERSION: Final = 2

Block = dict[str, Any]  # a result of orchestrator.stats, laid out by the renderers as it is
RateName = Literal["pass_rate", "infra_error_rate", "timeout_rate", "harness_error_rate", "abstention_rate",
                   "score_infra_as_failure", "score_infra_excluded"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


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


class Configuration(_Model):
    """One configuration's figures (``orchestrator.stats.analyze``) and the enforcement its trials ran under."""

    label: str
    request_multiplier: float
    limit_multiplier: float | None
    n: int
    n_tasks: int
    attempts_per_task_min: int
    attempts_per_task_max: int
    counts: dict[str, int]
    infra_reasons: dict[str, int]
    pass_rate: Block
    infra_error_rate: Block
    timeout_rate: Block
    harness_error_rate: Block
    abstention_rate: Block
    score_infra_as_failure: Block
    score_intervals: Block
    score_infra_excluded: Block
    se: Block
    icc_infra: float | None
    pass_at_k: list[float | None]  # index k-1: pass@k
    pass_hat_k: list[float | None]
    spread: Block
    clusters: Block
    cost: Block
    enforcement: list[str] = Field(default_factory=list)
    qos_class: list[str] = Field(default_factory=list)

    def rate_block(self, name: RateName) -> Block:
        """One of the Wilson-interval rates by name (a plot draws several series from one loop)."""
        return {"pass_rate": self.pass_rate, "infra_error_rate": self.infra_error_rate,
                "timeout_rate": self.timeout_rate, "harness_error_rate": self.harness_error_rate,
                "abstention_rate": self.abstention_rate, "score_infra_as_failure": self.score_infra_as_failure,
                "score_infra_excluded": self.score_infra_excluded}[name]


class Trust(_Model):
    abstentions: dict[str, Block]
    paraphrase_gap: list[Block]


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


class AgentNotFound(_Model):
    """Trials whose agent could not start (exit 126/127, or harness_error(agent_not_found)), per configuration."""

    trials: int = 0
    by_configuration: dict[str, int] = Field(default_factory=dict)
    as_harness_error: int = 0  # of them, the trials whose outcome is harness_error(agent_not_found)


class Checks(_Model):
    """Checks on the run itself (orchestrator/report/checks.py): canary, overcommit, drift, agents that did not start."""

    resource_sweep: ResourceSweep
    canary: Block
    canary_resumed: list[Block]
    overcommit: Block
    drift: Block | None
    agent_not_found: AgentNotFound = Field(default_factory=AgentNotFound)


class ReportDocument(_Model):
    """One run's report. ``statistics`` is ``orchestrator.stats.analyze``'s result without its ``configs``."""

    schema_id: Literal["headroom.report/2"] = Field(SCHEMA, alias="schema")
    schema_version: Literal[2] = SCHEMA_VERSION
    run: RunSection
    #: The run's one headline: the scoring rule (orchestrator.stats.scoring_rules) every format's summary leads
    #: with. An imported submission's own rule (it reproduces the published figure), else headroom's.
    headline_rule: str
    experiment: Block
    provenance: Block
    task_provenance_mix: ProvenanceMix
    trust: Trust
    configurations: list[Configuration]
    tries: dict[str, int]
    exclusions: Exclusions
    statistics: Block
    checks: Checks | None = None

    @property
    def labels_axis(self) -> bool:
        """Configurations that are labels (agents, models, imports): no resource axis, trend or calibration."""
        return self.run.axis == "labels"

    @property
    def calibration(self) -> Block | None:
        cal = self.statistics.get("calibration")
        return cal if isinstance(cal, dict) else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON format's content: every field by its JSON name, None kept (a reader tells absent from unknown)."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)
