"""Checks on the run itself: did the limits bite (canary), did trials run overcommitted, did the run drift?

Kept apart from the rest of the report so other sections stay as they are: the
document gets one ``checks`` block (:func:`build`), and renderers call :func:`markdown` and
:func:`print_terminal`. When the canary shows the limits did not bite, the run
is not a resource sweep: the block says so first, and the calibration
recommendation is replaced by a refusal (:func:`calibration`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from orchestrator.engine.canary_verdict import of_run, run_problems
from orchestrator.report.model import (
    AgentNotFound,
    Checks,
    Overcommit,
    ResourceSweep,
    UsageIncomplete,
)
from orchestrator.report.text import pct, pval
from orchestrator.spec.analysis import Calibration, Drift
from orchestrator.spec.backend import ClusterFacts
from orchestrator.spec.provenance import CanaryVerdict, Provenance

if TYPE_CHECKING:  # pandas only where a document is built: a stored report is rendered without it
    import pandas as pd

    from orchestrator.report.model import ReportDocument


def _cluster(prov: Provenance) -> ClusterFacts | None:
    """The cluster the run's backend recorded (kubernetes), whatever version recorded it."""
    return prov.backend.kubernetes if prov.backend else None


NOT_BITING = "the enforcement canary shows the limits did not bite: this run is not a resource sweep"


def build(prov: Provenance, frame: pd.DataFrame, *, backend: str, drift: Drift | None) -> Checks:
    """The document's ``checks``: the canary of the start and of every ``--resume``, overcommit, ``drift`` (the
    statistics' own, None before any trial finished), agents that did not start, incomplete usage, pauses."""
    from orchestrator.engine.overcommit import observed_by_config  # imports pandas

    canary = prov.canary or (
        CanaryVerdict(status="unknown (imported)", reason="headroom did not run these trials", arms=[], problems=[])
        if prov.import_
        else CanaryVerdict(status="not recorded", reason="run started before the canary existed", arms=[], problems=[])
    )
    problems = run_problems(prov)  # the canary of the start and of every --resume
    return Checks(
        resource_sweep=ResourceSweep(valid=problems is None, reasons=problems or []),
        canary=canary,
        canary_resumed=[c for when, c in of_run(prov) if when != "at start"],
        overcommit=Overcommit.model_validate(
            {
                **(prov.overcommit.model_dump(mode="json") if prov.overcommit else {}),
                "observed": observed_by_config(frame),
                # a cluster backend records overcommit per node, the engine per host
                "scope": "node" if backend == "kubernetes" else "host",
                "other_workloads": cluster.other_workloads if (cluster := _cluster(prov)) else None,
            }
        ),
        drift=drift,
        agent_not_found=agent_not_found(frame),
        usage_incomplete=usage_incomplete(frame),
        paused=list(prov.paused),
    )


def calibration(checks: Checks, computed: Calibration | None) -> Calibration | None:
    """The calibration the report shows: the computed one, or a refusal when the run's limits did not bite."""
    if checks.resource_sweep.valid or computed is None:
        return computed
    return Calibration(status="refused", reasons=[NOT_BITING], evidence=[])


AGENT_NOT_FOUND = "agent_not_found"


def agent_not_found(frame: pd.DataFrame) -> AgentNotFound:
    """Trials whose agent could not start (exit 126/127, or the outcome harness_error(agent_not_found)), per
    configuration: not the model's failure, whatever verdict the trial got (orchestrator.engine.classify)."""
    if frame.empty:
        return AgentNotFound(trials=0, by_configuration={}, as_harness_error=0)
    as_reason = (frame["outcome"] == "harness_error") & (frame["reason"] == AGENT_NOT_FOUND).fillna(False)
    hit = as_reason | frame["agent_not_found"].astype(bool) if "agent_not_found" in frame.columns else as_reason
    by = frame.loc[hit, "config_label"].astype(str).value_counts(sort=False)
    return AgentNotFound(
        trials=int(hit.sum()),
        by_configuration={str(k): int(v) for k, v in by.items()},
        as_harness_error=int(as_reason.sum()),
    )


def agent_not_found_line(found: AgentNotFound | None) -> str | None:
    """One line when the agent could not start in some trial; None when it started in every one."""
    if found is None or not found.trials:
        return None
    n, reason = found.trials, found.as_harness_error
    per = ", ".join(f"{label} {k}" for label, k in found.by_configuration.items())
    verdict = (
        "counted harness_error(agent_not_found), out of the infra-excluded score"
        if reason == n
        else "their verdicts stand as the verifier gave them"
        if reason == 0
        else f"{reason} counted harness_error(agent_not_found), the others' verdicts as the verifier gave them"
    )
    return (
        f"Agent could not start in {n} trial{'' if n == 1 else 's'} (exit 126/127: the command was not found or "
        f"not executable; {per}): not the model's failure; {verdict}. The trial pages show the evidence."
    )


def usage_incomplete(frame: pd.DataFrame) -> UsageIncomplete:
    """Trials (any of their tries) whose model calls the gateway could not all put on record, per configuration."""
    if frame.empty or "usage_incomplete" not in frame.columns:
        return UsageIncomplete(trials=0, by_configuration={})
    hit = frame["usage_incomplete"].fillna(0).astype(bool)
    by = frame.loc[hit, "config_label"].astype(str).value_counts(sort=False)
    return UsageIncomplete(trials=int(hit.sum()), by_configuration={str(k): int(v) for k, v in by.items()})


def usage_incomplete_line(found: UsageIncomplete | None) -> str | None:
    """One line when some trial's model usage is not all on record; None when every call is."""
    if found is None or not found.trials:
        return None
    n = found.trials
    per = ", ".join(f"{label} {k}" for label, k in found.by_configuration.items())
    return (
        f"Model usage incomplete in {n} trial{'' if n == 1 else 's'} ({per}): the store refused some call rows "
        "(their tokens and cost are counted from the gateway's memory), or a call ended without the provider's "
        "usage or was still streaming at the end (not counted). Their tokens and cost may be low."
    )


def paused_lines(c: Checks) -> list[str]:
    """One line per time the circuit breaker paused the sweep for its model provider."""
    return [
        f"Paused at {p.at} for the model provider ({p.why}); `headroom resume` continues such a run." for p in c.paused
    ]


def local_times(drift: Drift | None, started_local: str | None) -> Drift | None:
    """``drift`` with each block's start and end as the time of day where the run was started (provenance's
    offset); as it was when the run recorded no offset."""
    if not drift or not started_local:
        return drift
    try:
        tz = timezone(datetime.fromisoformat(started_local).utcoffset() or timedelta(0))
    except ValueError:
        return drift

    def local(utc: str | None) -> dict[str, str]:
        return {} if not utc else {"at": datetime.fromisoformat(utc).astimezone(tz).isoformat(timespec="seconds")}

    blocks = []
    for b in drift.blocks:
        first, last = local(b.first_start_utc), local(b.last_start_utc)
        blocks.append(
            b.model_copy(
                update={
                    **({"first_start_local": first["at"]} if first else {}),
                    **({"last_start_local": last["at"]} if last else {}),
                }
            )
        )
    return drift.model_copy(update={"blocks": blocks})


def _nodes_part(canary: CanaryVerdict) -> str:
    """Per node (cluster runs): each node's verdict, and the candidate nodes left unchecked."""
    by_target, skipped = canary.by_target, canary.skipped_targets
    if set(by_target) <= {"local"} and not skipped:
        return ""
    part = (
        (" Per node: " + ", ".join(f"{t} {v.replace('_', ' ')}" for t, v in by_target.items()) + ".")
        if by_target
        else ""
    )
    if skipped:
        part += (
            " Not checked: "
            + "; ".join(f"{s.target} ({s.reason})" for s in skipped[:10])
            + ("; ..." if len(skipped) > 10 else "")
            + "."
        )
    return part


def _canary_line(canary: CanaryVerdict, when: str = "") -> str:
    status = canary.status
    head = f"Enforcement canary{f' ({when})' if when else ''}"
    if status == "enforced":
        arms = sorted({a.config for a in canary.arms if a.status == "enforced"})
        notes = sorted({n for a in canary.arms for n in a.notes if "unbounded" not in n})
        return (
            f"{head}: limits bite ({', '.join(arms)} on {', '.join(canary.targets)}: a hog "
            "above each memory limit was OOM-killed, one below it passed)"
            + (f"; {'; '.join(notes)}" if notes else "")
            + "."
            + _nodes_part(canary)
        )
    if status == "flagged":
        return f"{head}: **limits do not bite as configured**." + _nodes_part(canary)
    return f"{head}: {status} ({canary.reason}); whether the limits bite was not checked."


def _canary_lines(c: Checks) -> list[str]:
    resumed = c.canary_resumed
    lines = [_canary_line(c.canary, "at start" if resumed else "")]
    return lines + [_canary_line(r, f"on resume at {r.resumed_at or '?'}") for r in resumed]


def _drift_line(drift: Drift | None) -> str:
    if not drift:
        return "Drift over the run: not computed."
    if drift.note:
        left_out = (
            f" ({drift.n_without_time} trial(s) without a recorded start time left out)"
            if drift.n_without_time and "none of the" not in drift.note
            else ""
        )
        return f"Drift over the run: {drift.note}{left_out}."
    parts = []
    for name, t in (("pass", drift.pass_), ("infra_error", drift.infra_error)):
        parts.append(
            f"{name.replace('_', '-')} rate {((t.direction or t.note) if t else None) or '—'} "
            f"(p={pval(t.p if t else None)}, adjusted {pval(t.p_adjusted if t else None)})"
        )
    blocks = drift.blocks
    span = (
        f" from {blocks[0].first_start_local or blocks[0].first_start_utc} to "
        f"{blocks[-1].last_start_local or blocks[-1].last_start_utc} (time of day where the run started)"
        if blocks
        else ""
    )
    head = "**Drift detected**" if drift.flagged else "No drift detected"
    left_out = (
        f" {drift.n_without_time} trial(s) without a recorded start time were left out." if drift.n_without_time else ""
    )
    return f"{head} across {drift.n_blocks} time blocks{span}: " + "; ".join(parts) + "." + left_out


def _counted(oc: Overcommit) -> str:
    """What the ratio is of: host memory, or a node's allocatable memory in whose limits."""
    if oc.scope != "node":
        return "host memory in limits"
    if oc.other_workloads == "counted":
        return "its node's allocatable memory in the limits of every pod on it"
    return "its node's allocatable memory in this run's limits (other workloads not counted)"


def _overcommit_lines(oc: Overcommit) -> list[str]:
    lines = [f"Overcommit warning: {w}." for w in oc.warnings]
    cells = [
        f"{label} max {pct(o.ratio_max, 2)} of "
        + _counted(oc)
        + (f", {o.trials_beside_unbounded} beside an unbounded trial" if o.trials_beside_unbounded else "")
        + (f", {o.trials_under_memory_pressure} under node memory pressure" if o.trials_under_memory_pressure else "")
        for label, o in oc.observed.items()
        if o.trials_recorded
    ]
    if cells:
        lines.append(f"Overcommit while running (placement {oc.placement or 'default'}): " + "; ".join(cells) + ".")
    return lines


def banner(doc: ReportDocument) -> list[str]:
    """One line under the title when the run must not be read as a resource sweep."""
    c = doc.checks
    if not c or c.resource_sweep.valid:
        return []
    return ["> **Not a resource sweep: the limits did not bite** (enforcement canary; see Checks on the run).", ""]


def markdown(doc: ReportDocument) -> list[str]:
    c = doc.checks
    if not c:
        return []
    lines = ["## Checks on the run", ""]
    if not c.resource_sweep.valid:
        lines += [
            "**Not a resource sweep: the limits did not bite.** The configurations below did not get the limits "
            "their labels name, so differences between them are not effects of those limits.",
            "",
        ]
        lines += [f"- {r}" for r in c.resource_sweep.reasons] + [""]
    lines += [f"{line}\n" for line in _canary_lines(c)] + [f"{line}\n" for line in _overcommit_lines(c.overcommit)]
    not_found = agent_not_found_line(c.agent_not_found)
    lines += [f"**{not_found}**", ""] if not_found else []
    incomplete = usage_incomplete_line(c.usage_incomplete)
    lines += [f"**{incomplete}**", ""] if incomplete else []
    lines += [f"{line}\n" for line in paused_lines(c)]
    lines += [_drift_line(c.drift), ""]
    return lines


def print_terminal(doc: ReportDocument, console: Console) -> None:
    c = doc.checks
    if not c:
        return
    if not c.resource_sweep.valid:
        console.print(
            "[bold red]NOT A RESOURCE SWEEP: the enforcement canary shows the limits did not bite[/] — "
            + "; ".join(c.resource_sweep.reasons)
        )
    else:
        for line in _canary_lines(c):
            console.print(line.replace("**", ""))
    for line in _overcommit_lines(c.overcommit):
        console.print(line)
    not_found = agent_not_found_line(c.agent_not_found)
    if not_found:
        console.print(f"[bold red]{not_found}[/]")
    if incomplete := usage_incomplete_line(c.usage_incomplete):
        console.print(f"[bold yellow]{escape(incomplete)}[/]")
    for line in paused_lines(c):
        console.print(escape(line))
    console.print(_drift_line(c.drift).replace("**", ""))
