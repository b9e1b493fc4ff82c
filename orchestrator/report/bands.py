"""The one-page summary a maintainer publishes beside the benchmark: each task's floor and ceiling, and why."""

from __future__ import annotations

from typing import Any

from orchestrator.report.text import mib, pct, pval


def _interval(lt: dict[str, Any]) -> str:
    return f"{100 * lt['diff']:+.1f} pts [{100 * lt['diff_low']:+.1f}, {100 * lt['diff_high']:+.1f}]"


def summary_markdown(doc: dict[str, Any]) -> str:
    run = doc["run"]
    bands = doc["bands"]
    p = doc["parameters"]
    res = doc["reserved_memory"]
    lines = [
        f"# Resource bands — {run['name']}",
        "",
        f"From run `{run['run_id']}` ({run['backend']} backend, enforcement {run['enforcement']}; "
        f"enforcement canary: {doc.get('canary_status') or 'not recorded'}), "
        f"{doc['n_trials']} trials, configurations {', '.join(doc['configurations'])}.",
        "",
        "Each task publishes a **floor** (the guaranteed request: Harbor's `memory_mb` / `cpus`) and a **ceiling** "
        "(the hard kill limit: headroom's `memory_limit_mb` / `cpus_limit`). "
        "Floor = 95th percentile of the task's peak memory at the generous limits (trials not OOM-killed). "
        f"Ceiling = the smallest tested limit from which every larger tested limit has an infra-error rate within noise "
        f"of unbounded: exact test (Boschloo) not significant at alpha {p['alpha']:g} and the upper end of the 95% "
        f"Newcombe interval of the rate difference at most {100 * p['margin']:.0f} points.",
        "",
        "| task | status | floor | ceiling | peak memory median / p95 / p99 / max (n) | infra errors at ceiling vs unbounded | difference [95% CI] | test p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for b in bands:
        pk = b["peaks"]
        peaks = (f"{mib(pk.get('median_bytes'))} / {mib(pk.get('p95_bytes'))} / {mib(pk.get('p99_bytes'))} / "
                 f"{mib(pk.get('max_bytes'))} ({pk['n']})")
        chosen = next((lt for lt in b["limits"] if lt["label"] == b["ceiling_label"]), None)
        unb = b["unbounded_infra"] or {}
        if b["status"] == "recommended" and chosen:
            floor = f"{b['floor_memory_mb']} MiB, {b['floor_cpus']:g} cpu"
            ceiling = f"{b['ceiling_memory_mb']} MiB, {b['ceiling_cpus']:g} cpu ({b['ceiling_label']})"
            infra = (f"{chosen['infra']['k']}/{chosen['infra']['n']} vs {unb.get('k')}/{unb.get('n')}")
            lines.append(f"| {b['task_id']} | published | {floor} | {ceiling} | {peaks} | {infra} | {_interval(chosen)} | "
                         f"{pval(chosen['p'])} |")
        else:
            need = f"; ~{b['attempts_needed']} attempts/config needed" if b.get("attempts_needed") else ""
            lines.append(f"| {b['task_id']} | **refused**{need} | — | — | {peaks} | "
                         f"unbounded {unb.get('k', '—')}/{unb.get('n', '—')} | — | — |")
    refused = [b for b in bands if b["status"] != "recommended"]
    if refused:
        lines += ["", "Refused (the data cannot support a band yet):", ""]
        lines += [f"- `{b['task_id']}`: " + "; ".join(b["reasons"]) for b in refused]
    lines += [
        "",
        f"Memory set aside by a placement without overcommit, one trial of each published task: "
        f"**{res['task_band_mb']:.0f} MiB** with these bands vs **{res['uniform_3x_mb']:.0f} MiB** at a uniform 3x "
        f"limit ({pct(res['ratio'], 0)}).",
        "",
        "Tested limits per task (infra-error rate, Wilson 95%; difference to unbounded with its interval):",
        "",
    ]
    for b in bands:
        cells = [f"{lt['label']}: {pct(lt['infra']['estimate'], 0)} ({'within noise' if lt['within_noise'] else 'significant' if lt['significant'] else 'too few attempts'})"
                 for lt in b["limits"]]
        lines.append(f"- `{b['task_id']}` (spec {b['spec_memory_mb']} MiB, {b['spec_cpus']:g} cpu): " + ", ".join(cells))
    lines += ["", "CPU is not calibrated: the floor keeps the spec's cpus and the ceiling scales it like the memory "
              "limit. Apply the bands with `git apply` on the patches, or run `headroom calibrate --tasks-out DIR` "
              "and sweep DIR with the `task-band` configuration.", ""]
    return "\n".join(lines)
