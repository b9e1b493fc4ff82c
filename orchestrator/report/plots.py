"""Plots for the HTML report, rendered with matplotlib to PNG and embedded as data URIs."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # no display; set before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from orchestrator.report.safe import visible_controls  # noqa: E402
from orchestrator.stats.glossary import ABSTENTION_RATE, INFRA_RATE, SCORE_FAIL  # noqa: E402

if TYPE_CHECKING:
    from orchestrator.spec.analysis import ConfigStats, RateName


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


SERIES_ALT = f"{SCORE_FAIL} and infra-error rate by configuration"


def rates_vs_multiplier(configs: Sequence[ConfigStats], *, labels_axis: bool = False) -> str:
    """Pass rate, infra-error rate (and abstention rate) against the configuration, with Wilson 95% bands.

    Labels (agents, models, imports) have no order to connect: points with error bars, no line.
    """
    # A label is the run's text, never mathtext: an unpaired "$" would fail the plot, a paired one typeset.
    labels = [visible_controls(c.label).replace("$", r"\$") for c in configs]
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(7, 3.6))
    series: list[tuple[RateName, str, str]] = [
        ("score_infra_as_failure", SCORE_FAIL, "tab:blue"),
        ("infra_error_rate", INFRA_RATE, "tab:red"),
    ]
    if any(c.abstention_rate.k for c in configs):  # only where someone abstained
        series.append(("abstention_rate", ABSTENTION_RATE, "tab:purple"))
    for key, name, color in series:
        blocks = [c.rate_block(key) for c in configs]
        est, lo, hi = (
            np.array([np.nan if v is None else v for v in values]) * 100
            for values in ([b.estimate for b in blocks], [b.low for b in blocks], [b.high for b in blocks])
        )
        if labels_axis:
            ax.errorbar(x, est, yerr=[est - lo, hi - est], fmt="o", color=color, capsize=4, label=name)
        else:
            ax.plot(x, est, marker="o", color=color, label=name)
            ax.fill_between(x, lo, hi, color=color, alpha=0.18)
    ax.set_xticks(x, labels, rotation=20 if labels_axis else 0, ha="right" if labels_axis else "center")
    ax.set_xlabel("configuration" if labels_axis else "configuration (request / limit)")
    ax.set_ylabel("% of trials")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title("Rates by configuration, Wilson 95% bands", fontsize=10)
    return _png(fig)
