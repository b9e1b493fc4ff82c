"""Interactive figures for the viewer, as Plotly figure specs (plain JSON, drawn by plotly.js).

The spec is built as a dict rather than through plotly's Python figure classes:
the page needs only the JSON, and it costs nothing to build for any run size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.stats.glossary import ABSTENTION_RATE, INFRA_RATE, SCORE_FAIL

if TYPE_CHECKING:
    from orchestrator.spec.analysis import ConfigStats, RateName

SERIES: tuple[tuple[RateName, str, str], ...] = (
    ("score_infra_as_failure", SCORE_FAIL, "#1f77b4"),
    ("infra_error_rate", INFRA_RATE, "#d62728"),
)
#: Shown only where some configuration abstained: a flat zero line would be noise on every other run.
ABSTENTION: tuple[RateName, str, str] = ("abstention_rate", ABSTENTION_RATE, "#4a4a8a")


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 2)


def rates_by_configuration(configs: Sequence[ConfigStats]) -> dict[str, Any]:
    """Pass, infra-error (and abstention) rates per configuration with Wilson 95% error bars; hover shows the numbers."""
    labels = [c.label for c in configs]
    traces = []
    series = SERIES + ((ABSTENTION,) if any(c.abstention_rate.k for c in configs) else ())
    for key, name, color in series:
        blocks = [c.rate_block(key) for c in configs]
        est = [_pct(b.estimate) for b in blocks]
        lo = [_pct(b.low) for b in blocks]
        hi = [_pct(b.high) for b in blocks]
        custom = [[b.k, b.n, lo[i], hi[i]] for i, b in enumerate(blocks)]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": name,
                "x": labels,
                "y": est,
                "marker": {"color": color, "size": 9},
                "line": {"color": color},
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [None if e is None or h is None else round(h - e, 2) for e, h in zip(est, hi)],
                    "arrayminus": [None if e is None or lo_ is None else round(e - lo_, 2) for e, lo_ in zip(est, lo)],
                    "color": color,
                    "thickness": 1.2,
                    "width": 4,
                },
                "customdata": custom,
                "hovertemplate": (
                    f"<b>%{{x}}</b><br>{name}: %{{y:.1f}}%<br>"
                    "Wilson 95%: [%{customdata[2]:.1f}, %{customdata[3]:.1f}]<br>"
                    "%{customdata[0]} of %{customdata[1]} trials<extra></extra>"
                ),
            }
        )
    layout = {
        "title": {"text": "Rates by configuration (Wilson 95% intervals)", "font": {"size": 14}},
        "xaxis": {"title": {"text": "configuration (request / limit)"}, "type": "category"},
        "yaxis": {"title": {"text": "% of trials"}, "range": [0, 100]},
        "hovermode": "closest",
        "margin": {"t": 40, "r": 10, "b": 50, "l": 55},
        "height": 380,
        "legend": {"orientation": "h", "y": -0.25},
    }
    return {"data": traces, "layout": layout}
