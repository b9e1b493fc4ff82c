"""The paraphrase gap: do tasks score differently when reworded?

Tasks that declare ``paraphrase_of`` pair with their original. Per configuration,
each pair contributes the difference of the two tasks' pass rates; the gap is
the mean difference (original minus paraphrase) with a paired Wilcoxon
signed-rank test and a paired t-test (scipy) over pairs. A large positive gap
suggests the originals were memorised rather than solved.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from orchestrator.spec.analysis import ParaphraseGap
from orchestrator.spec.provenance import RunTask


def paraphrase_pairs(tasks: Mapping[str, RunTask]) -> list[tuple[str, str]]:
    """(original, paraphrase) for every task of the run whose provenance names an original that is in the run."""
    return sorted(
        (orig, tid)
        for tid, t in tasks.items()
        if (orig := t.provenance.get("paraphrase_of")) and orig in tasks and orig != tid
    )


def paraphrase_gap(df: pd.DataFrame, pairs: list[tuple[str, str]]) -> list[ParaphraseGap]:
    if not pairs or df.empty:
        return []
    rates = (
        df.assign(passed=(df["outcome"] == "passed").astype(float))
        .groupby(["config_label", "task_id"])["passed"]
        .mean()
    )
    out = []
    for label in df["config_label"].drop_duplicates():
        per = rates.loc[label] if label in rates.index.get_level_values(0) else pd.Series(dtype=float)
        both = [(o, p) for o, p in pairs if o in per.index and p in per.index]
        diffs = np.array([per[o] - per[p] for o, p in both])
        original = float(np.mean([per[o] for o, _ in both])) if len(diffs) else None
        mean_gap = float(diffs.mean()) if len(diffs) else None
        testable = len(diffs) >= 2 and bool(np.any(diffs != 0))
        out.append(
            ParaphraseGap(
                config=str(label),
                pairs=int(len(diffs)),
                mean_gap=mean_gap,
                original_rate=original,
                paraphrase_rate=None if original is None or mean_gap is None else original - mean_gap,
                wilcoxon_p=float(stats.wilcoxon(diffs).pvalue) if testable else None,
                paired_t_p=float(stats.ttest_1samp(diffs, 0.0).pvalue) if testable and np.std(diffs) > 0 else None,
            )
        )
    return out
