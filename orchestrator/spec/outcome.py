"""The one outcome taxonomy every backend classifies into.

A trial ends in exactly one :class:`Outcome`. ``abstained`` is its own outcome,
not a kind of failure: an honest "cannot answer", allowed by a golden grader,
must never be read as "answered wrong". It still is not a pass (it counts in a
pass rate's denominator) and it says something about the agent (it is one of
:data:`MODEL_OUTCOMES`). Infrastructure errors carry an
:class:`InfraReason` so a report can tell an OOM kill from an eviction; harness
errors carry a :class:`HarnessReason`. Both enumerations are closed on purpose:
a new reason is a design change, not a free-form string. A backend that reports
a reason this version does not know gets :attr:`InfraReason.OTHER` (the raw text
is kept as evidence), so a newer backend can never crash a sweep.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # verifier ran; reward below threshold: the agent's fault
    TIMEOUT = "timeout"  # the agent step exceeded its budget
    INFRA_ERROR = "infra_error"  # the environment failed the trial, not the agent
    HARNESS_ERROR = "harness_error"  # verifier crashed, reward missing/malformed, our bug
    ABSTAINED = "abstained"  # an honest "cannot answer" that the golden grader allows: not an answer, not a wrong one


class InfraReason(StrEnum):
    OOM_KILLED = "oom_killed"
    #: inferred, never observed by headroom: an imported trial whose agent step was SIGKILLed (exit 137, the
    #: shell's "Killed") and then scored 0 without an exception; SIGKILL alone does not prove the OOM killer
    SUSPECTED_OOM = "suspected_oom"
    STORAGE_LIMIT = "storage_limit"  # the trial exceeded its disk limit (ephemeral-storage eviction)
    EVICTED = "evicted"  # node-pressure eviction
    API_EVICTION = "api_eviction"
    TAINT_EVICTION = "taint_eviction"
    UNSCHEDULABLE = "unschedulable"
    IMAGE_PULL = "image_pull"
    CONTAINER_CONFIG = "container_config"
    DEADLINE_EXCEEDED = "deadline_exceeded"  # the backend's own deadline (activeDeadlineSeconds)
    NODE_LOST = "node_lost"
    PREEMPTED = "preempted"
    POD_GC = "pod_gc"
    API_ERROR = "api_error"
    POD_DELETED = "pod_deleted"
    SPAWN_FAILED = "spawn_failed"  # the process or container could not be started
    AGENT_SETUP_FAILED = "agent_setup_failed"  # the agent's install phase failed, before the agent ran
    #: the model gateway saw the provider starve the agent: rate limits, quota, 5xx, timeouts (docs/agents.md)
    MODEL_UNAVAILABLE = "model_unavailable"
    OTHER = "other"  # a backend reported a reason this version does not know


#: Infra reasons a trial's own processes bring about against its own limits: using memory (the
#: measurement itself), writing past its disk limit. Retrying them would let an agent re-roll a try
#: it is failing by blowing a limit on purpose (a probe scored 4/4 so at 50% accuracy). A node-pressure
#: eviction is the kubelet's choice over the whole node (other pods' use included), so it stays retryable.
TRIAL_CAUSED: frozenset[InfraReason] = frozenset(
    {InfraReason.OOM_KILLED, InfraReason.SUSPECTED_OOM, InfraReason.STORAGE_LIMIT}
)


class HarnessReason(StrEnum):
    REWARD_MISSING = "reward_missing"
    REWARD_MALFORMED = "reward_malformed"
    VERIFIER_CRASHED = "verifier_crashed"
    VERIFIER_TIMEOUT = "verifier_timeout"
    ORCHESTRATOR_ERROR = "orchestrator_error"
    #: headroom's own check, in the trial's environment before the agent got control, found that the agent
    #: command's program does not resolve: the agent never ran (never read from the agent's exit code)
    AGENT_NOT_FOUND = "agent_not_found"


class ModelReason(StrEnum):
    """Why a model outcome is what it is, where that matters.

    ``abstained`` as a *reason* is the shape stores, bundles and Trial objects
    written before abstention became an :class:`Outcome` hold (``failed(abstained)``);
    :func:`current_outcome` reads it as the outcome it now is. Nothing writes it.
    """

    ABSTAINED = "abstained"
    #: the sanitiser could not judge what the agent left (an unlistable folder, its budget spent, an agent
    #: process outliving the stop): the verifier did not run
    UNJUDGED_STATE = "unjudged_state"
    #: the verifier, run on what the agent left, timed out, crashed or ended without a usable reward
    VERIFIER_BROKEN = "verifier_broken"
    #: a golden task: the agent's self-report holds no answer, or one that is not text
    NO_ANSWER = "no_answer"
    #: the try spent a per-try limit the model gateway enforces (gateway.limits), and did not pass
    TOKEN_LIMIT = "token_limit"
    COST_LIMIT = "cost_limit"
    WORKING_TIME_LIMIT = "working_time_limit"


Reason = InfraReason | HarnessReason | ModelReason

#: Outcomes that say something about the agent (used for "infra excluded" scores).
MODEL_OUTCOMES = frozenset({Outcome.PASSED, Outcome.FAILED, Outcome.TIMEOUT, Outcome.ABSTAINED})

#: SQL (for a table aliased ``e``) reading an older ``failed(abstained)`` row as ``abstained``, reason NULL.
LEGACY_ABSTAINED = "(e.outcome = 'failed' AND e.reason = 'abstained')"
OUTCOME_SQL = f"CASE WHEN {LEGACY_ABSTAINED} THEN 'abstained' ELSE e.outcome END"
REASON_SQL = f"CASE WHEN {LEGACY_ABSTAINED} THEN NULL ELSE e.reason END"


def current_outcome(outcome: str | None, reason: str | None) -> tuple[str | None, str | None]:
    """A stored (outcome, reason) in this version's taxonomy.

    Before abstention was an outcome it was stored as ``failed`` with reason
    ``abstained``; such a row is read as ``abstained`` with no reason, so an old
    store, bundle or Trial status reads exactly like a new one (no migration needed).
    """
    if outcome == Outcome.FAILED.value and reason == ModelReason.ABSTAINED.value:
        return Outcome.ABSTAINED.value, None
    return outcome, reason


def infra_reason(text: str | InfraReason) -> InfraReason:
    """A backend's reason string as a typed reason; unknown text becomes OTHER, never an error."""
    try:
        return InfraReason(text)
    except ValueError:
        return InfraReason.OTHER


def parse_reason(text: str | None) -> Reason | None:
    """A stored reason string back to its type (stores and imports hold plain text)."""
    if text is None:
        return None
    for enum in (InfraReason, HarnessReason, ModelReason):
        try:
            return enum(text)
        except ValueError:
            continue
    return InfraReason.OTHER
