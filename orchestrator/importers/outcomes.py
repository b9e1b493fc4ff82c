"""How results produced elsewhere map onto headroom's outcome taxonomy.

The tables below are the whole rule set; docs/import.md repeats them and every
import summary counts how often each rule fired. A Harbor exception type not
listed here is *unmapped*: the trial becomes ``harness_error(orchestrator_error)``
(it ran, but nobody can say whose failure it was) and the type is listed in the
summary so the user can map it with ``--map TYPE=OUTCOME[:REASON]``.

Agent-side failures (``failed`` below: context or output length exceeded, a
non-zero agent exit) let the verifier's reward decide when there is one, as
headroom does for its own trials (the agent's exit status never decides).
A timeout stays a timeout even when the verifier later passed the work: the
agent exceeded its budget. The source harness counts such a trial by its
reward; the report's scoring rules show both readings and count the trials
that move between them by reason.

The verdict reads only the table (with ``--map`` entries laid over it), so
``--map`` restating a default changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import UserError
from orchestrator.spec.outcome import HarnessReason, InfraReason, Outcome
from orchestrator.spec.unknown import did_you_mean

HARBOR_EXCEPTIONS: dict[str, tuple[str, str | None]] = {
    "AgentTimeoutError": ("timeout", None),
    "AgentSetupTimeoutError": ("infra_error", InfraReason.SPAWN_FAILED.value),
    "EnvironmentStartTimeoutError": ("infra_error", InfraReason.SPAWN_FAILED.value),
    "EnvironmentBuildTimeoutError": ("infra_error", InfraReason.IMAGE_PULL.value),
    "VerifierTimeoutError": ("harness_error", HarnessReason.VERIFIER_TIMEOUT.value),
    "RewardFileNotFoundError": ("harness_error", HarnessReason.REWARD_MISSING.value),
    "RewardFileEmptyError": ("harness_error", HarnessReason.REWARD_MALFORMED.value),
    "VerifierOutputParseError": ("harness_error", HarnessReason.REWARD_MALFORMED.value),
    "AddTestsDirError": ("harness_error", HarnessReason.ORCHESTRATOR_ERROR.value),
    "DownloadVerifierDirError": ("harness_error", HarnessReason.ORCHESTRATOR_ERROR.value),
    "CancelledError": ("harness_error", HarnessReason.ORCHESTRATOR_ERROR.value),
    "ContextLengthExceededError": ("failed", None),
    "OutputLengthExceededError": ("failed", None),
    "NonZeroAgentExitCodeError": ("failed", None),
    # Harbor's own sandbox memory errors (its error policy files them as sandbox failures, not the agent's)
    "MemoryLimitExceededError": ("infra_error", InfraReason.OOM_KILLED.value),
    "SandboxLikelyOutOfMemoryError": ("infra_error", InfraReason.SUSPECTED_OOM.value),
}


def _camel(reason: str) -> str:
    return "".join(part.capitalize() for part in reason.split("_"))


#: headroom's own verdicts as exception types, written by ``runs export --format harbor`` where Harbor has no
#: type of the same meaning (orchestrator/export/harbor_job.py): every reason of the taxonomy has one, so an
#: exported run imports back with the verdicts it had. Generated from the enums: a new reason gets its type.
#: Each is a verdict headroom already reached with the reward in hand, so it stands as written (the reward
#: decides only under Harbor's own agent-side types); ``--map`` can still restate it.
HEADROOM_EXCEPTIONS: dict[str, tuple[str, str | None]] = {
    **{f"HeadroomInfra{_camel(r.value)}Error": (Outcome.INFRA_ERROR.value, r.value) for r in InfraReason},
    **{f"HeadroomHarness{_camel(r.value)}Error": (Outcome.HARNESS_ERROR.value, r.value) for r in HarnessReason},
    "HeadroomAbstainedError": (Outcome.ABSTAINED.value, None),
    # failed for a reason the reward does not show (no reward: the verifier never ran; a sanitiser's finding)
    "HeadroomFailedError": (Outcome.FAILED.value, None),
}
UNMAPPED_EXCEPTION: tuple[str, str | None] = ("harness_error", HarnessReason.ORCHESTRATOR_ERROR.value)

#: Terminal-Bench ``failure_mode`` when ``is_resolved`` is not true. ``is_resolved`` true is passed,
#: except after an agent timeout (then timeout, as above).
TB_FAILURE_MODES: dict[str, tuple[str, str | None]] = {
    "unset": ("failed", None),
    "none": ("failed", None),
    "agent_timeout": ("timeout", None),
    "test_timeout": ("harness_error", HarnessReason.VERIFIER_TIMEOUT.value),
    "parse_error": ("harness_error", HarnessReason.REWARD_MALFORMED.value),
    "agent_installation_failed": ("infra_error", InfraReason.SPAWN_FAILED.value),
    "unknown_agent_error": ("failed", None),
    "fatal_llm_parse_error": ("failed", None),
    "context_length_exceeded": ("failed", None),
    "output_length_exceeded": ("failed", None),
    "unknown": ("harness_error", HarnessReason.ORCHESTRATOR_ERROR.value),
}


@dataclass(frozen=True)
class Verdict:
    outcome: str
    reason: str | None
    rule: str  # which rule decided, for the summary
    unmapped: str | None = None  # the source's label when no rule covered it


def parse_overrides(items: tuple[str, ...] | list[str]) -> dict[str, tuple[str, str | None]]:
    """``--map TYPE=OUTCOME[:REASON]`` -> {TYPE: (outcome, reason)}, checked against the taxonomy."""
    out: dict[str, tuple[str, str | None]] = {}
    reasons = {
        Outcome.INFRA_ERROR.value: {r.value for r in InfraReason},
        Outcome.HARNESS_ERROR.value: {r.value for r in HarnessReason},
    }
    for item in items:
        name, sep, target = item.partition("=")
        outcome, _, reason = target.partition(":")
        if not sep or not name or outcome not in {o.value for o in Outcome}:
            raise UserError(
                f"expected TYPE=OUTCOME[:REASON] with OUTCOME one of "
                f"{', '.join(o.value for o in Outcome)}, got {item!r}{did_you_mean(outcome, [o.value for o in Outcome])}",
                field="--map",
            )
        if outcome in reasons:
            if reason not in reasons[outcome]:
                raise UserError(
                    f"{outcome} needs a reason, one of {', '.join(sorted(reasons[outcome]))}"
                    + (f"; got {reason!r}{did_you_mean(reason, reasons[outcome])}" if reason else ""),
                    field="--map",
                )
        elif reason:
            raise UserError(f"{outcome} takes no reason", field="--map")
        out[name] = (outcome, reason or None)
    return out


def refuse_unknown_types(overrides: dict[str, tuple[str, str | None]], seen: set[str]) -> None:
    """A ``--map`` TYPE that is neither a known Harbor exception or Terminal-Bench failure mode nor met in the
    sources read is a typo that would map nothing: refused, naming the closest label (exit 2)."""
    known = set(HARBOR_EXCEPTIONS) | set(HEADROOM_EXCEPTIONS) | set(TB_FAILURE_MODES) | seen
    for name in overrides:
        if name not in known:
            raise UserError(
                f"{name!r} is no Harbor exception type or Terminal-Bench failure mode known to headroom, and no trial "
                f"read records it: it would map nothing{did_you_mean(name, known)}",
                field="--map",
            )


def by_reward(reward: float | None, threshold: float, rule: str) -> Verdict:
    if reward is None:
        return Verdict("harness_error", HarnessReason.REWARD_MISSING.value, f"{rule}; no reward")
    return Verdict("passed" if reward >= threshold else "failed", None, rule)


def harbor_verdict(
    exception_type: str | None, reward: float | None, threshold: float, overrides: dict[str, tuple[str, str | None]]
) -> Verdict:
    if exception_type is None:
        return by_reward(reward, threshold, "no exception: reward decides")
    if exception_type in HEADROOM_EXCEPTIONS and exception_type not in overrides:
        outcome, reason = HEADROOM_EXCEPTIONS[exception_type]
        return Verdict(outcome, reason, f"{exception_type} -> {outcome}" + (f"({reason})" if reason else ""))
    table = {**HARBOR_EXCEPTIONS, **overrides}
    if exception_type not in table:
        outcome, reason = UNMAPPED_EXCEPTION
        return Verdict(outcome, reason, f"{exception_type} (unmapped)", unmapped=exception_type)
    outcome, reason = table[exception_type]
    if outcome in ("failed", "passed"):  # the agent's own failure (or a mapped success): the reward decides
        if reward is None:
            return Verdict("failed", None, f"{exception_type} -> failed (no reward)")
        return by_reward(reward, threshold, f"{exception_type} -> the reward decides")
    return Verdict(outcome, reason, f"{exception_type} -> {outcome}" + (f"({reason})" if reason else ""))


def tb_verdict(
    is_resolved: bool | None, failure_mode: str | None, overrides: dict[str, tuple[str, str | None]]
) -> Verdict:
    """A Terminal-Bench trial by the table (with ``--map`` entries laid over it).

    The table says what the failure mode means; ``is_resolved`` then says whether the tests
    passed. A mode the table reads as the agent's own failure (``failed``) lets the tests
    decide, as headroom does for its own trials; any other reading (``timeout``, an infra or
    harness error) stands even when the tests later passed. Restating a default with
    ``--map`` therefore changes nothing: the rule reads only the table.
    """
    mode = (failure_mode or "unset").lower()
    table = {**TB_FAILURE_MODES, **overrides}
    if mode not in table:
        outcome, reason = UNMAPPED_EXCEPTION
        return Verdict(outcome, reason, f"failure_mode {mode} (unmapped)", unmapped=mode)
    outcome, reason = table[mode]
    state = {True: "true", False: "false", None: "null"}[is_resolved]
    if outcome in ("failed", "passed"):
        if is_resolved is True:
            return Verdict(
                "passed",
                None,
                "is_resolved true -> passed"
                if mode in ("none", "unset")
                else f"is_resolved true, failure_mode {mode} -> passed (the tests decide)",
            )
        if is_resolved is None and mode in ("unset", "none"):
            return Verdict(
                "harness_error",
                HarnessReason.REWARD_MISSING.value,
                f"is_resolved null, failure_mode {mode} -> harness_error(reward_missing)",
            )
        return Verdict("failed", None, f"is_resolved {state}, failure_mode {mode} -> failed")
    return Verdict(
        outcome, reason, f"is_resolved {state}, failure_mode {mode} -> {outcome}" + (f"({reason})" if reason else "")
    )
