"""The one-page summary a maintainer publishes beside the benchmark: each task's floor and ceiling, and why."""

from __future__ import annotations

from typing import Any

from orchestrator.report.safe import escaped, markdown_text
from orchestrator.report.text import mib, pct, pval


def _interval(lt: dict[str, Any]) -> str:
    if lt.get("diff_low") is None:
        return "— (the strict limit itself)"
    return f"{100 * lt['diff']:+.1f} pts [{100 * lt['diff_low']:+.1f}, {100 * lt['diff_high']:+.1f}]"


def _reading(lt: dict[str, Any]) -> str:
    if lt.get("test") == "reference":
        return "strict limit"
    parts = ["fewer infra errors" if lt["significant"] else "infra not shown reduced"]
    if lt.get("score_changed"):
        parts.append("score changes")
    elif lt.get("within_margin"):
        parts.append("score within margin")
    return ", ".join(parts)


def _cpus(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _cpu_use(b: dict[str, Any]) -> str:
    """The CPU floor's evidence cell: the per-trial CPU use, or why the spec was kept."""
    c = b.get("cpu") or {}
    if not (b.get("cpu_floor_source") or "").startswith("measured"):
        why = (b.get("cpu_floor_source") or "").partition("(")[2].rstrip(")") or "no CPU time measured"
        return f"not calibrated: {why}; floor = spec x request multiplier"
    cell = (
        f"{_cpus(c.get('median_cpus'))} / {_cpus(c.get('p95_cpus'))} / {_cpus(c.get('p99_cpus'))} / "
        f"{_cpus(c.get('max_cpus'))} cpu ({c.get('n', 0)})"
    )
    return cell + (" — capped at the ceiling" if "capped" in b["cpu_floor_source"] else "")


def _limit_cpu(lt: dict[str, Any]) -> str:
    c = lt.get("cpu") or {}
    parts = []
    if "median_cpus" in c:
        parts.append(f"CPU use median {c['median_cpus']:.2f}")
    if "n_throttling" in c:
        parts.append(
            f"throttled in {c['throttled_trials']}/{c['n_throttling']} trials, median "
            f"{pct(c['median_throttled_share'], 0)} of periods"
        )
    return f"; {', '.join(parts)}" if parts else ""


def summary_markdown(doc: dict[str, Any]) -> str:
    doc = escaped(doc, markdown_text)  # task ids, labels and the run's name are text, never markup (safe.py)
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
        "Floor = 95th percentile of the task's peak memory at the generous limits (trials not OOM-killed); "
        "CPU floor = 95th percentile of the same trials' average CPU use (CPU time over the agent and verifier "
        f"steps' wall time), rounded up to {p.get('cpu_step', 0.05):g} cpu, at least {p.get('min_cpus', 0.1):g}, "
        "capped at the CPU ceiling; where no CPU time was recorded, the spec's cpus times the request multiplier. "
        "Ceiling = the report's calibration rule (the same code, stats.rule) on the task's own trials, each limit "
        "against the task's strict limit, with the run level's tests on one task: with no infra error at any limit, "
        "the strict limit suffices; else the smallest bounded limit with significantly fewer infra errors (the "
        f"stratified exact test with one stratum: Fisher one-sided, Holm over the limits, alpha {p['alpha']:g}) whose "
        f"pass rate is shown within ±{100 * p['margin']:g} points of the strict limit's (TOST) and that comes before "
        "the first limit whose pass rate changes (two-sided exact, Holm; a side where nothing finished counts as 0 "
        "passes); a larger one only if it has significantly fewer infra errors still. A task is named **spec too "
        "low** when it needs more than the largest limit tested, or its oracle fails below a limit (where the "
        "oracle check ran).",
        "",
        "| task | status | floor | ceiling | peak memory median / p95 / p99 / max (n) | CPU use median / p95 / p99 / max (n) | infra errors at ceiling vs strict | difference [95% CI] | one-sided p (Holm) | why |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in bands:
        pk = b["peaks"]
        peaks = (
            f"{mib(pk.get('median_bytes'))} / {mib(pk.get('p95_bytes'))} / {mib(pk.get('p99_bytes'))} / "
            f"{mib(pk.get('max_bytes'))} ({pk['n']})"
        )
        chosen = next((lt for lt in b["limits"] if lt["label"] == b["ceiling_label"]), None)
        unb = b["unbounded_infra"] or {}
        strict = b["limits"][0]["infra"] if b["limits"] else {}
        if b["status"] == "recommended" and chosen:
            floor = f"{b['floor_memory_mb']} MiB, {b['floor_cpus']:g} cpu"
            ceiling = f"{b['ceiling_memory_mb']} MiB, {b['ceiling_cpus']:g} cpu ({b['ceiling_label']})"
            infra = f"{chosen['infra']['k']}/{chosen['infra']['n']} vs {strict.get('k')}/{strict.get('n')}"
            lines.append(
                f"| {b['task_id']} | published | {floor} | {ceiling} | {peaks} | {_cpu_use(b)} | {infra} | "
                f"{_interval(chosen)} | "
                f"{pval(chosen['p'])} ({pval(chosen.get('p_holm'))}) | {b.get('ceiling_reason') or '—'} |"
            )
        else:
            need = f"; ~{b['attempts_needed']} attempts/config needed" if b.get("attempts_needed") else ""
            status = "**spec too low**" if b.get("spec_too_low") else f"**refused**{need}"
            lines.append(
                f"| {b['task_id']} | {status} | — | — | {peaks} | {_cpu_use(b)} | "
                f"strict {strict.get('k', '—')}/{strict.get('n', '—')}, unbounded {unb.get('k', '—')}/"
                f"{unb.get('n', '—')} | — | — | see below |"
            )
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
        "Tested limits per task (infra-error rate and its reading against the strict limit; the trials' median CPU use "
        "and how many were throttled by the CPU quota, where the backend recorded it):",
        "",
    ]
    for b in bands:
        cells = [
            f"{lt['label']}: {pct(lt['infra']['estimate'], 0)} ({_reading(lt)}{_limit_cpu(lt)})" for lt in b["limits"]
        ]
        lines.append(
            f"- `{b['task_id']}` (spec {b['spec_memory_mb']} MiB, {b['spec_cpus']:g} cpu): " + ", ".join(cells)
        )
    published = [b for b in bands if b["status"] == "recommended"]
    measured = [b for b in published if (b.get("cpu_floor_source") or "").startswith("measured")]
    lines += [
        "",
        f"CPU floor measured for {len(measured)} of {len(published)} published tasks"
        + (
            ""
            if len(measured) == len(published)
            else " (the others keep the spec's cpus times the request multiplier; the CPU column says why)"
        )
        + "; the CPU ceiling scales the spec's cpus like the memory limit. Apply the bands with `git apply` on the patches, or run `headroom runs calibrate --tasks-out DIR` "
        "and sweep DIR with the `task-band` configuration.",
        "",
    ]
    return "\n".join(lines)
