"""What the statistics compute, typed: the results of :mod:`orchestrator.stats.analyze` (``analyze``,
``compare_runs``, ``scoring_rules_block``), as their producer returns them and every reader reads them.

One declaration per field. :func:`orchestrator.stats.analyze.analyze` returns an :class:`Analysis`;
``compare_runs`` a :class:`RunComparison`; ``scoring_rules_block`` a :class:`ScoringRules`. The report document
(:mod:`orchestrator.report.model`) composes these models (its configurations are :class:`ConfigStats` with the
enforcement their trials ran under; its ``statistics`` is :class:`AnalysisFigures` with the named rules), and
the viewer and bundles read the report; nobody re-declares a field.

The field names are the JSON keys of ``headroom report --format json`` (``statistics`` and ``configurations``)
and of ``schema``. Every model forbids unknown keys: a figure the statistics add without declaring it here fails
at the producer, never in a reader downstream. A field a result leaves out in some case (a trend that could not
be tested, a rule without a stderr) is optional here, and the JSON leaves it out too (dumped with
``exclude_unset``). Non-finite numbers never reach a model: the producer maps NaN and infinities to None.

Not stored: the run store keeps trials, not statistics (a report recomputes them), so there is nothing to
migrate. What leaves headroom with them is the report document (``headroom.report/2``) and a bundle's published
copy of it; :data:`SCHEMA` names this shape, and a field removed or changing meaning bumps it.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA: Final = "headroom.stats/1"


class Block(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    def to_dict(self) -> dict[str, Any]:
        """As the JSON report writes it: by JSON name, only the fields the producer set."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Rate(Block):
    """A proportion with its Wilson 95% interval (``stats.proportions.Proportion``)."""

    k: int
    n: int
    estimate: float | None = None
    low: float | None = None
    high: float | None = None


class TheseTasksInterval(Rate):
    method: str
    generalises_to: str


class NewTasksInterval(Block):
    """The pooled rate with a task-clustered t interval (``stats.clustered.new_tasks_interval``)."""

    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    se: float | None = None
    df: int | None = None
    level: float
    n_tasks: int
    method: str
    generalises_to: str
    #: Set when there is no interval because there are too few tasks (stats.clustered.MIN_TASKS_NEW_INTERVAL).
    min_tasks: int | None = None
    note: str | None = None


class ScoreIntervals(Block):
    """headroom's score with one interval per question: these tasks, new tasks."""

    these_tasks: TheseTasksInterval
    new_tasks: NewTasksInterval


class StandardErrors(Block):
    estimate: float | None = None
    se_iid: float | None = None
    se_clustered: float | None = None
    design_effect: float | None = None
    icc: float | None = None
    n: int
    n_clusters: int


class Spread(Block):
    n_runs: int
    run_scores: list[float]
    mean: float | None = None
    sd: float | None = None
    sd_population: float | None = None
    min: float | None = None
    max: float | None = None
    basis: str = "attempt index"


class ClusterScores(Block):
    n_clusters: int
    cluster_score: float | None = None
    worst_cluster_score: float | None = None
    worst_cluster_id: str | None = None
    worst_cluster_size: int | None = None


class Cost(Block):
    """Cost, tokens and latency with their coverage (``stats.cost.CostLatency``)."""

    n: int
    passed: int
    n_cost: int
    passed_with_cost: int
    cost_complete: bool
    cost_coverage: str
    cost_total_usd: float | None = None
    cost_per_attempt_usd: float | None = None
    cost_per_solved_usd: float | None = None
    latency_total_s: float | None = None
    latency_per_attempt_s: float | None = None
    latency_per_solved_s: float | None = None
    n_tokens: int
    passed_with_tokens: int
    tokens_coverage: str
    tokens_in_per_attempt: float | None = None
    tokens_out_per_attempt: float | None = None
    tokens_per_solved: float | None = None
    n_cost_gateway: int = 0
    n_tokens_gateway: int = 0
    cost_source: str | None = None
    tokens_source: str | None = None
    # 95% intervals [low, high] (a comparison's blocks; orchestrator/stats/usage_intervals.py says how)
    cost_per_attempt_ci: list[float] | None = None
    cost_per_solved_ci: list[float] | None = None
    tokens_per_attempt_ci: list[float] | None = None
    tokens_per_solved_ci: list[float] | None = None
    latency_per_attempt_ci: list[float] | None = None
    usage_interval_method: str | None = None


class TaskCell(Block):
    """One task under one configuration (the per-task table and the heatmap)."""

    n: int
    passed: int
    pass_rate: float | None = None
    infra_errors: int
    abstained: int
    timeouts: int = 0
    peak_memory_bytes_max: float | None = None
    peak_memory_to_limit_max: float | None = None
    peak_memory_to_limit_mean: float | None = None


class TaskRow(Block):
    task_id: str
    cluster_id: str
    configs: dict[str, TaskCell]


# -- paired comparisons -------------------------------------------------------------------------


class SignTest(Block):
    a_only: int
    b_only: int
    n_discordant: int
    p: float
    p_holm: float | None = None


class CMH(Block):
    statistic: float | None = None
    p: float
    odds_ratio_mh: float | None = None
    strata_used: int
    strata_dropped: int
    p_holm: float | None = None


class TaskPaired(Block):
    n_tasks: int
    solved_a: int
    solved_b: int
    mean_task_diff: float | None = None
    mean_task_diff_se: float | None = None
    mean_task_diff_low: float | None = None
    mean_task_diff_high: float | None = None
    t_statistic: float | None = None
    t_p: float | None = None
    t_p_holm: float | None = None
    bootstrap_low: float | None = None
    bootstrap_high: float | None = None
    method: str
    mean_task_diff_clipped: bool = False


class ScoreComparison(Block):
    a: Rate
    b: Rate
    diff: float | None = None
    paired: TaskPaired
    sign: SignTest
    cmh: CMH


class ExcludedComparison(Block):
    a: Rate
    b: Rate
    diff: float | None = None
    cmh: CMH


class InfraTest(Block):
    """The exact test on infra-error rates (``stats.paired.two_rate_exact``), with both Wilson rates."""

    x_a: int
    n_a: int
    x_b: int
    n_b: int
    rate_a: float | None = None
    rate_b: float | None = None
    diff: float | None = None
    method: str
    p: float
    p_holm: float | None = None
    a: Rate
    b: Rate


class ComparisonItem(Block):
    a: str
    b: str
    score: ScoreComparison
    score_infra_excluded: ExcludedComparison
    infra: InfraTest
    kinds: list[str] | None = None  # within a run: vs_reference, neighbours
    n_tasks: int | None = None  # between two runs: the tasks both configurations ran


class Comparisons(Block):
    adjustment: str
    family_size: int
    family: str | None = None
    population_family: str | None = None
    items: list[ComparisonItem]


# -- trends, power, calibration, drift ------------------------------------------------------------


class CochranArmitage(Block):
    z: float | None = None
    z_classic: float | None = None
    p: float | None = None
    direction: str | None = None
    note: str | None = None
    p_classic: float | None = None
    variant: str


class ClusteredTrend(Block):
    slope_log_odds_per_step: float | None = None
    se: float | None = None
    z: float | None = None
    p: float | None = None
    odds_ratio_per_step: float | None = None
    direction: str | None = None
    n_clusters: int
    note: str | None = None
    p_sandwich: float | None = None
    method: str


class Trend(Block):
    cochran_armitage: CochranArmitage
    clustered: ClusteredTrend


class Trends(Block):
    primary: str
    score: str
    pass_: Trend = Field(alias="pass")
    infra_error: Trend


class Power(Block):
    """One minimum detectable difference (``stats.power.MDD``)."""

    n_per_config: int
    n_tasks: int | None = None
    attempts_per_task: float | None = None
    baseline: float
    icc: float
    design_effect: float
    n_effective: float
    effect_size_h: float
    mdd_up: float | None = None
    mdd_down: float | None = None
    mdd: float | None = None
    alpha: float
    power: float


class Mdd(Block):
    config: str
    primary: str
    conditional: Power
    with_design_effect: Power
    mdd: float | None = None
    mdd_up: float | None = None
    mdd_down: float | None = None
    mdd_with_design_effect: float | None = None
    infra_excluded: Power | None = None
    note: str


class CalibrationEvidence(Block):
    """One candidate limit against the strict one (``stats.calibration.recommend``)."""

    label: str
    limit_multiplier: float | None = None
    request_multiplier: float
    infra_error_rate: Rate
    score: Rate
    score_basis: str
    headline_score: Rate
    headline_diff_vs_reference: float | None = None
    infra_test: str
    infra_p: float | None = None
    infra_p_holm: float | None = None
    infra_reduced: bool
    infra_tasks_weighted: int | None = None
    score_diff_vs_reference: float | None = None
    score_diff_generalises_to: str
    score_diff_low95: float | None = None
    score_diff_high95: float | None = None
    score_test: str
    score_change_p: float | None = None
    score_change_p_holm: float | None = None
    score_changed: bool
    equivalence_test: str
    tost_p: float | None = None
    equivalent: bool
    tasks_finished_only_here: int | None = None
    tasks_finished_only_at_reference: int | None = None
    mdd: float | None = None
    mdd_label: str
    n_tasks_paired: int
    reading: str | None = None


class InfraStep(Block):
    from_: str = Field(alias="from")
    to: str
    p: float


class MddApplied(Block):
    config: str
    mdd: float | None = None
    label: str


class Unsettled(Block):
    labels: list[str]
    half_width95: float | None = None
    attempts_per_task_to_settle: int | None = None
    line: str


class Calibration(Block):
    """The recommendation, or why there is none (``stats.calibration.recommend``; a run whose canary shows the
    limits did not bite gets a refusal from the report's checks)."""

    status: str
    reasons: list[str] = Field(default_factory=list)
    evidence: list[CalibrationEvidence] = Field(default_factory=list)
    rule: str | None = None
    alpha: float | None = None
    margin: float | None = None
    reference: str | None = None
    recommended_label: str | None = None
    recommended_limit_multiplier: float | None = None
    score_changes_at_label: str | None = None
    settled: bool | None = None
    summary: str | None = None
    unsettled: Unsettled | None = None
    infra_family: str | None = None
    score_family: str | None = None
    infra_steps: list[InfraStep] | None = None
    mdd_applied: MddApplied | None = None


class DriftTest(Block):
    slope_log_odds_per_block: float | None = None
    odds_ratio_per_block: float | None = None
    z: float | None = None
    p: float | None = None
    informative_strata: int
    clusters: int
    note: str | None = None
    direction: str | None = None
    p_adjusted: float | None = None
    drift: bool = False


class DriftBlock(Block):
    block: int
    n: int
    pass_rate: float | None = None
    infra_error_rate: float | None = None
    first_start_utc: str | None = None
    last_start_utc: str | None = None
    first_start_local: str | None = None  # added by the report: the time of day where the run started
    last_start_local: str | None = None


class Drift(Block):
    method: str
    alpha: float
    n_blocks: int
    flagged: bool
    blocks: list[DriftBlock]
    n_trials: int
    n_without_time: int = 0
    ordered_by: str | None = None
    note: str | None = None
    pass_: DriftTest | None = Field(None, alias="pass")
    infra_error: DriftTest | None = None


# -- named scoring rules --------------------------------------------------------------------------


class RuleDefinition(Block):
    name: str
    title: str
    counts: str
    aggregate: str
    interval: str
    source: str


class RuleInterval(Block):
    kind: str  # wilson95 | clustered_se | stderr
    generalises_to: str
    low: float | None = None
    high: float | None = None
    se: float | None = None
    ci95: float | None = None


class RunSpread(Block):
    sd: float | None = None
    min: float | None = None
    max: float | None = None


class PerRun(Block):
    run: str
    n: int
    resolved: int
    accuracy: float
    pass_at_k: dict[str, float | None]


class RuleResult(Block):
    """One configuration under one rule (``stats.scoring_rules.score``); what a rule does not publish is absent."""

    rule: str
    n_trials_read: int
    n_trials: int
    n_tasks: int
    excluded_by: dict[str, int] | None = None
    estimate: float | None = None
    intervals: list[RuleInterval] = Field(default_factory=list)
    stderr: float | None = None
    ci95: float | None = None
    stderr_note: str | None = None
    pass_at_k: dict[str, float | None] | None = None
    pass_at_k_basis: str | None = None
    n_runs: int | None = None
    run_spread: RunSpread | None = None
    run_basis: str | None = None
    per_run: list[PerRun] | None = None


class Move(Block):
    reason: str
    effect: str
    trials: int


class ScoringRules(Block):
    """Every configuration under every rule asked for (``stats.scoring_rules.evaluate``); the headline rule is
    the document's ``headline_rule``."""

    schema_id: str = Field(alias="schema")
    requested: list[str]
    #: The rule the block leads with (the caller's default when it was requested, else the first; always set by
    #: its producer): the report names it once, as its ``headline_rule``, so it is never written here.
    default: str | None = Field(None, exclude=True)
    run_basis: str
    definitions: dict[str, RuleDefinition]
    configs: dict[str, dict[str, RuleResult]]
    moves: dict[str, dict[str, list[Move]]]
    note: str

    def result(self, label: str, rule: str) -> RuleResult | None:
        return (self.configs.get(label) or {}).get(rule)

    def title(self, rule: str) -> str:
        d = self.definitions.get(rule)
        return d.title if d else rule


class ParaphraseGap(Block):
    config: str
    pairs: int
    mean_gap: float | None = None
    original_rate: float | None = None
    paraphrase_rate: float | None = None
    wilcoxon_p: float | None = None
    paired_t_p: float | None = None


# -- the results ------------------------------------------------------------------------------------


RateName = Literal[
    "pass_rate",
    "infra_error_rate",
    "timeout_rate",
    "harness_error_rate",
    "abstention_rate",
    "score_infra_as_failure",
    "score_infra_excluded",
]


class ConfigStats(Block):
    """One configuration's figures (``analyze``: rates with Wilson intervals, clustered SEs, pass@k, spread,
    cluster scores, cost)."""

    label: str
    request_multiplier: float
    limit_multiplier: float | None
    n: int
    n_tasks: int
    attempts_per_task_min: int
    attempts_per_task_max: int
    counts: dict[str, int]
    infra_reasons: dict[str, int]
    pass_rate: Rate
    infra_error_rate: Rate
    timeout_rate: Rate
    harness_error_rate: Rate
    abstention_rate: Rate
    score_infra_as_failure: Rate
    score_intervals: ScoreIntervals
    score_infra_excluded: Rate
    se: StandardErrors
    icc_infra: float | None
    pass_at_k: list[float | None]  # index k-1: pass@k
    pass_hat_k: list[float | None]
    spread: Spread
    clusters: ClusterScores
    cost: Cost

    def rate_block(self, name: RateName) -> Rate:
        """One of the Wilson-interval rates by name (a plot draws several series from one loop)."""
        rate: Rate = getattr(self, name)
        return rate


class AnalysisFigures(Block):
    """What ``analyze`` computes about the run as a whole (the report's ``statistics``, beside its own
    per-configuration blocks)."""

    schema_id: str = Field(alias="schema")
    axis: str
    reference: str
    n_trials: int
    n_tasks: int
    n_clusters: int
    config_order: list[str]
    tasks: list[TaskRow]
    comparisons: Comparisons
    trends: Trends | None = None
    mdd: Mdd
    calibration: Calibration | None = None
    drift: Drift | None = None
    notes: list[str] = Field(default_factory=list)
    trends_note: str | None = None
    calibration_note: str | None = None


class Analysis(AnalysisFigures):
    """``analyze``'s result: one run's statistics, per configuration and as a whole."""

    configs: list[ConfigStats]

    def figures(self) -> dict[str, Any]:
        """The run-wide fields this result set, as keyword arguments (the models themselves, not copies):
        what a document that keeps the configurations apart composes its own section from."""
        return {name: getattr(self, name) for name in self.model_fields_set if name != "configs"}


class ComparedRun(Block):
    n_trials: int
    n_trials_shared_tasks: int
    configs: list[ConfigStats]


class RunComparison(Block):
    """``compare_runs``' result: two runs on the tasks and configurations both hold, paired by task."""

    schema_id: str = Field(alias="schema")
    shared_tasks: int
    basis: str
    runs: dict[str, ComparedRun]
    tasks_only_in: dict[str, list[str]]
    comparisons: Comparisons
    mdd: Mdd
    notes: list[str] = Field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """Every field this result set, as keyword arguments (the models themselves, not copies)."""
        return {name: getattr(self, name) for name in self.model_fields_set}
