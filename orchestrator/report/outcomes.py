"""The column header of every outcome, in the order every renderer lays out counts.

Keyed by :class:`~orchestrator.spec.outcome.Outcome` so a new outcome that is not
given a column here fails the report tests, instead of vanishing from the tables.
"""

from __future__ import annotations

from orchestrator.spec.outcome import Outcome

OUTCOME_HEADERS: dict[Outcome, str] = {
    Outcome.PASSED: "passed",
    Outcome.FAILED: "failed",
    Outcome.ABSTAINED: "abstained",
    Outcome.TIMEOUT: "timeout",
    Outcome.INFRA_ERROR: "infra",
    Outcome.HARNESS_ERROR: "harness",
}


def count_cells(counts: dict[str, int]) -> list[str]:
    """One configuration's outcome counts, in :data:`OUTCOME_HEADERS` order (0 where a count is absent)."""
    return [str(counts.get(o.value, 0)) for o in OUTCOME_HEADERS]
