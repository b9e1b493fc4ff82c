"""The calibration section's rule text and evidence table, shared by the Markdown and terminal reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.text import gap, interval_pts, pval, rate
from orchestrator.stats.glossary import INFRA_RATE, SCORE_EXCL, SCORE_FAIL

if TYPE_CHECKING:
    from orchestrator.spec.analysis import Calibration

CALIBRATION_RULE = (
    "Rule: every candidate limit is compared with the strict limit only. Infra errors: one-sided exact test "
    "stratified by task (a task whose infra state does not change carries no weight), Holm over the candidates' "
    "infra tests. Agent score: "
    + SCORE_EXCL
    + " (under "
    + SCORE_FAIL
    + " every removed infra error raises the score by construction; a task with no finished trial at a limit "
    "scores 0 there, so a task that finishes only with more memory counts as a change): "
    "paired t-test over tasks for a change, "
    "Holm over the candidates; TOST equivalence paired by task within ±{margin} points. Publish the smallest limit "
    "whose infra errors are significantly fewer and whose score is shown equivalent, before the first limit whose "
    "score changes; a larger limit only when its score is shown equivalent too and it has significantly fewer "
    "infra errors still. A limit is never chosen because equivalence could not be shown. `runs calibrate` applies "
    "the same rule to each task's trials."
)

CALIBRATION_HEADERS = [
    "candidate",
    INFRA_RATE,
    "infra p one-sided (Holm)",
    SCORE_EXCL,
    "score diff vs strict [95% t CI over tasks: new tasks]",
    "change p (Holm)",
    "TOST p",
    "paired MDD",
    "reading",
]


def calibration_rows(cal: Calibration) -> list[list[str]]:
    rows = []
    for e in cal.evidence:
        rows.append(
            [
                e.label,
                rate(e.infra_error_rate),
                f"{pval(e.infra_p)} ({pval(e.infra_p_holm)})",
                rate(e.score),
                interval_pts(e.score_diff_vs_reference, e.score_diff_low95, e.score_diff_high95),
                f"{pval(e.score_change_p)} ({pval(e.score_change_p_holm)})",
                pval(e.tost_p),
                gap(e.mdd),
                e.reading or "",
            ]
        )
    return rows
