"""The enforcement canary's record, read back: whether it flags a run, its problems, its lines for a terminal.

Reports, ``runs calibrate`` and the viewer read a run's canary (a :class:`~orchestrator.spec.provenance.CanaryVerdict`)
from its provenance; they need none of what runs one (the backends, the launch, the task loader: the spec models of
a run, which cost a report about a tenth of its start-up). So the reading side lives here, and ``engine/canary.py``
re-exports it.
"""

from __future__ import annotations

from orchestrator.spec.provenance import CanaryVerdict, Provenance


def not_run(reason: str) -> CanaryVerdict:
    return CanaryVerdict(status="not run", reason=reason, arms=[], problems=[])


def flags_run(canary: CanaryVerdict | None) -> bool:
    """True when a run must not be presented as a resource sweep."""
    return canary is not None and canary.flagged


def of_run(prov: Provenance) -> list[tuple[str, CanaryVerdict]]:
    """Every canary of a run, labelled: the one at its start, then one per ``--resume``."""
    return prov.canaries()


def run_problems(prov: Provenance) -> list[str] | None:
    """None when no canary of the run flagged it; else every problem, labelled by when it was seen."""
    flagged = [(when, c) for when, c in of_run(prov) if flags_run(c)]
    if not flagged:
        return None
    many = len(of_run(prov)) > 1
    return [f"{when}: {p}" if many else p for when, c in flagged for p in c.problems]


def _per_target(canary: CanaryVerdict) -> list[str]:
    """Per node, when there are nodes: the verdict of each, and the nodes left out."""
    by_target = canary.by_target
    skipped = canary.skipped_targets
    if set(by_target) <= {"local"} and not skipped:
        return []
    out = ["  per node: " + ", ".join(f"{t} {v}" for t, v in by_target.items())] if by_target else []
    if skipped:
        out.append(
            f"  not checked ({len(skipped)}): "
            + "; ".join(f"{s.target} ({s.reason})" for s in skipped[:10])
            + (" ..." if len(skipped) > 10 else "")
        )
    return out


def describe(canary: CanaryVerdict | None) -> list[str]:
    """Lines for a terminal: the verdict, and every problem when the run is flagged."""
    if canary is None:
        return ["[yellow]enforcement canary: None[/] (None): the report will say limits were not checked"]
    status = canary.status
    lines = _per_target(canary)
    if status == "enforced":
        n = sum(1 for a in canary.arms if a.status == "enforced")
        notes = sorted({n for a in canary.arms for n in a.notes if "unbounded" not in n})
        return [
            f"enforcement canary: limits bite in {n} configuration(s) on {', '.join(canary.targets)}"
            + (f" ({'; '.join(notes)})" if notes else "")
        ] + lines
    if status == "flagged":
        return (
            [
                "[bold red]enforcement canary: limits do NOT bite as configured; this run will not be reported as a "
                "resource sweep[/]"
            ]
            + [f"  - {p}" for p in canary.problems]
            + lines
        )
    return [f"[yellow]enforcement canary: {status}[/] ({canary.reason}): the report will say limits were not checked"]
