"""The paraphrase gap and the access mix, from frames and provenance written by the test."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats

from orchestrator.report.document import provenance_mix, trust_block
from orchestrator.report.markdown import trust_lines
from orchestrator.spec.analysis import Rate
from orchestrator.spec.provenance import Provenance, RunTask
from orchestrator.stats.paraphrase import paraphrase_gap, paraphrase_pairs
from orchestrator.stats.proportions import wilson


def _frame(rates: dict[str, float], attempts: int = 4, config: str = "1x/3x") -> pd.DataFrame:
    rows = []
    for task, rate in rates.items():
        passes = round(rate * attempts)
        for a in range(attempts):
            rows.append(
                {
                    "task_id": task,
                    "config_label": config,
                    "outcome": "passed" if a < passes else "failed",
                    "reason": None,
                }
            )
    return pd.DataFrame(rows)


def _prov(pairs: dict[str, str | None], status: str = "public") -> Provenance:
    return Provenance(
        tasks={
            t: RunTask(
                digest="0" * 64,
                cluster_id=t,
                provenance={"paraphrase_of": o, "source": "s", "release_status": status},
            )
            for t, o in pairs.items()
        }
    )


def test_memorised_originals_show_a_significant_gap() -> None:
    rates = {**{f"o{i}": 1.0 for i in range(8)}, **{f"p{i}": 0.25 for i in range(8)}}
    prov = _prov({**{f"o{i}": None for i in range(8)}, **{f"p{i}": f"o{i}" for i in range(8)}})
    pairs = paraphrase_pairs(prov.tasks)
    assert pairs == [(f"o{i}", f"p{i}") for i in range(8)]
    [g] = paraphrase_gap(_frame(rates), pairs)
    assert g.pairs == 8 and g.mean_gap == pytest.approx(0.75)
    assert (g.original_rate, g.paraphrase_rate) == (pytest.approx(1.0), pytest.approx(0.25))
    assert g.wilcoxon_p == pytest.approx(stats.wilcoxon([0.75] * 8).pvalue) and g.wilcoxon_p < 0.01


def test_no_gap_and_dangling_references() -> None:
    rates = {"o0": 0.5, "p0": 0.5, "o1": 0.75, "p1": 0.75, "lonely": 1.0}
    prov = _prov({"o0": None, "p0": "o0", "o1": None, "p1": "o1", "lonely": "not-in-run"})
    [g] = paraphrase_gap(_frame(rates), paraphrase_pairs(prov.tasks))
    assert g.pairs == 2 and g.mean_gap == 0 and g.wilcoxon_p is None  # nothing to test


def test_report_shows_access_mix_unknown_share_abstentions_and_gap() -> None:
    prov = _prov({"o0": None, "p0": "o0"})
    prov.tasks["p0"].provenance["release_status"] = None
    mix = provenance_mix(prov)
    assert mix.access["public"] == 1 and mix.access["unknown"] == 1 and mix.unknown_access_share == 0.5
    df = _frame({"o0": 1.0, "p0": 0.5})
    df.loc[df.index[-1], "outcome"] = "abstained"
    rates = {"1x/3x": Rate(**wilson(1, 8).to_dict()), "2x/none": Rate(**wilson(0, 8).to_dict())}
    trust = trust_block(df, prov, rates)
    assert {k: v.model_dump() for k, v in trust.abstentions.items()} == {
        "1x/3x": wilson(1, 8).to_dict()
    }  # without any: left out
    text = "\n".join(trust_lines(trust))
    assert "## Abstentions" in text and "## Paraphrase gap" in text and "+50.0%" in text
    assert "| 1x/3x | 1 | 8 | 12.5% [" in text
