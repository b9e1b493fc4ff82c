"""Cost and latency per attempt and per *solved* task.

WHY per solved: a cheap agent that rarely succeeds is not cheap. Dividing the
total spend (or wall time) by the number of passes gives what one success
actually costs: $0.001345 per attempt at 26% success is $0.005172 per solved
task (3.85x). Per-solved values are None when nothing passed (the cost of a
success is then unknown, not infinite-and-printable).

Missing costs/tokens (NaN: the agent did not report them) are excluded from the
per-attempt means and counted in ``n_cost`` so the reader sees the coverage.
Per-solved cost is total reported cost / passes; if cost coverage is partial it
is an underestimate, flagged by ``cost_complete``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CostLatency:
    n: int
    passed: int
    n_cost: int  # trials with a reported cost
    cost_complete: bool
    cost_total_usd: float | None
    cost_per_attempt_usd: float | None
    cost_per_solved_usd: float | None
    latency_total_s: float
    latency_per_attempt_s: float | None
    latency_per_solved_s: float | None
    tokens_in_per_attempt: float | None
    tokens_out_per_attempt: float | None
    tokens_per_solved: float | None  # (reported in + out tokens) / passes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cost_latency(
    n: int,
    passed: int,
    duration_sum: float,
    cost_sum: float,
    n_cost: int,
    tokens_in_sum: float = 0.0,
    n_tokens_in: int = 0,
    tokens_out_sum: float = 0.0,
    n_tokens_out: int = 0,
) -> CostLatency:
    """Assemble cost/latency from sums (computed vectorised by the caller)."""

    def per(total: float, count: int) -> float | None:
        return float(total / count) if count > 0 else None

    cost_total = float(cost_sum) if n_cost > 0 else None
    tok_total = tokens_in_sum + tokens_out_sum if (n_tokens_in > 0 or n_tokens_out > 0) else None
    return CostLatency(
        n=int(n),
        passed=int(passed),
        n_cost=int(n_cost),
        cost_complete=bool(n_cost == n),
        cost_total_usd=cost_total,
        cost_per_attempt_usd=per(cost_sum, n_cost),
        cost_per_solved_usd=(cost_total / passed) if (cost_total is not None and passed > 0) else None,
        latency_total_s=float(duration_sum),
        latency_per_attempt_s=per(duration_sum, n),
        latency_per_solved_s=per(duration_sum, passed),
        tokens_in_per_attempt=per(tokens_in_sum, n_tokens_in),
        tokens_out_per_attempt=per(tokens_out_sum, n_tokens_out),
        tokens_per_solved=(float(tok_total) / passed) if (tok_total is not None and passed > 0) else None,
    )
