"""Render a two-run comparison (``headroom runs compare``) from its typed document.

The renderers take the :class:`~orchestrator.report.model.ComparisonDocument`; a dict (what ``headroom
runs compare --format json`` prints, or what older callers hold) is validated into it first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

from orchestrator.report import rules, safe, tables
from orchestrator.report.labels import agent_label
from orchestrator.report.model import ComparisonDocument, RunRef
from orchestrator.report.text import clipped_note, gap, interval_pts, pct, pts, pval, rate, seconds, sign_counts, usd
from orchestrator.spec.analysis import ComparisonItem, ConfigStats
from orchestrator.stats.glossary import INFRA_RATE, SCORE_EXCL, SCORE_FAIL


def typed(doc: ComparisonDocument | dict[str, Any]) -> ComparisonDocument:
    return doc if isinstance(doc, ComparisonDocument) else ComparisonDocument.model_validate(doc)


def _agent(side: RunRef) -> str:
    """The side's agent as a person names it: the user's --label, else its name (never "external" or "imported")."""
    return side.label or (agent_label(side.agent.model_dump()) if side.agent else None) or "unrecorded"


def _who(side: RunRef) -> str:
    model = (side.model.name if side.model else None) or "unrecorded"
    return f"{side.run_id} ({side.name}; agent {_agent(side)}; model {model})"


COST_HEADERS = [
    "run: configuration",
    SCORE_FAIL,
    "cost / trial",
    "cost / solved",
    "tokens / trial",
    "tokens / solved",
    "latency / trial",
    "cost, tokens reported",
]


def _sides(doc: ComparisonDocument) -> list[tuple[str, ConfigStats]]:
    """(``A (agent): label``, configuration block) for each configuration of each run, on the shared tasks."""
    out = []
    for key, ref in (("A", doc.a), ("B", doc.b)):
        run = doc.statistics.runs.get(key)
        for c in run.configs if run else []:
            out.append((f"{key} ({_agent(ref)}): {c.label}", c))
    return out


def _tokens(c: ConfigStats) -> float | None:
    k = c.cost
    if k.tokens_in_per_attempt is None and k.tokens_out_per_attempt is None:
        return None
    return (k.tokens_in_per_attempt or 0.0) + (k.tokens_out_per_attempt or 0.0)


def _tok(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _ci(shown: str, ci: list[float] | None, fmt: Callable[[float | None], str]) -> str:
    """``$0.0368 [$0.0306 – $0.0433]``: a figure with its 95% interval (none: too few tasks to say)."""
    if shown == "—" or ci is None:
        return shown
    return f"{shown} [{fmt(ci[0])} – {fmt(ci[1])}]"


def cost_rows(doc: ComparisonDocument) -> list[list[str]]:
    """Per configuration of each run: the headline with its interval beside cost, tokens and latency per trial and
    per solved task, each with its 95% interval, and how many trials reported cost and tokens."""
    rows = []
    for name, c in _sides(doc):
        k = c.cost
        rows.append(
            [
                name,
                rate(c.score_infra_as_failure),
                _ci(usd(k.cost_per_attempt_usd), k.cost_per_attempt_ci, usd),
                _ci(usd(k.cost_per_solved_usd), k.cost_per_solved_ci, usd),
                _ci(_tok(_tokens(c)), k.tokens_per_attempt_ci, _tok),
                _ci(_tok(k.tokens_per_solved), k.tokens_per_solved_ci, _tok),
                _ci(seconds(k.latency_per_attempt_s), k.latency_per_attempt_ci, seconds),
                f"{k.n_cost}/{k.n}, {k.n_tokens}/{k.n}",
            ]
        )
    return rows


def usage_note(doc: ComparisonDocument) -> str:
    """How the cost, token and latency intervals were made (said once under the table)."""
    method = next((c.cost.usage_interval_method for _, c in _sides(doc) if c.cost.usage_interval_method), None)
    return (
        f"[low – high]: 95% interval, {method}. Per solved task = total / passes, over the trials that reported the "
        "figure. No interval: fewer than two tasks reported it, or a resample held no pass."
        if method
        else "No intervals: this comparison was made before headroom computed them."
    )


PARETO_HEADERS = ["run: configuration", SCORE_FAIL, "cost / trial", "on the cost/score front"]


def pareto_rows(doc: ComparisonDocument) -> list[list[str]]:
    """The configurations by cost per trial, each marked on the cost/score Pareto front or dominated (another
    configuration scores at least as well for no more cost, and is better in one). Configurations without a
    reported cost are left out (their cost is unknown, not zero)."""
    points = [
        (name, c.score_infra_as_failure.estimate, c.cost.cost_per_attempt_usd)
        for name, c in _sides(doc)
        if c.cost.cost_per_attempt_usd is not None and c.score_infra_as_failure.estimate is not None
    ]
    rows = []
    for name, score, cost in sorted(points, key=lambda p: (p[2], -(p[1] or 0.0))):
        assert score is not None and cost is not None
        by = [
            n
            for n, s, k in points
            if n != name and s is not None and k is not None and s >= score and k <= cost and (s > score or k < cost)
        ]
        rows.append([name, pct(score), usd(cost), "yes" if not by else f"no: dominated by {', '.join(by)}"])
    return rows


PARETO_NOTE = (
    "On the front: no other configuration scores at least as well for no more cost per trial, on the estimates. "
    "Read the intervals of scores and costs above before calling one better."
)


def _rows(doc: ComparisonDocument) -> list[list[str]]:
    """One row per compared configuration pair. Scores come from the comparison itself (the tasks both runs
    hold, where both configurations ran), never from the whole runs, so score B − score A is the B − A column."""
    rows = []
    for it in doc.statistics.comparisons.items:
        s, inf, x = it.score, it.infra, it.score_infra_excluded
        tp = s.paired
        rows.append(
            [
                f"{it.a} vs {it.b}",
                str(it.n_tasks if it.n_tasks is not None else tp.n_tasks),
                rate(s.a),
                rate(s.b),
                pts(s.diff),
                interval_pts(tp.mean_task_diff, tp.mean_task_diff_low, tp.mean_task_diff_high),
                f"p={pval(tp.t_p)} (Holm {pval(tp.t_p_holm)})",
                f"{sign_counts(s.sign)} p={pval(s.sign.p)} (Holm {pval(s.sign.p_holm)})",
                f"{pval(s.cmh.p)} (Holm {pval(s.cmh.p_holm)})",
                f"{pts(x.diff)} p={pval(x.cmh.p)} (Holm {pval(x.cmh.p_holm)})",
                f"{pct(inf.rate_a)} vs {pct(inf.rate_b)} p={pval(inf.p)} (Holm {pval(inf.p_holm)})",
            ]
        )
    return rows


HEADERS = [
    "configurations",
    "shared tasks",
    f"{SCORE_FAIL}: A",
    "B",
    "B − A",
    "per-task mean diff [95% CI]",
    "paired t over tasks",
    "sign test +B/−A (tasks)",
    "CMH (by task)",
    f"{SCORE_EXCL}: diff, CMH",
    f"{INFRA_RATE}s, exact test",
]


def infra_warnings(items: list[ComparisonItem]) -> list[str]:
    """A warning for each compared pair whose infra-error rates differ: its infra-excluded difference then
    compares trials that the errors chose (an agent whose own OOM kills end its hard trials leaves only its
    easy ones), so only the headline, infra errors counted as failures, compares like with like."""
    out = []
    for it in items:
        inf = it.infra
        if inf.rate_a is None or inf.rate_b is None or inf.x_a * inf.n_b == inf.x_b * inf.n_a:
            continue
        out.append(
            f"warning: {it.a} vs {it.b}: the {INFRA_RATE}s differ ({pct(inf.rate_a)} vs {pct(inf.rate_b)}, exact "
            f"test p={pval(inf.p)}, Holm {pval(inf.p_holm)}): {SCORE_EXCL} leaves out different trials on each side, "
            f"chosen by the errors themselves (an agent's own OOM kills drop its hardest trials); read "
            f"{SCORE_FAIL}, which counts every trial"
        )
    return out


def _notes(doc: ComparisonDocument) -> list[str]:
    stats = doc.statistics
    notes = infra_warnings(stats.comparisons.items) + list(stats.notes)
    for side, tasks in stats.tasks_only_in.items():
        if tasks:
            notes.append(f"tasks only in {side} (excluded from every figure above): {', '.join(tasks)}")
    if doc.tasks_with_different_content:
        notes.append("tasks whose content differs between the runs: " + ", ".join(doc.tasks_with_different_content))
    cut = clipped_note(stats.comparisons.items)
    if cut:
        notes.append(cut)
    mdd = stats.mdd
    notes.append(
        f"minimum detectable difference of this design at 80% power (unpaired): {gap(mdd.mdd)} on the "
        f"shared tasks, {gap(mdd.mdd_with_design_effect)} for independent samples of new tasks (with the "
        "task design effect; an upper bound, the paired tests need less)"
    )
    notes.append(
        f"Holm families: on these tasks, every sign, CMH (both scores) and exact infra test above "
        f"({stats.comparisons.family_size} tests); across tasks, the paired t-tests over tasks"
    )
    return notes


def basis(doc: ComparisonDocument) -> str:
    """What every figure is computed on: the shared tasks (the same sentence in every format)."""
    n = doc.statistics.shared_tasks
    return (
        f"Every figure is computed on the {n} task(s) both runs hold, configuration by configuration on the "
        "tasks both configurations ran (column 'shared tasks'); tasks only one run holds are listed below."
    )


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return (
        ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        + ["| " + " | ".join(r) + " |" for r in rows]
        + [""]
    )


def markdown(doc: ComparisonDocument | dict[str, Any]) -> str:
    doc = safe.for_markdown(typed(doc))  # every string as text, never markup (orchestrator/report/safe.py)
    lines = [
        "# headroom comparison",
        "",
        f"- A: {_who(doc.a)}",
        f"- B: {_who(doc.b)}",
        "",
        basis(doc),
        "",
        f"Scores are {SCORE_FAIL}; intervals Wilson 95%. Across tasks (the claim about "
        "the benchmark's population of tasks, and the headline test): mean per-task difference in pass rate with "
        "its 95% t interval, paired t-test over tasks. On these tasks only: sign test on tasks solved by a strict "
        "majority of attempts under only one run (+B-only/−A-only); CMH stratified by task on both scores; the exact "
        "test on infra-error rates. p Holm-adjusted within each family, printed beside every raw p.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(doc)]
    lines += [""] + [f"- {n}" for n in _notes(doc)]
    lines += ["", "## Cost, tokens and latency", "", "Per configuration of each run, on the shared tasks:", ""]
    lines += _md_table(COST_HEADERS, cost_rows(doc)) + [usage_note(doc), ""]
    front = pareto_rows(doc)
    lines += ["## Cost and score", ""]
    lines += (_md_table(PARETO_HEADERS, front) + [PARETO_NOTE, ""]) if front else ["No cost recorded: no front.", ""]
    lines += rules.comparison_markdown(doc)
    return "\n".join(lines) + "\n"


def print_table(doc: ComparisonDocument | dict[str, Any], console: Console) -> None:
    doc = safe.for_terminal(typed(doc))  # every string as text, never markup or an escape sequence
    console.print(f"A: {_who(doc.a)}\nB: {_who(doc.b)}\n{basis(doc)}")
    # Three tables of one question each (across tasks; on these tasks; infra errors): one of all eleven columns
    # would not fit 160 columns.
    rows = _rows(doc)
    for title, cols in (
        ("Paired comparison, A vs B: scores and the test across tasks", range(0, 7)),
        ("Paired comparison, A vs B: tests on these tasks", (0, 7, 8)),
        (f"Paired comparison, A vs B: {SCORE_EXCL} and {INFRA_RATE}s", (0, 9, 10)),
    ):
        tables.print_table(
            console, title, [HEADERS[i] for i in cols], [[r[i] for i in cols] for r in rows], wrap=[0]
        )  # long labels fold between "A:... vs" and "B:..."
    for n in _notes(doc):
        console.print(f"- {n}")
    # Two tables: with their intervals, the seven figures of a configuration would not fit 160 columns in one.
    usage = cost_rows(doc)
    for heading, picked in (
        ("Cost per configuration (shared tasks)", (0, 1, 2, 3, 7)),
        ("Tokens and latency per configuration (shared tasks)", (0, 1, 4, 5, 6)),
    ):
        tables.print_table(
            console,
            heading,
            [COST_HEADERS[i] for i in picked],
            [[r[i] for i in picked] for r in usage],
            right=range(1, len(picked)),
            wrap=[0],
        )
    console.print(usage_note(doc))
    front = pareto_rows(doc)
    if front:
        tables.print_table(console, "Cost and score: the Pareto front", PARETO_HEADERS, front, wrap=[3])
        console.print(PARETO_NOTE)
    else:
        console.print("No cost recorded: no cost/score front.")
    sr = doc.statistics.scoring_rules
    body = rules.comparison_rows(sr, short=True) if sr else []
    if body:
        tables.print_table(
            console,
            "Scores under named rules (each run on the tasks both hold)",
            rules.COMPARISON_HEADERS,
            body,
            wrap=[0, 5, 6],
        )
