"""Number formatting shared by every renderer, so a rate reads the same everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchestrator.stats.glossary import NEW_TASKS_INTERVAL, SCORE_FAIL, THESE_TASKS_INTERVAL

if TYPE_CHECKING:
    from orchestrator.spec.analysis import ComparisonItem, ConfigStats, Rate, SignTest


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}%"


def rate(p: Rate | None) -> str:
    """``26.0% [20.4, 32.5]``: estimate with its Wilson 95% interval, in percent."""
    if p is None or p.estimate is None or p.low is None or p.high is None:
        return "—" if p is None or p.estimate is None else pct(p.estimate)
    return f"{100 * p.estimate:.1f}% [{100 * p.low:.1f}, {100 * p.high:.1f}]"


def pval(p: float | None) -> str:
    if p is None:
        return "—"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def pts(x: float | None) -> str:
    """A difference of proportions, in percentage points."""
    return "—" if x is None else f"{100 * x:+.1f} pts"


def limit(mult: float | None) -> str:
    return "none" if mult is None else f"{mult:g}x"


def mib(b: float | None) -> str:
    return "—" if b is None else f"{b / 2**20:.0f} MiB"


def gap(x: float | None) -> str:
    """A size of difference (no sign), in percentage points."""
    return "—" if x is None else f"{100 * x:.1f} pts"


def usd(x: float | None) -> str:
    """A cost in US dollars: six decimals, since a single attempt often costs a fraction of a cent."""
    return "—" if x is None else f"${x:.6f}"


def seconds(x: float | None) -> str:
    """A duration; missing (nothing recorded) is "—", never 0.00 s."""
    return "—" if x is None else f"{x:.2f} s"


def interval_pts(est: float | None, low: float | None, high: float | None) -> str:
    """``+4.2 pts [-1.0, +9.4]``: a difference with its 95% interval, in percentage points."""
    if est is None:
        return "—"
    if low is None or high is None:
        return pts(est)
    return f"{pts(est)} [{100 * low:+.1f}, {100 * high:+.1f}]"


def clipped_note(items: list[ComparisonItem]) -> str | None:
    """Say so when a per-task mean difference interval was cut to ±100 pts (too few tasks for the t interval)."""
    cut = [f"{it.a} vs {it.b}" for it in items if it.score.paired.mean_task_diff_clipped]
    if not cut:
        return None
    return (
        "per-task mean diff interval cut to the possible range ±100 pts (the 95% t interval over this few tasks "
        "reaches past it; cutting drops only impossible values): " + ", ".join(cut)
    )


def sign_counts(sign: SignTest) -> str:
    """Discordant tasks, read as B relative to A: ``+3/−1`` = 3 tasks solved only under B, 1 only under A."""
    return f"+{sign.b_only}/−{sign.a_only}"


#: Column headers of the headline's two intervals: each says what it generalises to.
HEADLINE_HEADERS = ["config", SCORE_FAIL, THESE_TASKS_INTERVAL, NEW_TASKS_INTERVAL]
HEADLINE_NOTE = (
    f"Two intervals, two questions. *{THESE_TASKS_INTERVAL}*: the rate more attempts on these same "
    "tasks would give (trials independent given the tasks). "
    f"*{NEW_TASKS_INTERVAL}*: the rate on a new sample of tasks from the same population (tasks are "
    "the sampling unit: clustered SE with a t quantile on tasks − 1 df); read a leaderboard number with "
    "this one."
)


def headline_rows(configs: Sequence[ConfigStats]) -> list[list[str]]:
    """One row per configuration: headroom's score with its on-these-tasks and new-tasks intervals."""
    rows = []
    for c in configs:
        these, new = c.score_intervals.these_tasks, c.score_intervals.new_tasks
        new_txt = (
            "—"
            if new.low is None or new.high is None
            else f"[{100 * new.low:.1f}, {100 * new.high:.1f}] ({new.n_tasks} tasks, df {new.df})"
        )
        rows.append(
            [
                c.label,
                pct(these.estimate),
                "—" if these.low is None or these.high is None else f"[{100 * these.low:.1f}, {100 * these.high:.1f}]",
                new_txt,
            ]
        )
    return rows
