"""Run-to-run spread: how much the score moves between identical repeats.

WHY: a single run's score is one draw. Repeating the whole benchmark and
reporting the mean AND the standard deviation across repeats (with the range)
shows how large a difference between two leaderboard entries must be before it
means anything. The "run" is a real run whenever there is one: for imported
results, each source run (a Terminal-Bench run directory, a Harbor job) of a
configuration. Only a native sweep, which has no runs of its own, uses the
repeat index ``attempt``: attempt r of every task forms run r. ``basis`` says
which. Sample SD (ddof=1) is the headline because the repeats are a sample of
possible runs; the population SD is kept for comparison with sources that print it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Spread:
    n_runs: int
    run_scores: list[float]  # score of each repeat index, in attempt order
    mean: float | None
    sd: float | None  # sample SD, ddof = 1 (headline)
    sd_population: float | None  # ddof = 0
    min: float | None
    max: float | None
    basis: str = "attempt index"  # source runs (imports) | attempt index (a native sweep)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def spread_from_counts(
    passed: np.ndarray, n: np.ndarray, max_listed: int = 200, basis: str = "attempt index"
) -> Spread:
    """Spread from per-run passes and trials (arrays indexed by run: a source run, or an attempt index).

    Runs with no trials are skipped. ``run_scores`` lists at most
    ``max_listed`` runs (the summary statistics always use all of them) so a
    1,000-repeat sweep does not bloat the report.
    """
    passed = np.asarray(passed, float)
    n = np.asarray(n, float)
    m = n > 0
    scores = passed[m] / n[m]
    r = len(scores)
    if r == 0:
        return Spread(0, [], None, None, None, None, None, basis)
    sd = float(np.std(scores, ddof=1)) if r > 1 else None
    return Spread(
        n_runs=r,
        run_scores=[float(x) for x in scores[:max_listed]],
        mean=float(scores.mean()),
        sd=sd,
        sd_population=float(np.std(scores, ddof=0)),
        min=float(scores.min()),
        max=float(scores.max()),
        basis=basis,
    )
