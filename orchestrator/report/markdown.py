"""The report as Markdown: setup, task provenance mix, metrics, exclusions; then the tests.

The HTML report is this Markdown rendered, plus plots, so the two never disagree.
"""

from __future__ import annotations

from typing import Any

from orchestrator.report import checks, costs, inferred, rules, safe, summary
from orchestrator.report.blocks import Statistics
from orchestrator.report.calibration import CALIBRATION_HEADERS, CALIBRATION_RULE, calibration_rows
from orchestrator.report.comparison import infra_warnings
from orchestrator.report.model import (
    AgentSpec,
    Experiment,
    ModelSpec,
    ReportDocument,
    RetrySpec,
    RunSection,
    Trust,
)
from orchestrator.report.outcomes import OUTCOME_HEADERS, count_cells
from orchestrator.report.text import (
    HEADLINE_HEADERS,
    HEADLINE_NOTE,
    clipped_note,
    gap,
    headline_rows,
    interval_pts,
    limit,
    mib,
    pct,
    pts,
    pval,
    rate,
    sign_counts,
)
from orchestrator.spec.backend import HostFacts, LocalFacts
from orchestrator.spec.provenance import OrchestratorInfo
from orchestrator.stats.glossary import (
    ABSTENTION_RATE,
    CLUSTER_SCORE,
    HARNESS_RATE,
    INFRA_RATE,
    SCORE_DIFF,
    SCORE_EXCL,
    SCORE_FAIL,
    TIMEOUT_RATE,
    WORST_CLUSTER,
)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    # Cells hold what render() escaped (orchestrator/report/safe.py): a pipe from data is already "\\|".
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _is_labels(doc: ReportDocument) -> bool:
    return doc.labels_axis


def _known(*parts: Any) -> bool:
    return any(p not in (None, "", [], {}) for p in parts)


def isolation_line(run: RunSection) -> str:
    iso = run.isolation
    text = f"**{iso}**" + {
        "none": " (NOT sandboxed: agents could reach the tests, the store and other trials)",
        "unrecorded": " (not recorded: treat the trials as not sandboxed)",
        "unknown (imported)": " (headroom did not run these trials: how they were sandboxed is not known)",
    }.get(iso, "")
    storage = {
        True: "enforced",
        False: "NOT enforced",
        None: "unknown (imported)" if iso == "unknown (imported)" else "unrecorded",
    }[run.storage_limit]
    return f"{text}{summary.host_agent(run.agent_sandbox)}; storage limit {storage}"


def host_line(host: HostFacts, local: LocalFacts | None = None) -> str:
    """The machine, naming only what was recorded; without a cgroup it says what applied instead."""
    cpu = " ".join(p for p in (host.cpu_model, f"x{host.cpu_count}" if host.cpu_count else None) if p)
    if host.cgroup_version:
        cgroup = f"cgroup {host.cgroup_version}"
    else:
        why = local.enforcement_fallback_reason if local else None
        cgroup = "no cgroup: rlimit" + (f" ({why})" if why else "")
    parts = [
        f"kernel {host.kernel}" if host.kernel else None,
        cpu or None,
        f"{mib(host.memory_bytes)} RAM" if host.memory_bytes else None,
        cgroup,
    ]
    return ", ".join(p for p in parts if p)


def timeout_text(exp: Experiment) -> str:
    tm = float(exp.timeout_multiplier or 1.0)
    return (
        f"{tm:g} ("
        + (
            "each task's agent and verifier timeouts as written"
            if tm == 1
            else f"each task's agent and verifier timeouts multiplied by {tm:g}"
        )
        + ")"
    )


def retry_text(exp: Experiment) -> str:
    retry = exp.retry or RetrySpec()
    n = int(retry.max_retries or 0)
    if n == 0:
        return "none: every infra error is final"
    reasons = retry.reasons or []
    # Here, not at the top: the experiment models cost every report's start-up, and only retries need them.
    from orchestrator.spec.experiment import RetryPolicy

    if sorted(reasons) == sorted(RetryPolicy().reasons):
        which = "infra errors a trial cannot cause itself (not OOM kills or the storage limit)"
    else:
        which = "infra errors from: " + (", ".join(reasons) or "no reason")
    return f"up to {n} per trial, of {which}; every try stays on record"


def setup_block(doc: ReportDocument) -> list[str]:
    """What ran where. Rows whose facts were never recorded (an imported run has no host) are left out."""
    run, prov, exp = doc.run, doc.provenance, doc.experiment
    orch, host = prov.orchestrator or OrchestratorInfo(), doc.host
    agent, model = exp.agent or AgentSpec(), exp.model or ModelSpec()
    pk = prov.packages or {}
    imported = prov.import_
    configs = ", ".join(c.label for c in doc.configurations)
    rows = [
        [
            "orchestrator",
            f"headroom {orch.version} @ {orch.revision or 'unknown'}"
            + (" (uncommitted changes)" if orch.dirty else ""),
        ],
        ["libraries", f"python {prov.python}, scipy {pk.get('scipy')}, statsmodels {pk.get('statsmodels')}"],
        ["backend", f"{run.backend}; enforcement {run.enforcement}"],
        ["isolation", isolation_line(run)],
    ]
    if _known(host.kernel, host.cpu_model):
        rows.append(["host", host_line(host, prov.backend.local if prov.backend else None)])
    if imported:
        for src in imported.sources:
            rows.append(
                [
                    "imported from",
                    f"{src.format} {src.path} — {src.harness} "
                    f"{src.harness_version or '(version unrecorded)'}; "
                    f"{len(src.files_sha256 or {})} files, sha256 in provenance",
                ]
            )
    if agent.kind == "imported":
        rows.append(["agents", ", ".join(agent.names or []) or "unrecorded"])
    elif _known(agent.kind):
        named = agent.command or agent.name or agent.import_path  # a Harbor agent is named, not a command
        rows.append(["agent", f"{agent.kind}" + (f": {named}" if named else "")])
    if _known(model.name, model.sampling):
        rows.append(
            ["model", f"{model.name or 'unrecorded'}" + (f"; sampling {model.sampling}" if model.sampling else "")]
        )
    design = (
        f"{exp.attempts} attempts x {doc.task_provenance_mix.n_tasks} tasks x {len(doc.configurations)} configurations"
    )
    if _known(exp.seed, exp.concurrency) and not imported:
        design += f"; seed {exp.seed}; concurrency {exp.concurrency}"
    rows.append(["design", design])
    if not imported:  # an import records how its source ran, not headroom's policies
        rows.append(["timeout multiplier", timeout_text(exp)])
        rows.append(["retries", retry_text(exp)])
    rows.append(
        [
            "configurations",
            configs + (" (labels, in the order given: no resource axis)" if _is_labels(doc) else " (resource levels)"),
        ]
    )
    dates = f"started {run.created_at}" + (f" (local {prov.started_at_local})" if prov.started_at_local else "")
    if imported:
        rows.append(["dates", f"imported {imported.imported_at or run.created_at}"])
    else:
        rows.append(["dates", f"{dates}, finished {run.finished_at or '—'}"])
    rows.append(["status", f"{run.status}: {run.trials_finished}/{run.trials_planned} trials"])
    return ["## Setup", ""] + _table(["", ""], rows)


def provenance_block(doc: ReportDocument) -> list[str]:
    mix = doc.task_provenance_mix
    lines = [
        "## Task provenance mix",
        "",
        f"{mix.n_tasks} tasks in {mix.n_clusters} clusters (largest cluster: {mix.largest_cluster_size} tasks).",
        "",
    ]
    rows = [
        [field, ", ".join(f"{k} ({v})" for k, v in sorted(counts.items()))]
        for field, counts in (
            ("source", mix.source),
            ("license_or_access", mix.license_or_access),
            ("release_status", mix.release_status),
            ("transformation", mix.transformation),
        )
    ]
    share = mix.unknown_access_share
    lines += [
        "Access: "
        + ", ".join(f"{k} {v}" for k, v in mix.access.items())
        + (f" (unknown: {share:.0%} of tasks)." if share is not None else "."),
        "",
    ]
    lines += _table(["field", "values (tasks)"], rows)
    if mix.missing_provenance:
        lines += [f"Tasks without a recorded source: {', '.join(mix.missing_provenance)}.", ""]
    return lines


def trust_lines(trust: Trust) -> list[str]:
    lines: list[str] = []
    if trust.abstentions:
        lines += [
            "## Abstentions",
            "",
            'Honest "cannot answer" answers a golden grader allows: their own outcome, '
            "not a failure, but not a pass either (they stay in the pass rate's denominator):",
            "",
        ]
        lines += _table(
            ["configuration", "abstained", "trials", "abstention rate"],
            [[k, str(v.k), str(v.n), rate(v)] for k, v in trust.abstentions.items()],
        )
    if trust.paraphrase_gap:
        lines += [
            "## Paraphrase gap",
            "",
            "Original minus paraphrase pass rate over task pairs; paired Wilcoxon and t-test.",
            "",
        ]
        fmt = lambda v, f: "—" if v is None else format(v, f)  # noqa: E731
        lines += _table(
            ["configuration", "pairs", "original", "paraphrase", "gap", "Wilcoxon p", "paired t p"],
            [
                [
                    g.config,
                    str(g.pairs),
                    fmt(g.original_rate, ".1%"),
                    fmt(g.paraphrase_rate, ".1%"),
                    fmt(g.mean_gap, "+.1%"),
                    fmt(g.wilcoxon_p, ".3g"),
                    fmt(g.paired_t_p, ".3g"),
                ]
                for g in trust.paraphrase_gap
            ],
        )
    return lines


def metrics_intro(doc: ReportDocument) -> str:
    """Whose figures the metrics are: the headline's (a run headroom made), or headroom's reading beside an
    import's own headline."""
    fail = f"**{SCORE_FAIL}** (`score_infra_as_failure`: infra errors count as failures)"
    excl = f"**{SCORE_EXCL}** (`score_infra_excluded`: infra and harness errors leave the denominator)"
    if summary.source_led(doc):
        return (
            f"headroom's reading of these trials: {fail} and {excl}. The run's headline is "
            f"**{summary.rule_title(doc, doc.headline_rule)}** (`{doc.headline_rule}`), the source's own rule: "
            "see the Summary and Scores under named rules."
        )
    return f"Headline: {fail}, rule `headroom:infra-as-failure`; beside it {excl}."


def metrics_block(doc: ReportDocument) -> list[str]:
    lines = ["## Metrics", "", metrics_intro(doc) + " Intervals are Wilson 95%; SE clustered by task.", ""]
    labels = _is_labels(doc)
    rows = []
    for c in doc.configurations:
        se = c.se
        cl = c.clusters
        axis_cells = [] if labels else [f"{c.request_multiplier:g}x", limit(c.limit_multiplier)]
        rows.append(
            [
                c.label,
                *axis_cells,
                ",".join(c.enforcement),
                str(c.n),
                rate(c.score_infra_as_failure),
                rate(c.score_infra_excluded),
                pct(cl.cluster_score),
                f"{pct(cl.worst_cluster_score)} ({cl.worst_cluster_id})",
                rate(c.infra_error_rate),
                rate(c.timeout_rate),
                rate(c.harness_error_rate),
                rate(c.abstention_rate),
                f"{pct(se.se_iid)} / {pct(se.se_clustered)}",
            ]
        )
    lines += _table(
        [
            "config",
            *([] if labels else ["request", "limit"]),
            "enforcement",
            "n",
            SCORE_FAIL,
            SCORE_EXCL,
            CLUSTER_SCORE,
            WORST_CLUSTER,
            INFRA_RATE,
            TIMEOUT_RATE,
            HARNESS_RATE,
            ABSTENTION_RATE,
            "SE iid / clustered",
        ],
        rows,
    )
    lines += [f"{SCORE_FAIL} with its two intervals (what each generalises to):", "", HEADLINE_NOTE, ""]
    lines += _table(HEADLINE_HEADERS, headline_rows(doc.configurations))
    lines += ["Outcomes (trials):", ""]
    lines += _table(
        ["config", "n", *OUTCOME_HEADERS.values()],
        [[c.label, str(c.n), *count_cells(c.counts)] for c in doc.configurations],
    )
    reasons = [[c.label, ", ".join(f"{k} {v}" for k, v in c.infra_reasons.items()) or "—"] for c in doc.configurations]
    lines += ["Infra errors by reason:", ""] + _table(["config", "reasons"], reasons)
    kmax = max((len(c.pass_at_k) for c in doc.configurations), default=0)
    ks = [k for k in (1, 2, 3, 5, 8, 10) if k <= kmax] or list(range(1, kmax + 1))
    if ks:

        def at(curve: list[float | None], k: int) -> str:  # configurations may reach different k
            return pct(curve[k - 1]) if k <= len(curve) else "—"

        rows = [[c.label] + [f"{at(c.pass_at_k, k)} / {at(c.pass_hat_k, k)}" for k in ks] for c in doc.configurations]
        lines += ["pass@k / pass^k (unbiased estimators, averaged over tasks):", ""]
        lines += _table(["config"] + [f"k={k}" for k in ks], rows)
    rows = [
        [
            c.label,
            str(c.spread.n_runs),
            pct(c.spread.mean),
            pct(c.spread.sd),
            f"{pct(c.spread.min)} .. {pct(c.spread.max)}",
        ]
        for c in doc.configurations
    ]
    basis = {c.spread.basis for c in doc.configurations}
    over = (
        "each source run the trials came from (a run directory or a job)"
        if basis == {"source runs"}
        else "each repeat index: attempt r of every task forms run r (a native sweep has no runs of its own)"
    )
    sr = doc.statistics.scoring_rules if doc.statistics else None
    extra_headers, extra = rules.spread_columns(sr, [c.label for c in doc.configurations])
    for row, more in zip(rows, extra):
        row += more
    lines += [f"Run-to-run spread (headroom's score of {over}; SD is the sample SD):", ""]
    lines += _table(["config", "repeats", "mean", "SD", "range", *extra_headers], rows)
    lines += [costs.NOTE, ""] + _table(costs.HEADERS, costs.cost_rows(doc.configurations))
    return lines


def exclusions_block(doc: ReportDocument) -> list[str]:
    ex = doc.exclusions
    lines = ["## Exclusions", "", f"Trials left out of {SCORE_EXCL}, by reason:", ""]
    rows = [[e.outcome, e.reason or "—", str(e.trials)] for e in ex.excluded_from_infra_excluded_score]
    lines += _table(["outcome", "reason", "trials"], rows or [["none", "—", "0"]])
    lines += [
        f"Tries retried after an infra error (kept on record, not counted): {ex.retried_tries}. "
        f"Tries abandoned by an interruption (re-run on resume, not counted): {ex.abandoned_tries}. "
        f"Tries still running (or orphaned by a crash; a resume settles them): {ex.running_tries}. "
        f"Planned trials without a result: {ex.unfinished_trials}.",
        "",
    ]
    return lines


def comparisons_block(stats: Statistics) -> list[str]:
    comp = stats.comparisons
    labels = stats.axis == "labels"
    mdd = stats.mdd
    against = f"Each configuration against the reference ({stats.reference})" + (
        "." if labels else " and against its neighbour."
    )
    lines = [
        "## Paired comparisons",
        "",
        f"{against} Two questions, two families of tests, each Holm-adjusted on its own. "
        "**Across tasks** (would the gap hold on new tasks like these? tasks are the sampling unit): the mean "
        "per-task difference in pass rate with its 95% t interval, and the paired t-test over tasks"
        + (" — the headline test when configurations are agents or models. " if labels else ". ")
        + f"**On these tasks** (conditional on the task set; family of {comp.family_size} tests): the sign "
        "test on tasks solved by a strict majority of attempts under only one side (+B-only/−A-only), CMH "
        f"stratified by task over all attempts on {SCORE_FAIL} and on {SCORE_EXCL}, and the exact "
        "test on infra-error rates (the method that ran is named).",
        "",
    ]
    rows = []
    for it in comp.items:
        s, x, inf = it.score, it.score_infra_excluded, it.infra
        tp = s.paired
        rows.append(
            [
                f"{it.a} → {it.b}",
                pts(s.diff),
                interval_pts(tp.mean_task_diff, tp.mean_task_diff_low, tp.mean_task_diff_high),
                f"{pval(tp.t_p)} ({pval(tp.t_p_holm)}), {tp.n_tasks} tasks",
                f"{sign_counts(s.sign)}: {pval(s.sign.p)} ({pval(s.sign.p_holm)})",
                f"{pval(s.cmh.p)} ({pval(s.cmh.p_holm)})",
                f"{pts(x.diff)}: {pval(x.cmh.p)} ({pval(x.cmh.p_holm)})",
                f"{pct(inf.rate_a)} → {pct(inf.rate_b)}",
                f"{pval(inf.p)} ({pval(inf.p_holm)}) {inf.method}",
            ]
        )
    lines += _table(
        [
            "comparison",
            SCORE_DIFF,
            "per-task mean diff [95% CI]",
            "paired t over tasks p (Holm)",
            "sign test +B/−A: p (Holm)",
            "CMH p (Holm)",
            f"{SCORE_EXCL}: diff, CMH p (Holm)",
            INFRA_RATE,
            "exact infra test p (Holm)",
        ],
        rows,
    )
    lines += [f"**{w}**." for w in infra_warnings(comp.items)] + ([""] if infra_warnings(comp.items) else [])
    cut = clipped_note(comp.items)
    lines += [f"Note: {cut}.", ""] if cut else []
    lines += [
        f"Minimum detectable difference at 80% power (reference {mdd.config or '—'}): "
        f"{gap(mdd.mdd)} on these tasks (two independent samples of trials); "
        f"{gap(mdd.mdd_with_design_effect)} for two independent samples of new tasks (with the task design "
        "effect; an upper bound: the paired tests above need less).",
        "",
    ]
    return lines


def trends_block(stats: Statistics) -> list[str]:
    tr = stats.trends
    if not tr:
        return []
    lines = [
        "## Trend across multipliers",
        "",
        f"Ordered by {tr.score}; primary test: {tr.primary}. "
        "Cochran–Armitage is the classical test (variance with N; statsmodels' linear-by-linear variant, with "
        "N − 1, is in the JSON).",
        "",
    ]
    rows = []
    for name, t in (("pass", tr.pass_), ("infra_error", tr.infra_error)):
        ca, cl = t.cochran_armitage, t.clustered
        z = ca.z_classic
        rows.append(
            [
                name,
                "—" if z is None else f"z={z:.2f}, p={pval(ca.p_classic)} ({ca.direction or '—'})",
                f"p={pval(cl.p)} ({cl.direction or '—'})" if cl.p is not None else f"— ({cl.note or 'not testable'})",
            ]
        )
    return lines + _table(
        ["rate", "Cochran–Armitage (classical)", "clustered by task (permutation p within tasks)"], rows
    )


def calibration_block(stats: Statistics) -> list[str]:
    cal = stats.calibration
    if cal is None:
        return []
    margin = cal.margin
    lines = [
        "## Calibration recommendation",
        "",
        CALIBRATION_RULE.format(margin="—" if margin is None else f"{100 * margin:g}"),
        "",
    ]
    if cal.status == "recommended":
        lines += [
            f"**Publish with limit {cal.recommended_label}** (limit {limit(cal.recommended_limit_multiplier)}).",
            "",
            cal.summary or "",
            "",
        ]
        lines += [f"- {r}" for r in cal.reasons] + [""]
    else:
        lines += ["**No recommendation**: the data cannot carry the rule.", ""]
        lines += [f"- {r}" for r in cal.reasons] + [""]
    if cal.score_changes_at_label:
        lines += [f"More headroom starts to change the score at: {cal.score_changes_at_label}.", ""]
    applied = cal.mdd_applied
    if applied is not None and applied.mdd is not None:
        lines += [
            f"Minimum detectable difference the decision applied ({applied.config}): "
            f"{gap(applied.mdd)} — {applied.label}.",
            "",
        ]
    rows = calibration_rows(cal)
    if rows:
        lines += _table(CALIBRATION_HEADERS, rows)
    return lines


def tasks_block(stats: Statistics) -> list[str]:
    labels = stats.config_order
    rows = []
    for t in stats.tasks:
        cells = []
        for lab in labels:
            cell = t.configs.get(lab)
            if not cell:
                cells.append("—")
                continue
            ratio = cell.peak_memory_to_limit_max
            cells.append(
                f"{cell.passed}/{cell.n} pass, {cell.infra_errors} infra"
                + (f", {cell.abstained} abstained" if cell.abstained else "")
                + (f", {cell.timeouts} timeout{'s' if cell.timeouts > 1 else ''}" if cell.timeouts else "")
                + (f", peak {ratio:.2f}x limit" if ratio is not None else "")
            )
        rows.append([t.task_id, t.cluster_id] + cells)
    return ["## Per task", ""] + _table(["task", "cluster"] + labels, rows)


def summary_block(doc: ReportDocument) -> list[str]:
    """The section every format opens with (orchestrator/report/summary.py)."""
    if not doc.configurations:
        return []
    out = ["## Summary", "", "Headline per configuration, with 95% intervals:", ""]
    out += _table(summary.headers(doc), summary.rows(doc))
    for line in summary.lines(doc):
        if line.startswith("  "):  # one item per configuration (the trials that move, by reason)
            out += [f"- {line.strip()}"]
        else:
            out += ([""] if out[-1].startswith("- ") else []) + [line, ""]
    return out


def render(doc: ReportDocument) -> str:
    """The report as Markdown. Every string of ``doc`` is escaped first (orchestrator/report/safe.py): whatever
    the blocks interpolate renders as the text it is, never as markup or HTML."""
    doc = safe.for_markdown(doc)
    run = doc.run
    lines = [f"# headroom report — {run.name} ({run.run_id})", ""] + summary_block(doc) + inferred.markdown(doc)
    lines += checks.banner(doc) + setup_block(doc) + provenance_block(doc) + trust_lines(doc.trust)
    stats = doc.statistics
    if not doc.configurations or stats is None:
        return "\n".join(lines + ["No finished trials yet.", ""])
    # An import's own rule is its headline: its section leads; a native run's named rules follow the exclusions.
    lead = rules.leads(doc)
    lines += (
        (rules.markdown(doc) if lead else [])
        + metrics_block(doc)
        + exclusions_block(doc)
        + ([] if lead else rules.markdown(doc))
        + checks.markdown(doc)
    )
    lines += comparisons_block(stats) + trends_block(stats) + calibration_block(stats) + tasks_block(stats)
    if stats.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in stats.notes] + [""]
    return "\n".join(lines)
