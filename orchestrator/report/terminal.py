"""The report on a terminal: the numbers a reader acts on first, with their intervals and tests."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from orchestrator.report import checks, costs, inferred, rules, safe, summary
from orchestrator.report.calibration import CALIBRATION_HEADERS, calibration_rows
from orchestrator.report.comparison import infra_warnings
from orchestrator.report.markdown import metrics_intro, retry_text, timeout_text
from orchestrator.report.outcomes import OUTCOME_HEADERS, count_cells
from orchestrator.report.tables import print_table
from orchestrator.report.text import (
    HEADLINE_NOTE,
    gap,
    interval_pts,
    limit,
    pct,
    pts,
    pval,
    rate,
    sign_counts,
)
from orchestrator.stats.glossary import (
    ABSTENTION_RATE,
    CLUSTER_SCORE,
    INFRA_RATE,
    SCORE_DIFF,
    SCORE_EXCL,
    SCORE_FAIL,
)

if TYPE_CHECKING:
    from orchestrator.report.model import ReportDocument


def print_summary(doc: ReportDocument, console: Console) -> None:
    """The first thing printed: headline per configuration, the recommendation, isolation and enforcement.

    ``doc`` is escaped for the terminal already (:func:`print_report`)."""
    names = summary.headers(doc)
    folded = ["\n".join(textwrap.wrap(h, 14)) for h in names]  # at their natural breaks: fits 100 columns
    t = Table(title="Summary (95% intervals)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, h in enumerate(folded):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    body = summary.rows(doc)
    for r in body:
        t.add_row(*r)
    widths = [max(cell_len(x) for x in [*h.split("\n"), *(r[i] for r in body)]) for i, h in enumerate(folded)]
    if sum(widths) + 3 * len(widths) <= console.width:
        console.print(t)
    else:  # a narrow console: split the columns like every other table, never cut a number
        print_table(console, "Summary (95% intervals)", names, body, right=range(1, len(names)))
    for line in summary.lines(doc):
        console.print(line)
    for line in inferred.lines(doc):  # verdicts inferred from imported traces, said apart
        console.print(line, soft_wrap=True)
    console.print()


def print_compact(doc: ReportDocument, console: Console, full: str) -> None:
    """What a sweep prints when it ends: the run's line, then the summary (headline per configuration with its
    intervals, the infra-error rate, the recommendation, isolation); ``full`` is the command for the rest."""
    doc = safe.for_terminal(doc)
    run = doc.run
    console.print(
        f"[bold]run {run.run_id}[/] ({run.name}, {run.status}, {run.trials_finished}/{run.trials_planned} trials)"
        f" — {doc.task_provenance_mix.n_tasks} tasks"
    )
    if doc.configurations:
        print_summary(doc, console)
    else:
        console.print("no finished trials yet")
    for w in infra_warnings(doc.statistics.comparisons.items if doc.statistics else []):
        console.print(f"[bold yellow]{w}[/]")
    console.print(f"the whole report: {safe.terminal_text(full)} (or --full-report)")


def print_report(doc: ReportDocument, console: Console) -> None:
    """The report on ``console``. Every string of ``doc`` is escaped first (orchestrator/report/safe.py): a name
    prints as the text it is, never as rich markup or a terminal escape sequence."""
    doc = safe.for_terminal(doc)
    run = doc.run
    host = doc.host
    console.print(
        f"[bold]run {run.run_id}[/] ({run.name}, {run.status}, "
        f"{run.trials_finished}/{run.trials_planned} trials) — enforcement {run.enforcement}, "
        f"isolation {run.isolation}, "
        + (f"kernel {host.kernel}, " if host.kernel else "")
        + f"{doc.task_provenance_mix.n_tasks} tasks"
    )
    if doc.configurations:
        print_summary(doc, console)
    if not doc.imported:  # the policies headroom ran under; an import has its source's
        console.print(f"timeout multiplier {timeout_text(doc.experiment)}; retries: {retry_text(doc.experiment)}")
    if run.isolation == "unknown (imported)":
        console.print(
            "isolation unknown (imported): headroom did not run these trials; how they were sandboxed, "
            "and whether limits bit, is not known"
        )
    elif run.isolation in ("none", "unrecorded"):
        console.print(
            f"[bold red]isolation {run.isolation}[/]: trials were not sandboxed; "
            "an agent could have read or changed what graded it"
        )
    if run.agent_sandbox is not None and run.agent_sandbox.startswith("none"):
        console.print(f"[bold red]{summary.host_agent(run.agent_sandbox).lstrip('; ')}[/]")
    if run.storage_limit is False:
        console.print("[yellow]storage limit not enforced[/] by this backend")
    checks.print_terminal(doc, console)
    stats = doc.statistics
    if not doc.configurations or stats is None:
        console.print("no finished trials yet")
        return
    if rules.leads(doc):  # an import: its own rule is the headline
        rules.print_terminal(doc, console)
    labels = doc.labels_axis  # agents/models/imports: no resource axis, trend or calibration
    # Counts and rates in two tables: one table of both would not fit 160 columns.
    headers = ["config", *([] if labels else ["request", "limit"]), "n", *OUTCOME_HEADERS.values()]
    rows = [
        [
            c.label,
            *([] if labels else [f"{c.request_multiplier:g}x", limit(c.limit_multiplier)]),
            str(c.n),
            *count_cells(c.counts),
        ]
        for c in doc.configurations
    ]
    print_table(console, "Outcomes by configuration (trials)", headers, rows, right=range(1, len(headers)))
    headers = ["config", SCORE_FAIL, SCORE_EXCL, INFRA_RATE, ABSTENTION_RATE, CLUSTER_SCORE]
    rows = [
        [
            c.label,
            rate(c.score_infra_as_failure),
            rate(c.score_infra_excluded),
            rate(c.infra_error_rate),
            rate(c.abstention_rate),
            pct(c.clusters.cluster_score),
        ]
        for c in doc.configurations
    ]
    print_table(console, "Rates by configuration (Wilson 95% intervals)", headers, rows, right=range(1, len(headers)))
    # The headline's two intervals are in the summary; what each answers is said once here.
    console.print(HEADLINE_NOTE.replace("*", ""))
    console.print(
        metrics_intro(doc).replace("**", "").replace("`", "")
        + " Infra reasons: "
        + "; ".join(
            f"{c.label}: " + (", ".join(f"{r} {n}" for r, n in c.infra_reasons.items()) or "none")
            for c in doc.configurations
        )
    )
    cost_cols, token_cols = [0, 1, 2, 3, 4, 5], [0, 6, 7, 8]  # latency and cost; tokens (costs.HEADERS)
    body = costs.cost_rows(doc.configurations)
    for title, cols in (("Latency and cost", cost_cols), ("Tokens", token_cols)):
        print_table(
            console,
            title,
            [costs.HEADERS[i] for i in cols],
            [[r[i] for i in cols] for r in body],
            right=range(1, len(cols)),
        )
    console.print(costs.NOTE)
    if not rules.leads(doc) and rules.beyond_headroom(doc):  # headroom's own two rules are the rates table above
        rules.print_terminal(doc, console)
    ref = stats.reference
    scores, infra = [], []
    for it in stats.comparisons.items:
        if it.a != ref:
            continue
        sc, x, inf = it.score, it.score_infra_excluded, it.infra
        tp = sc.paired
        scores.append(
            [
                it.b,
                pts(sc.diff),
                interval_pts(tp.mean_task_diff, tp.mean_task_diff_low, tp.mean_task_diff_high),
                f"{pval(tp.t_p)} / {pval(tp.t_p_holm)}",
                f"{sign_counts(sc.sign)} {pval(sc.sign.p)} / {pval(sc.sign.p_holm)}",
                f"{pval(sc.cmh.p)} / {pval(sc.cmh.p_holm)}",
            ]
        )
        infra.append(
            [
                it.b,
                f"{pts(x.diff)}: {pval(x.cmh.p)} / {pval(x.cmh.p_holm)}",
                f"{pct(inf.rate_a)} → {pct(inf.rate_b)}",
                f"{pval(inf.p)} / {pval(inf.p_holm)}",
            ]
        )
    if scores:  # a run of one configuration has nothing to compare
        print_table(
            console,
            f"Against the reference {ref}: {SCORE_FAIL} (p raw / Holm-adjusted)",
            ["config", SCORE_DIFF, "per-task diff [95% CI]", "paired t (tasks)", "sign test +B/−A", "CMH (by task)"],
            scores,
        )
        print_table(
            console,
            f"Against the reference {ref}: {SCORE_EXCL} and {INFRA_RATE} (p raw / Holm-adjusted)",
            ["config", f"{SCORE_EXCL}: diff, CMH", f"{INFRA_RATE}: reference → config", "exact infra test"],
            infra,
        )
        for w in infra_warnings([it for it in stats.comparisons.items if it.a == ref]):
            console.print(f"[bold yellow]{w}[/]")
    mdd = stats.mdd
    if labels:
        console.print(
            f"Minimum detectable difference: {gap(mdd.mdd)} on these tasks, "
            f"{gap(mdd.mdd_with_design_effect)} with the task design effect. "
            "No trend test or calibration: the configurations are labels, not resource levels."
        )
        return
    tr = stats.trends
    inf_tr = tr.infra_error.clustered if tr else None
    pass_tr = tr.pass_.clustered if tr else None
    console.print(
        "trend across multipliers (clustered by task, permutation p within tasks): "
        f"{INFRA_RATE} {(inf_tr.direction if inf_tr else None) or '—'} p={pval(inf_tr.p if inf_tr else None)}; "
        f"{SCORE_FAIL} {(pass_tr.direction if pass_tr else None) or '—'} "
        f"p={pval(pass_tr.p if pass_tr else None)}. "
        f"Minimum detectable difference (unpaired): {gap(mdd.mdd)} on these tasks, "
        f"{gap(mdd.mdd_with_design_effect)} for independent samples of new tasks."
    )
    cal = stats.calibration
    if cal is not None and cal.status == "recommended":
        console.print(f"[bold green]calibration:[/] {cal.summary}")
        for r in cal.reasons:
            console.print(f"  because: {r}")
        rows = calibration_rows(cal)
        if rows:
            print_table(
                console,
                f"Calibration evidence, each candidate vs {cal.reference} (margin ±{100 * (cal.margin or 0):g} pts)",
                CALIBRATION_HEADERS,
                rows,
                wrap=[len(CALIBRATION_HEADERS) - 1],
            )
        applied = cal.mdd_applied
        if applied is not None and applied.mdd is not None:
            console.print(
                f"minimum detectable difference the decision applied ({applied.config}): "
                f"{gap(applied.mdd)} — {applied.label}."
            )
    else:
        console.print(f"[bold yellow]calibration: no recommendation[/] — {'; '.join(cal.reasons if cal else [])}.")
