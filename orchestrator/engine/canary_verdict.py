"""The enforcement canary's record, read back: whether it flags a run, its problems, its lines for a terminal.

Reports, ``runs calibrate`` and the viewer read a run's canary from its provenance; they need none of what
runs one (the backends, the launch, the task loader: the pydantic spec models, which cost a report about a
tenth of its start-up). So the reading side lives here, and ``engine/canary.py`` re-exports it.
"""

from __future__ import annotations

from typing import Any


def not_run(reason: str) -> dict[str, Any]:
    return {"status": "not run", "reason": reason, "arms": [], "problems": []}


def flags_run(canary: dict[str, Any] | None) -> bool:
    """True when a run must not be presented as a resource sweep."""
    return bool(canary) and canary is not None and canary.get("status") == "flagged"


def of_run(prov: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every canary of a run, labelled: the one at its start, then one per ``--resume``."""
    out = [("at start", prov["canary"])] if prov.get("canary") else []
    out += [(f"on resume at {c.get('resumed_at', '?')}", c) for c in prov.get("canary_resumed") or []]
    return out


def run_problems(prov: dict[str, Any]) -> list[str] | None:
    """None when no canary of the run flagged it; else every problem, labelled by when it was seen."""
    flagged = [(when, c) for when, c in of_run(prov) if flags_run(c)]
    if not flagged:
        return None
    many = len(of_run(prov)) > 1
    return [f"{when}: {p}" if many else p for when, c in flagged for p in c.get("problems", [])]


def _per_target(canary: dict[str, Any]) -> list[str]:
    """Per node, when there are nodes: the verdict of each, and the nodes left out."""
    by_target = canary.get("by_target") or {}
    skipped = canary.get("skipped_targets") or []
    if set(by_target) <= {"local"} and not skipped:
        return []
    out = ["  per node: " + ", ".join(f"{t} {v}" for t, v in by_target.items())] if by_target else []
    if skipped:
        out.append(
            f"  not checked ({len(skipped)}): "
            + "; ".join(f"{s['target']} ({s['reason']})" for s in skipped[:10])
            + (" ..." if len(skipped) > 10 else "")
        )
    return out


def describe(canary: dict[str, Any]) -> list[str]:
    """Lines for a terminal: the verdict, and every problem when the run is flagged."""
    status = canary.get("status")
    lines = _per_target(canary)
    if status == "enforced":
        n = sum(1 for a in canary.get("arms", []) if a["status"] == "enforced")
        notes = sorted({n for a in canary.get("arms", []) for n in a.get("notes", []) if "unbounded" not in n})
        return [
            f"enforcement canary: limits bite in {n} configuration(s) on {', '.join(canary.get('targets', []))}"
            + (f" ({'; '.join(notes)})" if notes else "")
        ] + lines
    if status == "flagged":
        return (
            [
                "[bold red]enforcement canary: limits do NOT bite as configured; this run will not be reported as a "
                "resource sweep[/]"
            ]
            + [f"  - {p}" for p in canary.get("problems", [])]
            + lines
        )
    return [
        f"[yellow]enforcement canary: {status}[/] ({canary.get('reason')}): the report will say limits were not checked"
    ]
