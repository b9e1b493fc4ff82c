"""Render a two-run comparison (``headroom compare``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from orchestrator.report import rules, tables
from orchestrator.report.glossary import INFRA_RATE, SCORE_EXCL, SCORE_FAIL
from orchestrator.report.text import clipped_note, gap, interval_pts, pct, pts, pval, rate, sign_counts


def _who(side: dict[str, Any]) -> str:
    model = (side.get("model") or {}).get("name") or "unrecorded"
    agent_spec = side.get("agent") or {}
    agent = ", ".join(agent_spec.get("names") or []) if agent_spec.get("kind") == "imported" else agent_spec.get("kind")
    return f"{side['run_id']} ({side['name']}; agent {agent or 'unrecorded'}; model {model})"


def _rows(doc: dict[str, Any]) -> list[list[str]]:
    """One row per compared configuration pair. Scores come from the comparison itself (the tasks both runs
    hold, where both configurations ran), never from the whole runs, so score B − score A is the B − A column."""
    stats = doc["statistics"]
    rows = []
    for it in stats["comparisons"]["items"]:
        s, inf, x = it["score"], it["infra"], it["score_infra_excluded"]
        tp = s.get("paired") or {}
        rows.append([
            f"{it['a']} vs {it['b']}", str(it.get("n_tasks", tp.get("n_tasks", 0))), rate(s.get("a")), rate(s.get("b")),
            pts(s.get("diff")),
            interval_pts(tp.get("mean_task_diff"), tp.get("mean_task_diff_low"), tp.get("mean_task_diff_high")),
            f"p={pval(tp.get('t_p'))} (Holm {pval(tp.get('t_p_holm'))})",
            f"{sign_counts(s['sign'])} p={pval(s['sign']['p'])} (Holm {pval(s['sign'].get('p_holm'))})",
            f"{pval(s['cmh']['p'])} (Holm {pval(s['cmh'].get('p_holm'))})",
            f"{pts(x.get('diff'))} p={pval(x['cmh']['p'])} (Holm {pval(x['cmh'].get('p_holm'))})",
            f"{pct(inf.get('rate_a'))} vs {pct(inf.get('rate_b'))} p={pval(inf.get('p'))} (Holm {pval(inf.get('p_holm'))})",
        ])
    return rows


HEADERS = ["configurations", "shared tasks", f"{SCORE_FAIL}: A", "B", "B − A", "per-task mean diff [95% CI]",
           "paired t over tasks", "sign test +B/−A (tasks)", "CMH (by task)", f"{SCORE_EXCL}: diff, CMH",
           f"{INFRA_RATE}s, exact test"]


def _notes(doc: dict[str, Any]) -> list[str]:
    stats = doc["statistics"]
    notes = list(stats.get("notes", []))
    only = stats.get("tasks_only_in", {})
    for side, tasks in only.items():
        if tasks:
            notes.append(f"tasks only in {side} (excluded from every figure above): {', '.join(tasks)}")
    if doc["tasks_with_different_content"]:
        notes.append("tasks whose content differs between the runs: " + ", ".join(doc["tasks_with_different_content"]))
    cut = clipped_note(stats["comparisons"]["items"])
    if cut:
        notes.append(cut)
    mdd = stats.get("mdd") or {}
    notes.append(f"minimum detectable difference of this design at 80% power (unpaired): {gap(mdd.get('mdd'))} on the "
                 f"shared tasks, {gap(mdd.get('mdd_with_design_effect'))} for independent samples of new tasks (with the "
                 "task design effect; an upper bound, the paired tests need less)")
    comp = stats["comparisons"]
    notes.append(f"Holm families: on these tasks, every sign, CMH (both scores) and exact infra test above "
                 f"({comp.get('family_size')} tests); across tasks, the paired t-tests over tasks")
    return notes


def basis(doc: dict[str, Any]) -> str:
    """What every figure is computed on: the shared tasks (the same sentence in every format)."""
    n = doc["statistics"].get("shared_tasks")
    return (f"Every figure is computed on the {n} task(s) both runs hold, configuration by configuration on the "
            "tasks both configurations ran (column 'shared tasks'); tasks only one run holds are listed below.")


def markdown(doc: dict[str, Any]) -> str:
    lines = ["# headroom comparison", "", f"- A: {_who(doc['a'])}", f"- B: {_who(doc['b'])}", "", basis(doc), "",
             f"Scores are {SCORE_FAIL}; intervals Wilson 95%. Across tasks (the claim about "
             "the benchmark's population of tasks, and the headline test): mean per-task difference in pass rate with "
             "its 95% t interval, paired t-test over tasks. On these tasks only: sign test on tasks solved by a strict "
             "majority of attempts under only one run (+B-only/−A-only); CMH stratified by task on both scores; the exact "
             "test on infra-error rates. p Holm-adjusted within each family, printed beside every raw p.", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(doc)]
    lines += [""] + [f"- {n}" for n in _notes(doc)]
    lines += rules.comparison_markdown(doc)
    return "\n".join(lines) + "\n"


def print_table(doc: dict[str, Any], console: Console) -> None:
    console.print(f"A: {_who(doc['a'])}\nB: {_who(doc['b'])}\n{basis(doc)}")
    tables.print_table(console, "Paired comparison, A vs B", HEADERS, _rows(doc))
    for n in _notes(doc):
        console.print(f"- {n}")
    body = rules.comparison_rows((doc["statistics"] or {}).get("scoring_rules") or {"requested": []})
    if body:
        tables.print_table(console, "Scores under named rules (each run on the tasks both hold)",
                           rules.COMPARISON_HEADERS, [[escape(c) for c in row] for row in body])
