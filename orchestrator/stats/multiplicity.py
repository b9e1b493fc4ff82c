"""Holm correction over a family of tests.

WHY: a sweep report runs many tests (every configuration against the reference
and against its neighbour, for score and for infra errors). Reading each raw
p against 0.05 guarantees false alarms. Holm's step-down procedure controls the
family-wise error rate under any dependence between the tests and is uniformly
more powerful than Bonferroni.

statsmodels' ``multipletests`` defaults to Holm-*Sidak*; we pass method="holm"
explicitly. Raw p values are always kept beside the adjusted ones.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

import numpy as np
from statsmodels.stats.multitest import multipletests


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p values, same order; None entries stay None and are not counted."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and np.isfinite(p)]
    out: list[float | None] = [None] * len(pvalues)
    if not idx:
        return out
    raw = np.array([pvalues[i] for i in idx], float)
    # statsmodels runs a full gc.collect() inside its Holm branch; with a large report in memory that took
    # 0.06-0.3 s per call. Freezing the objects that exist already makes that collection skip them (it
    # visits only what the call itself allocated); unfreeze returns them to the collector unchanged.
    gc.freeze()
    try:
        _, adj, _, _ = multipletests(raw, alpha=0.05, method="holm")
    finally:
        gc.unfreeze()
    for i, a in zip(idx, adj):
        out[i] = float(min(1.0, a))
    return out
