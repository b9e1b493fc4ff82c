"""One name for each figure, in every format: the report's glossary.

Every renderer (terminal, Markdown, HTML, the viewer) and the scoring rules' titles import these
names, so a figure is never "pass rate" in one place, "score (infra = fail)" in another and
"score excl. infra" in a third. :data:`GLOSSARY` defines each name once; the JSON keeps its own
field names (given beside each definition). Plain constants and string helpers only: this module is
imported where `headroom --help` must stay fast. It sits with the statistics, below the report, since
the scoring rules title themselves with it.
"""

from __future__ import annotations

from typing import Final

#: headroom's headline rule (``headroom:infra-as-failure``; ``score_infra_as_failure`` in the JSON).
SCORE_FAIL: Final = "headroom, infra errors as failures"
#: headroom's other rule (``headroom:infra-excluded``; ``score_infra_excluded`` in the JSON).
SCORE_EXCL: Final = "headroom, infra errors excluded"
INFRA_RATE: Final = "infra-error rate"
TIMEOUT_RATE: Final = "timeout rate"
HARNESS_RATE: Final = "harness-error rate"
ABSTENTION_RATE: Final = "abstention rate"
CLUSTER_SCORE: Final = "cluster-level score"
WORST_CLUSTER: Final = "worst cluster"
THESE_TASKS_INTERVAL: Final = "95% interval: these tasks (Wilson, over trials)"
NEW_TASKS_INTERVAL: Final = "95% interval: new tasks (t over tasks, clustered)"
SCORE_DIFF: Final = "score diff"

GLOSSARY: Final[dict[str, str]] = {
    SCORE_FAIL: "passes / all trials: infra and harness errors count as failures (score_infra_as_failure; "
    "rule headroom:infra-as-failure)",
    SCORE_EXCL: "passes / trials that were not infra or harness errors (score_infra_excluded; rule "
    "headroom:infra-excluded): the agent's score where the infrastructure held",
    INFRA_RATE: "infra errors / all trials (infra_error_rate)",
    TIMEOUT_RATE: "agent timeouts / all trials (timeout_rate)",
    HARNESS_RATE: "harness errors / all trials (harness_error_rate)",
    ABSTENTION_RATE: "abstentions / all trials (abstention_rate)",
    CLUSTER_SCORE: "the mean over task clusters of each cluster's mean per-task pass rate (clusters.cluster_score)",
    WORST_CLUSTER: "the cluster with the lowest cluster-level score (clusters.worst_cluster_score)",
    THESE_TASKS_INTERVAL: "what more attempts on these same tasks would give (score_intervals.these_tasks)",
    NEW_TASKS_INTERVAL: "what a new sample of tasks from the same population would give (score_intervals.new_tasks)",
    SCORE_DIFF: f"B − A in {SCORE_FAIL}, in percentage points",
}


def runs_phrase(n: int, basis: str) -> str:
    """``1 source run``, ``3 source runs``, ``1 attempt index``, ``6 attempt indices``: a count of runs in its basis."""
    if basis == "attempt index":
        return f"{n} attempt {'index' if n == 1 else 'indices'}"
    if basis.endswith("runs"):
        return f"{n} {basis[:-1] if n == 1 else basis}"
    return f"{n} {basis}"


def trials_phrase(n: int) -> str:
    return f"{n} trial{'' if n == 1 else 's'}"
