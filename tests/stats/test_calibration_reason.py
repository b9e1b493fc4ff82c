"""The calibration refusal says which condition failed, with the numbers the evidence table shows (finding #10)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from orchestrator.report.markdown import calibration_block
from orchestrator.stats.analyze import analyze
from tests.stats.conftest import frame_from_outcomes

CONFIGS = {"1x-strict": 1.0, "1x/1.5x": 1.5, "1x/2x": 2.0, "1x/3x": 3.0, "unbounded": np.inf}
# `headroom demo --attempts 3` as recorded in the review's store: per task, the outcomes under each
# configuration above (P passed, F failed, I infra_error (oom_killed), T timeout).
DEMO = {
    "bundle-digest": ("PPI", "PPP", "PPP", "PPP", "PPP"),
    "bundle-digest-xl": ("PPI", "PPP", "PPP", "PPP", "PPP"),
    "crash-triage": ("III", "III", "PII", "PPP", "PPP"),
    "csv-report": ("PPP", "PPP", "PPP", "PPP", "PPP"),
    "dedup-index": ("PII", "PII", "PII", "PPI", "PPP"),
    "dep-resolve": ("PPI", "PPP", "PPP", "PPP", "PPP"),
    "hash-chain": ("PPT", "PPT", "PPP", "PPP", "PPP"),
    "prime-count": ("PPP", "PPP", "PPP", "PPP", "PPP"),
    "unit-convert": ("PPF", "PPF", "PPF", "PPF", "PPF"),
    "word-index": ("PPI", "PPP", "PPP", "PPP", "PPP"),
}
CODE = {"P": "passed", "F": "failed", "I": "infra_error", "T": "timeout"}


def demo_frame() -> pd.DataFrame:
    frames = []
    for c, (label, lim) in enumerate(CONFIGS.items()):
        f = frame_from_outcomes([[CODE[ch] for ch in DEMO[t][c]] for t in DEMO], config_label=label, limit=lim)
        f["task_id"] = f["cluster_id"] = f["task_id"].map(dict(zip((f"t{i:03d}" for i in range(len(DEMO))), DEMO)))
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def test_demo_refusal_names_the_undefined_mdd_not_the_infra_test() -> None:
    res = analyze(demo_frame())
    cal = res["calibration"]
    assert cal["status"] == "refused"
    by = {e["label"]: e for e in cal["evidence"]}
    # The table: only unbounded significantly reduces infra errors (Holm p 0.0299), and nothing is within noise.
    assert [lab for lab, e in by.items() if e["infra_reduced"]] == ["unbounded"]
    assert round(by["unbounded"]["infra_p_holm"], 4) == 0.0299
    assert not any(e["within_noise"] or e["score_above_floor"] for e in by.values())
    # Why: the reference's infra-excluded score is 19/21 = 90.5%; with 21 trials the detectable Cohen h
    # (z_0.975 + z_0.8) * sqrt(2 / 21) = 0.865 overshoots 100% from there, so no upward MDD exists.
    h = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * math.sqrt(2 / 21)
    assert math.asin(math.sqrt(19 / 21)) + h / 2 > math.pi / 2
    assert all(e["mdd_bound"] is None for e in by.values())
    (reason,) = cal["reasons"]
    assert "no configuration significantly reduces infra errors" not in reason  # the old, contradicting text
    for words in ("unbounded (infra Holm p 0.0299)", "upward minimum detectable difference is undefined",
                  "90.5%", "21 trials", "+6.2 pts"):
        assert words in reason, (words, reason)
    rows = {line.split(" | ")[0].strip("| "): line for line in calibration_block(res) if line.startswith("| ")}
    assert rows["unbounded"].endswith("fewer infra errors; not shown within noise (MDD undefined) |")
    assert rows["1x/1.5x"].endswith("| not shown within noise (MDD undefined) |")


def test_refusal_without_any_infra_reduction_says_so_with_the_smallest_p() -> None:
    frames = [frame_from_outcomes([["passed", "failed", "infra_error"]] * 12, config_label=label, limit=lim)
              for label, lim in (("1x-strict", 1.0), ("unbounded", np.inf))]
    cal = analyze(pd.concat(frames, ignore_index=True))["calibration"]
    (ev,) = cal["evidence"]
    assert not ev["infra_reduced"]
    assert cal["reasons"] == [f"no configuration significantly reduces infra errors (Holm-adjusted exact test, alpha 0.05); "
                              f"the smallest Holm p is {ev['infra_p_holm']:.4f} (unbounded)"]
