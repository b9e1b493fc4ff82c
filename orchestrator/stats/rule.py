"""The calibration decision, shared by the run-level recommendation and the per-task bands.

WHY one function: ``headroom report`` (stats.calibration, over a benchmark's tasks) and ``headroom runs
calibrate`` (stats.bands, over one task's trials) answer the same question -- which limit to publish --
and must answer it by the same rule. Both feed it, per candidate limit in order of headroom, three
verdicts already adjusted within their families (Holm): are the infra errors significantly fewer than at
the strict limit, is the score shown equivalent (TOST within the margin), does the score change; plus
whether the candidate may be published at all (the bands publish bounded limits only: a ceiling is a
number). The rule:

1. A candidate is *eligible* when its infra errors are significantly fewer, its score is shown
   equivalent, and it comes before the first candidate whose score changes.
2. The first eligible candidate is chosen. A larger eligible one replaces it only if it has significantly
   fewer infra errors than the one chosen (``step_p``; a fixed sequence at ``alpha``, the first failure
   stops).

Equivalence is required of every published limit, the first included: a limit whose change of the score
is too small for this data to see and too large for it to rule out could otherwise be published whenever
it removes infra errors (a +5-point change at 89 tasks x 5 attempts is seen by the paired t in about 40%
of sweeps), so "no change found" is never read as "no change".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class Decision:
    chosen: int | None  # index of the published candidate; None: the strict limit
    change_at: int | None  # first candidate whose score changes
    steps: list[tuple[int, int, float]] = field(default_factory=list)  # (from, to, p) of the fixed sequence

    def eligible(self, i: int, reduced: bool, equivalent: bool, allowed: bool) -> bool:
        return reduced and equivalent and allowed and (self.change_at is None or i < self.change_at)


def decide(
    reduced: Sequence[bool],
    equivalent: Sequence[bool],
    changed: Sequence[bool],
    allowed: Sequence[bool],
    step_p: Callable[[int, int], float],
    alpha: float,
) -> Decision:
    """The published candidate (module docstring); ``step_p(i, j)``: p of "fewer infra errors at j than at i"."""
    d = Decision(None, next((i for i, c in enumerate(changed) if c), None))
    for i in range(len(reduced)):
        if not d.eligible(i, reduced[i], equivalent[i], allowed[i]):
            continue
        if d.chosen is None:
            d.chosen = i
            continue
        p = step_p(d.chosen, i)
        d.steps.append((d.chosen, i, p))
        if p >= alpha:
            break
        d.chosen = i
    return d
