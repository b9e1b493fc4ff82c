"""Hard all-or-nothing metrics compound per-part success.

WHY: a grader that requires every part of an answer to be right turns a decent
per-part rate into a poor task rate: three facts each present 77% of the time
give 0.77^3 = 0.457 if parts were independent. Comparing that expectation with
the observed all-parts rate shows whether failures are correlated across parts
(observed above expectation) or not. Reports use this to explain why a strict
grader and a relaxed grader disagree on the same transcripts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def mean_part_rate(part_rates: Sequence[float]) -> float:
    """Mean per-part success rate."""
    return float(np.mean(np.asarray(part_rates, float)))


def all_parts_expected(part_rates: Sequence[float] | float, n_parts: int | None = None) -> float:
    """Expected all-parts success under independence.

    Either give each part's rate (product of them) or one common rate and
    ``n_parts`` (rate ** n_parts).
    """
    if n_parts is not None:
        return float(float(part_rates) ** n_parts)  # type: ignore[arg-type]
    return float(np.prod(np.asarray(part_rates, float)))
