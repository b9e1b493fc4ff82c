"""Render a two-run comparison (``headroom compare``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from orchestrator.report import tables
from orchestrator.report.text import gap, pct, pts, pval, rate


def _who(side: dict[str, Any]) -> str:
    model = (side.get("model") or {}).get("name") or "unrecorded model"
    agent = (side.get("agent") or {}).get("kind")
    return f"{side['run_id']} ({side['name']}; agent {agent}; model {model})"


def _rows(doc: dict[str, Any]) -> list[list[str]]:
    stats = doc["statistics"]
    blocks = {f"{name}:{c['label']}": c for name, r in stats["runs"].items() for c in r["configs"]}
    rows = []
    for it in stats["comparisons"]["items"]:
        s, inf = it["score"], it["infra"]
        rows.append([
            f"{it['a']} vs {it['b']}", rate(blocks.get(it["a"], {}).get("score_infra_as_failure")),
            rate(blocks.get(it["b"], {}).get("score_infra_as_failure")), pts(s.get("diff")),
            f"+{s['sign']['a_only']}/-{s['sign']['b_only']} p={pval(s['sign']['p'])} (Holm {pval(s['sign'].get('p_holm'))})",
            f"{pval(s['cmh']['p'])} (Holm {pval(s['cmh'].get('p_holm'))})",
            f"{pct(inf.get('rate_a'))} vs {pct(inf.get('rate_b'))} p={pval(inf.get('p'))}",
        ])
    return rows


HEADERS = ["configurations", "score A", "score B", "B − A", "sign test (tasks)", "CMH (by task)", "infra-error rates"]


def _notes(doc: dict[str, Any]) -> list[str]:
    stats = doc["statistics"]
    notes = list(stats.get("notes", []))
    only = stats.get("tasks_only_in", {})
    for side, tasks in only.items():
        if tasks:
            notes.append(f"tasks only in {side} (excluded from paired tests): {', '.join(tasks)}")
    if doc["tasks_with_different_content"]:
        notes.append("tasks whose content differs between the runs: " + ", ".join(doc["tasks_with_different_content"]))
    mdd = stats.get("mdd") or {}
    notes.append(f"minimum detectable difference of this design at 80% power: {gap(mdd.get('mdd'))}")
    return notes


def markdown(doc: dict[str, Any]) -> str:
    lines = ["# headroom comparison", "", f"- A: {_who(doc['a'])}", f"- B: {_who(doc['b'])}", "",
             "Scores count infra errors as failures (headline); intervals Wilson 95%; sign test on tasks solved by "
             "a strict majority of attempts under only one run; CMH stratified by task; p Holm-adjusted.", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(doc)]
    lines += [""] + [f"- {n}" for n in _notes(doc)]
    return "\n".join(lines) + "\n"


def print_table(doc: dict[str, Any], console: Console) -> None:
    console.print(f"A: {_who(doc['a'])}\nB: {_who(doc['b'])}")
    tables.print_table(console, "Paired comparison, A vs B", HEADERS, _rows(doc))
    for n in _notes(doc):
        console.print(f"- {n}")
