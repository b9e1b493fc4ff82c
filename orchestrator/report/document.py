"""The report as data: builds the typed :class:`~orchestrator.report.model.ReportDocument` every renderer reads.

Renderers never compute statistics; they lay out this document. The statistics
come from :func:`orchestrator.stats.analyze.analyze`, typed (:mod:`orchestrator.spec.analysis`), and the
document composes those models as they are; this module adds what only the store knows: the run, its
provenance, enforcement per configuration, the raw try accounting (retries, abandoned tries) and the
exclusions. Each part is a model when it is made, so the document is validated as it is built.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, TypedDict

import pandas as pd

from orchestrator.errors import NothingToCompare, UserError
from orchestrator.report import checks, inferred
from orchestrator.report.blocks import ComparisonRules, ComparisonStatistics, Statistics
from orchestrator.report.inferred import Inferred
from orchestrator.report.model import (
    SCHEMA,
    SCHEMA_VERSION,
    AgentSpec,
    ComparisonDocument,
    Configuration,
    ExcludedReason,
    Exclusions,
    Experiment,
    ModelSpec,
    ProvenanceMix,
    ReportDocument,
    RunRef,
    RunSection,
    Trust,
)
from orchestrator.spec.analysis import Rate, ScoringRules
from orchestrator.spec.provenance import Provenance
from orchestrator.stats import scoring_rules as rules_mod
from orchestrator.stats.analyze import analyze, compare_runs, scoring_rules_block
from orchestrator.stats.paraphrase import paraphrase_gap, paraphrase_pairs
from orchestrator.store.frame import config_facts
from orchestrator.store.sqlite import RunInfo, Store
from orchestrator.trust.provenance import ACCESS_CLASSES, access_class


def provenance_mix(prov: Provenance) -> ProvenanceMix:
    """How the task set is made up: sources, licences, release status, clusters."""
    tasks = prov.tasks

    def counts(field: str) -> dict[str, int]:
        return dict(Counter(t.provenance.get(field) or "unrecorded" for t in tasks.values()))

    clusters = Counter(t.cluster_id for t in tasks.values())
    access = Counter(access_class(t.provenance) for t in tasks.values())
    return ProvenanceMix(
        source=counts("source"),
        license_or_access=counts("license_or_access"),
        release_status=counts("release_status"),
        transformation=counts("transformation"),
        n_tasks=len(tasks),
        n_clusters=len(clusters),
        largest_cluster_size=max(clusters.values(), default=0),
        missing_provenance=sorted(tid for tid, t in tasks.items() if not t.provenance.get("source")),
        access={c: access.get(c, 0) for c in (*ACCESS_CLASSES, "unknown")},
        unknown_access_share=access.get("unknown", 0) / len(tasks) if tasks else None,
    )


def trust_block(df: pd.DataFrame, prov: Provenance, abstention_rates: dict[str, Rate]) -> Trust:
    """Abstention rates (configurations with any abstention) and the paraphrase gap, when the task set has them."""
    return Trust(
        abstentions={label: r for label, r in abstention_rates.items() if r.k},
        paraphrase_gap=paraphrase_gap(df, paraphrase_pairs(prov.tasks)),
    )


IMPORTED_UNKNOWN = "unknown (imported)"


def isolation_facts(prov: Provenance) -> dict[str, Any]:
    """What kept agents away from what grades them, as the backend declared it (``unrecorded`` for old stores).

    An imported run was not run by headroom: its isolation is not known, and is said so.
    """
    if prov.import_:
        return {"isolation": IMPORTED_UNKNOWN, "storage_limit": None, "network_control": None}
    caps = prov.backend.abilities if prov.backend else None
    on_host = prov.faithful.tasks_run_on_host if prov.faithful else {}
    host = prov.agent_sandbox
    return {
        "isolation": caps.isolation if caps else "unrecorded",
        "storage_limit": caps.storage_limit if caps else None,
        "network_control": caps.network_control if caps else None,
        "run_on_host": sorted(str(t) for t in on_host),
        "agent_sandbox": None
        if host is None
        else str(host.tool or "bubblewrap") + host_bounds_clause(host.bounds.model_dump() if host.bounds else None)
        if host.sandboxed
        else "none (trusted)",
    }


#: How a host agent's bound was applied, as provenance names it (anything else, from an older or edited store,
#: is shown as unrecorded: the line never carries a string it did not make).
_MECHANISMS = {"cgroup-v1": "cgroup v1", "cgroup-v2": "cgroup v2", "rlimit": "rlimit"}


def host_bounds_clause(bounds: Any) -> str:
    """The bounds a host agent's sandbox applied, from the run's provenance (``agent_sandbox.bounds``): what this
    host could enforce (a cgroup's limits, or the rlimits without one), not only what the experiment asked. An
    older run that recorded no mechanisms gets no clause."""
    if not isinstance(bounds, dict) or not isinstance(bounds.get("applied"), dict):
        return ""

    def num(key: str) -> int | None:
        v = bounds.get(key)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    how = _MECHANISMS.get(str(bounds.get("enforcement")), "unrecorded")
    rlimit = how == "rlimit"
    memory, pids, disk = num("memory_mb"), num("pids"), num("disk_mb")
    parts = [
        f"memory {memory} MiB by {'RLIMIT_DATA' if rlimit else how}" if memory else "memory unrecorded",
        f"{pids} processes by {'RLIMIT_NPROC (per uid)' if rlimit else how}" if pids else "processes unrecorded",
        f"HOME, /tmp, /dev/shm and logs dir each a tmpfs of {disk} MiB at most" if disk else "tmpfs size unrecorded",
    ]
    return ": " + ", ".join(parts)


def oracle_check_lines(prov: Provenance) -> list[str]:
    """The oracle check's findings (``sweep --oracle-check``), one line per task whose oracle fails somewhere."""
    record = prov.oracle_check
    if record is None:
        return []
    from orchestrator.engine.oracle_check import lines

    found = lines(record)
    return found or [f"every task's oracle passes under every configuration (run {record.run_id})"]


def source_kinds(info: RunInfo) -> list[str]:
    """The formats an imported run came from (terminal-bench, harbor); none for a run headroom made."""
    kinds = (info.spec.get("scoring") or {}).get("source_kinds") if info.backend.startswith("import:") else None
    if kinds is None and info.backend.startswith("import:"):
        kinds = [k for k in info.backend.removeprefix("import:").split("+") if k]
    return [str(k) for k in kinds or []]


def requested_rules(info: RunInfo, rules: str | None) -> tuple[list[str], str]:
    """The scoring rules a report shows (``auto``: headroom's and the sources'), and its headline rule."""
    kinds = source_kinds(info)
    try:
        names = rules_mod.parse_rules(rules, kinds)
    except ValueError as exc:
        raise UserError(str(exc), field="--rules") from None
    return names, rules_mod.default_rule(kinds)


def scoring_block(df: pd.DataFrame, info: RunInfo, rules: str | None, order: list[str] | None) -> ScoringRules:
    names, default = requested_rules(info, rules)
    return scoring_rules_block(
        df,
        names,
        config_order=order,
        default_rule=default,
        reward_threshold=float(info.spec.get("reward_threshold") or 1.0),
    )


def exclusions(df: pd.DataFrame, tries: dict[str, int], planned: int) -> Exclusions:
    """What the infra-excluded score leaves out, and why; plus tries that never became results."""
    excluded = df[df["outcome"].isin(["infra_error", "harness_error"])]
    reasons = excluded.groupby(["outcome", "reason"], dropna=False, observed=True).size()
    return Exclusions(
        excluded_from_infra_excluded_score=sorted(
            (
                ExcludedReason(outcome=str(o), reason=None if pd.isna(r) else str(r), trials=int(n))
                for (o, r), n in reasons.items()
                if n
            ),
            key=lambda e: (e.outcome, e.reason or ""),
        ),
        retried_tries=tries["retried"],
        abandoned_tries=tries["abandoned"],
        running_tries=tries["running"],
        unfinished_trials=int(planned - len(df)),
    )


def _label_order(info: RunInfo) -> list[str] | None:
    """A labels-axis run's configurations in the order the user gave (None: a sweep's canonical order)."""
    order = info.spec.get("configurations") if info.axis == "labels" else None
    return [str(c) for c in order] if isinstance(order, list) else None


class AnalyzeOptions(TypedDict, total=False):
    """The keyword arguments of :func:`analyze` a report passes only when given (absent: analyze's default)."""

    margin: float


def build(
    store: Store,
    run_id: str | None = None,
    reference: str | None = None,
    rules: str | None = None,
    margin: float | None = None,
) -> ReportDocument:
    """``rules``: the scoring rules to show side by side (``auto``, ``all`` or names; see ``scoring_rules``).
    ``margin``: the calibration's equivalence margin (None: its default), recorded in the calibration block."""
    info = store.run(run_id)
    df = store.rule_frame(info.run_id)
    planned = store.planned_count(info.run_id)
    prov = store.provenance(info.run_id)
    tries = store.try_counts(info.run_id)
    facts = config_facts(df)  # what only the store knows per configuration: the enforcement its trials ran under
    headline_rule = requested_rules(info, rules)[1]  # a mistake in --rules is said before any statistics run
    extra: AnalyzeOptions = {} if margin is None else {"margin": margin}
    # The statistics, typed where they are made (orchestrator.spec.analysis); none before any trial finished.
    analysis = (
        analyze(df, reference=reference, axis=info.axis, config_order=_label_order(info), **extra) if len(df) else None
    )
    scoring = scoring_block(df, info, rules, analysis.config_order) if analysis is not None else None
    # The drift's blocks read in the time of day where the run started; the checks and the statistics show the same.
    drift = checks.local_times(analysis.drift if analysis else None, prov.started_at_local)
    run_checks = checks.build(prov, df, backend=info.backend, drift=drift)  # canary, overcommit, drift
    statistics: Statistics | None = None
    configurations: list[Configuration] = []
    if analysis is not None:
        # One headline per run, said once: the rule the scoring block led with (the source's own when it was
        # requested) is the document's headline_rule.
        headline_rule = (scoring.default if scoring else None) or headline_rule
        statistics = Statistics.of(
            analysis, scoring, drift=drift, calibration=checks.calibration(run_checks, analysis.calibration)
        )
        configurations = [Configuration.of(c, facts.get(c.label)) for c in analysis.configs]
    return ReportDocument(
        schema_id=SCHEMA,
        schema_version=SCHEMA_VERSION,
        headline_rule=headline_rule,
        run=RunSection(
            run_id=info.run_id,
            name=info.name,
            status=info.status,
            created_at=info.created_at,
            finished_at=info.finished_at,
            backend=info.backend,
            enforcement=info.enforcement,
            axis=info.axis,
            trials_planned=planned,
            trials_finished=len(df),
            **isolation_facts(prov),
            oracle_check=oracle_check_lines(prov),
        ),
        experiment=Experiment.model_validate(info.spec),
        provenance=prov,
        task_provenance_mix=provenance_mix(prov),
        trust=trust_block(df, prov, {c.label: c.abstention_rate for c in configurations}),
        configurations=configurations,
        tries=tries,
        exclusions=exclusions(df, tries, planned),
        statistics=statistics,
        checks=run_checks,
        # imported verdicts inferred, not observed; left out (unset, so absent from the JSON) when there are none
        **_inferred(df),
    )


def _inferred(df: pd.DataFrame) -> dict[str, Inferred]:
    guessed = inferred.build(df)
    return {} if guessed is None else {"inferred": guessed}


def comparison_document(
    store_a: Store, run_a: str | None, store_b: Store, run_b: str | None, rules: str | None = None
) -> ComparisonDocument:
    """Two runs compared on the tasks and configurations both hold, as the typed document the renderers read."""
    ia, ib = store_a.run(run_a), store_b.run(run_b)
    da, db = store_a.rule_frame(ia.run_id), store_b.rule_frame(ib.run_id)
    for info, frame in ((ia, da), (ib, db)):
        if frame.empty:
            raise UserError(f"run {info.run_id} has no finished trials to compare")
    pa, pb = store_a.provenance(ia.run_id), store_b.provenance(ib.run_id)
    changed_tasks = sorted(t for t in set(pa.tasks) & set(pb.tasks) if pa.tasks[t].digest != pb.tasks[t].digest)
    try:
        stats = compare_runs(da, db, name_a="A", name_b="B", order_a=_label_order(ia), order_b=_label_order(ib))
    except NothingToCompare as exc:
        raise UserError(f"cannot compare run {ia.run_id} (A) with run {ib.run_id} (B): {exc}") from None
    shared = sorted(set(da["task_id"].astype(str)) & set(db["task_id"].astype(str)))
    names_a, default_a = requested_rules(ia, rules)
    names_b, default_b = requested_rules(ib, rules)
    names = list(dict.fromkeys(names_a + names_b))
    rules_ = ComparisonRules(
        basis="each run on the tasks both hold",
        requested=names,
        default={"A": default_a, "B": default_b},  # each side's headline rule, said once here
        A=scoring_block(da[da["task_id"].astype(str).isin(shared)], ia, ",".join(names), _label_order(ia)),
        B=scoring_block(db[db["task_id"].astype(str).isin(shared)], ib, ",".join(names), _label_order(ib)),
    )
    return ComparisonDocument(
        schema_id="headroom.comparison/2",
        a=_run_ref(ia),
        b=_run_ref(ib),
        tasks_with_different_content=changed_tasks,
        statistics=ComparisonStatistics.of(stats, rules_),
    )


def _run_ref(info: RunInfo) -> RunRef:
    return RunRef(
        run_id=info.run_id,
        name=info.name,
        model=ModelSpec.model_validate(info.spec["model"]) if info.spec.get("model") is not None else None,
        agent=AgentSpec.model_validate(info.spec["agent"]) if info.spec.get("agent") is not None else None,
        enforcement=info.enforcement,
    )
