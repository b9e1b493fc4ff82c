"""The report on a terminal: the numbers a reader acts on first, with their intervals and tests."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from orchestrator.report import checks, costs
from orchestrator.report.markdown import retry_text, timeout_text
from orchestrator.report.outcomes import OUTCOME_HEADERS, count_cells
from orchestrator.report.tables import print_table
from orchestrator.report.text import gap, interval_pts, limit, pct, pts, pval, rate, sign_counts


def print_report(doc: dict[str, Any], console: Console) -> None:
    run = doc["run"]
    host = doc["provenance"].get("backend", {})
    console.print(f"[bold]run {run['run_id']}[/] ({run['name']}, {run['status']}, "
                  f"{run['trials_finished']}/{run['trials_planned']} trials) — enforcement {run['enforcement']}, "
                  f"isolation {run.get('isolation', 'unrecorded')}, "
                  + (f"kernel {host['kernel']}, " if host.get("kernel") else "")
                  + f"{doc['task_provenance_mix']['n_tasks']} tasks")
    if not (doc["provenance"].get("import")):  # the policies headroom ran under; an import has its source's
        console.print(f"timeout multiplier {timeout_text(doc['experiment'])}; retries: {retry_text(doc['experiment'])}")
    if run.get("isolation", "unrecorded") in ("none", "unrecorded"):
        console.print(f"[bold red]isolation {run.get('isolation', 'unrecorded')}[/]: trials were not sandboxed; "
                      "an agent could have read or changed what graded it")
    if run.get("storage_limit") is False:
        console.print("[yellow]storage limit not enforced[/] by this backend")
    checks.print_terminal(doc, console)
    if not doc["configurations"]:
        console.print("no finished trials yet")
        return
    stats = doc["statistics"]
    labels = doc["run"].get("axis") == "labels"  # agents/models/imports: no resource axis, trend or calibration
    headers = ["config", *([] if labels else ["request", "limit"]), "n", *OUTCOME_HEADERS.values(),
               "pass rate", "infra-error rate", "abstention rate", "score excl. infra", "cluster-level"]
    rows = []
    for c in doc["configurations"]:
        k = c["counts"]
        axis_cells = [] if labels else [f"{c['request_multiplier']:g}x", limit(c["limit_multiplier"])]
        rows.append([c["label"], *axis_cells, str(c["n"]),
                     *count_cells(k),
                     rate(c["pass_rate"]), rate(c["infra_error_rate"]), rate(c["abstention_rate"]),
                     rate(c["score_infra_excluded"]),
                     pct(c["clusters"]["cluster_score"])])
    print_table(console, "Outcomes by configuration (rates with Wilson 95% intervals)", headers, rows,
                right=range(1, len(headers)))
    console.print(f"headline: {stats.get('headline')} (infra errors count as failures). "
                  f"Infra reasons: " + "; ".join(
                      f"{c['label']}: " + (", ".join(f"{r} {n}" for r, n in c["infra_reasons"].items()) or "none")
                      for c in doc["configurations"]))
    print_table(console, "Cost and latency", costs.HEADERS, costs.cost_rows(doc["configurations"]),
                right=range(1, len(costs.HEADERS)))
    console.print(costs.NOTE)
    ref = stats.get("reference")
    rows = []
    for it in (stats.get("comparisons") or {}).get("items", []):
        if it["a"] != ref:
            continue
        s, x, inf = it["score"], it["score_infra_excluded"], it["infra"]
        tp = s.get("paired") or {}
        rows.append([it["b"], pts(s.get("diff")),
                     interval_pts(tp.get("mean_task_diff"), tp.get("mean_task_diff_low"), tp.get("mean_task_diff_high")),
                     f"{pval(tp.get('t_p'))} / {pval(tp.get('t_p_holm'))}",
                     f"{sign_counts(s['sign'])} {pval(s['sign']['p'])} / {pval(s['sign'].get('p_holm'))}",
                     f"{pval(s['cmh']['p'])} / {pval(s['cmh'].get('p_holm'))}",
                     f"{pts(x.get('diff'))}: {pval(x['cmh']['p'])} / {pval(x['cmh'].get('p_holm'))}",
                     f"{pct(inf.get('rate_a'))} → {pct(inf.get('rate_b'))}",
                     f"{pval(inf.get('p'))} / {pval(inf.get('p_holm'))}"])
    print_table(console, f"Against the reference {ref} (p raw / Holm-adjusted)",
                ["config", "score diff", "per-task diff [95% CI]", "paired t (tasks)", "sign test +B/−A", "CMH (by task)",
                 "infra-excl. diff, CMH", "infra rate", "exact infra test"], rows)
    mdd = stats.get("mdd") or {}
    if labels:
        console.print(f"Minimum detectable difference: {gap(mdd.get('mdd'))} on these tasks, "
                      f"{gap(mdd.get('mdd_with_design_effect'))} with the task design effect. "
                      "No trend test or calibration: the configurations are labels, not resource levels.")
        return
    tr = stats.get("trends") or {}
    inf_tr = (tr.get("infra_error") or {}).get("clustered") or {}
    pass_tr = (tr.get("pass") or {}).get("clustered") or {}
    console.print(f"trend across multipliers (clustered by task): infra-error rate {inf_tr.get('direction') or '—'} "
                  f"p={pval(inf_tr.get('p'))}; pass rate {pass_tr.get('direction') or '—'} p={pval(pass_tr.get('p'))}. "
                  f"Minimum detectable difference: {gap(mdd.get('mdd'))} on these tasks, "
                  f"{gap(mdd.get('mdd_with_design_effect'))} with the task design effect.")
    cal = stats.get("calibration") or {}
    if cal.get("status") == "recommended":
        console.print(f"[bold green]calibration:[/] {cal.get('summary')}")
    else:
        need = (cal.get("power") or {}).get("attempts_per_task_needed")
        console.print(f"[bold yellow]calibration: no recommendation[/] — {'; '.join(cal.get('reasons', []))}"
                      + (f". About {need} attempts per task and configuration would be needed." if need else "."))
