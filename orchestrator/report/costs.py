"""The cost and latency table, shared by every renderer so coverage is never dropped.

Each cost or token figure sits beside the number of trials it stands on
("30/100 reported"); see :mod:`orchestrator.stats.cost` for why per-solved
figures use only the trials that reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.spec.analysis import ConfigStats

HEADERS = [
    "config",
    "latency / attempt",
    "latency / solved",
    "cost / attempt",
    "cost / solved",
    "cost reported",
    "tokens / attempt",
    "tokens / solved",
    "tokens reported",
]

NOTE = (
    "Per solved task = total / tasks passed, over the trials that reported the figure "
    "(cost and tokens: trials that reported them, and the passes among those). "
    '"gateway": measured at headroom\'s model gateway; "self-reported": the agent\'s own figures, unchecked.'
)


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f} s"


def _usd(x: float | None) -> str:
    return "—" if x is None else f"${x:.6f}"


def _tok(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _reported(n: int, total: int, passes: int, source: str | None = None, measured: int = 0) -> str:
    text = f"{n}/{total} reported ({passes} passed)" if n else f"0/{total} reported"
    return text + source_label(source, n, measured)


def source_label(source: str | None, reported: int, measured: int) -> str:
    """Where a cost or token figure comes from, as a suffix of its coverage cell."""
    if source == "mixed":
        return f", {measured} gateway + {reported - measured} self-reported"
    return f", {source}" if source else ""


def cost_rows(configurations: Sequence[ConfigStats]) -> list[list[str]]:
    rows = []
    for c in configurations:
        k = c.cost
        tin, tout = k.tokens_in_per_attempt, k.tokens_out_per_attempt
        per_attempt = "—" if tin is None and tout is None else f"{_tok(tin)} in + {_tok(tout)} out"
        rows.append(
            [
                c.label,
                _s(k.latency_per_attempt_s),
                _s(k.latency_per_solved_s),
                _usd(k.cost_per_attempt_usd),
                _usd(k.cost_per_solved_usd),
                _reported(k.n_cost, k.n, k.passed_with_cost, k.cost_source, k.n_cost_gateway),
                per_attempt,
                _tok(k.tokens_per_solved),
                _reported(k.n_tokens, k.n, k.passed_with_tokens, k.tokens_source, k.n_tokens_gateway),
            ]
        )
    return rows
