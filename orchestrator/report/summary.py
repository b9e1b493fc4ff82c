"""The summary every report format opens with: the headline per configuration, the recommendation, isolation.

One layout-free description (rows and lines) that the terminal, Markdown, HTML and viewer renderers lay out,
so the first screen of every format says the same thing in the same words. Nothing is computed here that the
report document does not already hold: the headline intervals come from ``headline_intervals``, the
recommendation from ``statistics.calibration``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.report.text import HEADLINE_HEADERS, headline_rows, rate

if TYPE_CHECKING:
    from orchestrator.report.model import Configuration, ReportDocument

#: The summary table: the headline with its two intervals, then the infra-error rate.
HEADERS = [*HEADLINE_HEADERS, "infra-error rate"]

# What each half of the calibration's evidence generalises to (the tests named in CALIBRATION_RULE).
_GENERALISES = ("score evidence (paired t and TOST over tasks) generalises to new tasks; infra-error evidence "
                "(exact test over trials) to more attempts on these tasks")


def _new_tasks(c: Configuration) -> dict[str, Any]:
    return c.headline_intervals.get("new_tasks") or {}


def new_tasks_basis(doc: ReportDocument) -> str | None:
    """``12 tasks, df 11`` when every configuration's new-tasks interval has the same basis (said once)."""
    bases = {(_new_tasks(c).get("n_tasks"), _new_tasks(c).get("df")) for c in doc.configurations}
    if len(bases) != 1:
        return None
    n, df = bases.pop()
    return None if n is None else f"{n} tasks, df {df}"


def rows(doc: ReportDocument) -> list[list[str]]:
    """One row per configuration: label, headline score, its two intervals, infra-error rate (Wilson 95%).

    The new-tasks interval's basis (tasks, df) is in its cell only when it differs between configurations;
    otherwise :func:`lines` says it once."""
    shared = new_tasks_basis(doc) is not None
    out = []
    for row, c in zip(headline_rows(doc.configurations), doc.configurations):
        if shared:
            row[3] = row[3].split(" (", 1)[0]
        out.append([*row, rate(c.infra_error_rate)])
    return out


def recommendation(doc: ReportDocument) -> str:
    """The calibration's recommendation, or why there is none, with what it generalises to."""
    if doc.labels_axis:
        return ("No recommendation: the configurations are labels (agents, models), not resource levels, so there "
                "is no limit to choose; the paired comparisons below test them (paired t over tasks: new tasks).")
    cal = doc.calibration
    if not cal:
        return "No recommendation: no calibration was computed for this run."
    if cal.get("status") == "recommended":
        return (f"Recommendation: {cal.get('summary')}. "
                f"What it generalises to: {_GENERALISES}.")
    return f"No recommendation: {'; '.join(cal.get('reasons') or ['the data cannot carry the rule'])}."


def isolation(doc: ReportDocument) -> str:
    """Isolation and enforcement in one line."""
    run = doc.run
    iso = run.isolation
    warn = {"none": " (NOT sandboxed)", "unrecorded": " (not recorded: treat as not sandboxed)",
            "unknown (imported)": " (headroom did not run these trials)"}.get(iso, "")
    storage = {True: "enforced", False: "NOT enforced", None: "unrecorded"}[run.storage_limit]
    return (f"Isolation {iso}{warn}; enforcement {run.enforcement} on backend {run.backend}; "
            f"storage limit {storage}.")


def lines(doc: ReportDocument) -> list[str]:
    """The summary's text lines after the table: the interval basis, the recommendation, isolation."""
    basis = new_tasks_basis(doc)
    return ([f"New-tasks intervals: t over {basis}, SE clustered by task."] if basis else []) \
        + [recommendation(doc), isolation(doc)]
