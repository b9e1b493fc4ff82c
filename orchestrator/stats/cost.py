"""Cost and latency per attempt and per *solved* task, with the coverage of each.

WHY per solved: a cheap agent that rarely succeeds is not cheap. Dividing the
total spend (or wall time) by the number of passes gives what one success
actually costs: $0.001345 per attempt at 26% success is $0.005172 per solved
task (3.85x). Per-solved values are None when nothing passed (the cost of a
success is then unknown, not infinite-and-printable).

WHY only over trials that reported: agents often report cost or tokens for some
trials and not others (NaN). Dividing the reported total by *all* passes mixes
two populations and can print a cost per solved task below the cost per
attempt. So every cost and token figure is computed on the trials that reported
it -- per attempt: reported total / reporting trials; per solved: reported total
/ passes among the reporting trials -- and comes with its coverage
(``n_cost`` of ``n`` trials, ``passed_with_cost`` of ``passed`` passes) so a
reader sees what the number stands on. Latency is always measured, so its
coverage is complete.

WHERE the figures come from: a trial's tokens and cost are the model gateway's
measurement when the run had one (``usage_source = gateway``), else the agent's
own report, which a buggy or hostile agent is free to get wrong. ``n_cost_gateway``
and ``n_tokens_gateway`` say how many of the reporting trials were measured, and
``cost_source`` / ``tokens_source`` sum that up as ``gateway``, ``self-reported``,
``mixed`` or None (nothing reported), so a renderer labels every figure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


def coverage(reported: int, total: int) -> str:
    """``30/100 reported``: how many trials a cost or token figure stands on."""
    return f"{reported}/{total} reported"


@dataclass(frozen=True)
class CostLatency:
    n: int
    passed: int
    n_cost: int  # trials with a reported cost
    passed_with_cost: int  # passes among them: the per-solved cost's denominator
    cost_complete: bool
    cost_coverage: str
    cost_total_usd: float | None  # over the reporting trials only
    cost_per_attempt_usd: float | None
    cost_per_solved_usd: float | None
    latency_total_s: float
    latency_per_attempt_s: float | None
    latency_per_solved_s: float | None
    n_tokens: int  # trials that reported both input and output tokens
    passed_with_tokens: int
    tokens_coverage: str
    tokens_in_per_attempt: float | None  # over trials that reported input tokens
    tokens_out_per_attempt: float | None  # over trials that reported output tokens
    tokens_per_solved: float | None  # (in + out) over trials reporting both / their passes
    n_cost_gateway: int = 0  # of the n_cost trials, those the gateway measured
    n_tokens_gateway: int = 0  # of the n_tokens trials, likewise
    cost_source: str | None = None  # gateway | self-reported | mixed | None
    tokens_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def usage_source(reported: int, measured: int) -> str | None:
    """What ``reported`` figures stand on when ``measured`` of them came from the gateway."""
    if reported <= 0:
        return None
    if measured >= reported:
        return "gateway"
    return "self-reported" if measured <= 0 else "mixed"


def _per(total: float, count: int) -> float | None:
    return float(total / count) if count > 0 else None


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
    *,
    passed_with_cost: int | None = None,
    tokens_sum: float = 0.0,
    n_tokens: int = 0,
    passed_with_tokens: int = 0,
    n_cost_gateway: int = 0,
    n_tokens_gateway: int = 0,
) -> CostLatency:
    """Assemble cost/latency from sums computed vectorised by the caller.

    ``cost_sum`` covers the ``n_cost`` trials that reported a cost, of which
    ``passed_with_cost`` passed (defaults to ``passed``, which is right only when
    every trial reported). ``tokens_sum`` is input + output tokens over the
    ``n_tokens`` trials that reported both, of which ``passed_with_tokens`` passed.
    """
    pwc = int(passed if passed_with_cost is None else passed_with_cost)
    return CostLatency(
        n=int(n),
        passed=int(passed),
        n_cost=int(n_cost),
        passed_with_cost=pwc,
        cost_complete=bool(n_cost == n),
        cost_coverage=coverage(int(n_cost), int(n)),
        cost_total_usd=float(cost_sum) if n_cost > 0 else None,
        cost_per_attempt_usd=_per(cost_sum, n_cost),
        cost_per_solved_usd=_per(cost_sum, pwc) if n_cost > 0 else None,
        latency_total_s=float(duration_sum),
        latency_per_attempt_s=_per(duration_sum, n),
        latency_per_solved_s=_per(duration_sum, passed),
        n_tokens=int(n_tokens),
        passed_with_tokens=int(passed_with_tokens),
        tokens_coverage=coverage(int(n_tokens), int(n)),
        tokens_in_per_attempt=_per(tokens_in_sum, n_tokens_in),
        tokens_out_per_attempt=_per(tokens_out_sum, n_tokens_out),
        tokens_per_solved=_per(tokens_sum, passed_with_tokens) if n_tokens > 0 else None,
        n_cost_gateway=int(n_cost_gateway),
        n_tokens_gateway=int(n_tokens_gateway),
        cost_source=usage_source(int(n_cost), int(n_cost_gateway)),
        tokens_source=usage_source(int(n_tokens), int(n_tokens_gateway)),
    )
