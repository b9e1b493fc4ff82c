"""The engine's decisions as pure functions: what is left to run, and how a try's result settles.

Both the CLI's loop (:mod:`orchestrator.engine.execute`) and the in-cluster controller
call these, so a trial is judged, redacted and retried by the same rules
wherever it ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from orchestrator.agentio.redact import cut_tail, redact, scrub_sections
from orchestrator.agentio.text import valid_tree
from orchestrator.contract.grade import Grade, grade
from orchestrator.engine.classify import agent_not_found, classify, model_side
from orchestrator.spec.evidence import AgentNotFound, Evidence, GradeRecord
from orchestrator.spec.experiment import RetryPolicy
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.grader import GoldenGrader
from orchestrator.spec.outcome import HarnessReason, InfraReason, ModelReason, Outcome
from orchestrator.spec.trial import Trial, Verdict
from orchestrator.store.base import TryRecord


@dataclass(frozen=True)
class Pending:
    """What a run still has to do."""

    queue: list[tuple[Trial, int]]  # (trial, next try index), in plan order
    done: int  # trials with a final result


def pending_tries(
    trials: Iterable[Trial], tries: Mapping[str, list[TryRecord]], in_flight: Iterable[str] = ()
) -> Pending:
    """Trials without a final result, each with the next unused try number.

    A trial with a try still in flight (adopted after a restart) is not queued again.
    """
    busy = set(in_flight)
    queue: list[tuple[Trial, int]] = []
    done = 0
    for t in trials:
        rows = tries.get(t.trial_id, [])
        if any(r.final and r.status == "finished" for r in rows):
            done += 1
        elif t.trial_id not in busy:
            queue.append((t, 1 + max((r.try_index for r in rows), default=-1)))
    return Pending(queue, done)


def finished_counts(tries: Mapping[str, list[TryRecord]]) -> dict[str, int]:
    return {tid: sum(1 for r in rows if r.status == "finished") for tid, rows in tries.items()}


@dataclass(frozen=True)
class Settlement:
    facts: TrialFacts  # redacted: safe to store
    verdict: Verdict
    final: bool  # False: an infra error worth another try


def error_facts(exc: BaseException) -> TrialFacts:
    """Facts for a try that failed inside headroom (an exception), so it is recorded, not lost."""
    return TrialFacts(
        enforcement="unknown",
        request_cpus=0,
        request_memory_bytes=0,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="unknown",
        extra=Evidence(orchestrator_error=f"{type(exc).__name__}: {exc}"),
    )


def unstorable(facts: TrialFacts, exc: BaseException, secrets: list[str]) -> Settlement:
    """The settlement to record when a try's evidence could not be stored: ``harness_error`` with the reason.

    The store refused what the try left (a value SQLite or JSON cannot hold). That is headroom's
    failure to keep the evidence, not the agent's result, so it is a harness error, final (a retry
    would meet the same data), and the sweep and any later resume go on.
    """
    why = redact(valid_tree(f"storing the try's evidence failed: {type(exc).__name__}: {exc}"[:500]), secrets)
    kept = facts.model_copy(
        update={
            "agent": None,
            "verifier": None,
            "agent_result": {},
            "reward": None,
            "reward_error": None,
            "infra_hint": None,
            "infra_detail": None,
            "setup_error": None,
            "peak_memory_bytes": None,
            "cpu_time_s": None,
            "model_usage": None,
            "extra": Evidence(storage_error=why),
        }
    )
    return Settlement(kept, Verdict(Outcome.HARNESS_ERROR, HarnessReason.ORCHESTRATOR_ERROR), final=True)


def apply_grader(
    grader: GoldenGrader, facts: TrialFacts, verdict: Verdict, reward_threshold: float
) -> tuple[TrialFacts, Verdict]:
    """A golden task: the grader, not the tests' reward, judges the agent's answer.

    Infra errors and timeouts stand: there was no fair attempt to grade; so do verdicts from
    headroom's own channels about the agent's state (``agent_not_found``, ``unjudged_state``).
    Grading runs on the agent's answer, so an answer that breaks a grader is a failed answer
    (the reason kept as evidence), never an exception: that would crash the sweep or the
    controller, and a harness error would drop the try from the score. For the same reason an
    answer that is missing or not text (the agent's self-report is the agent's own) is
    ``failed(no_answer)``, never a harness error.
    """
    if verdict.outcome in (Outcome.INFRA_ERROR, Outcome.TIMEOUT):
        return facts, verdict
    if verdict.reason in (HarnessReason.AGENT_NOT_FOUND, ModelReason.UNJUDGED_STATE):
        return facts, verdict
    answer = facts.agent_result.get("answer")
    try:
        g = grade(grader, answer)
    except Exception as exc:  # noqa: BLE001 -- see above (RecursionError included)
        g = Grade(
            0.0 if isinstance(answer, str) else None,
            checks={"grader": False},
            notes={"grader": f"grading the answer failed: {type(exc).__name__}: {str(exc)[:300]}"},
        )
    record = GradeRecord(checks=g.checks, abstained=g.abstained)
    if g.notes:
        record.notes = g.notes
    missing = (
        None
        if g.reward is not None
        else (
            "missing: no 'answer' in the agent result"
            if answer is None
            else f"malformed: the agent result's 'answer' is {type(answer).__name__}, not text"
        )
    )
    extra = facts.extra.model_copy()
    extra.grade = record
    facts = facts.model_copy(update={"reward": g.reward, "reward_error": missing, "extra": extra})
    if g.reward is None:
        return facts, Verdict(Outcome.FAILED, ModelReason.NO_ANSWER)
    if g.abstained:
        return facts, Verdict(Outcome.ABSTAINED)
    return facts, Verdict(Outcome.PASSED if g.reward >= reward_threshold else Outcome.FAILED)


def _redact_facts(facts: TrialFacts, secrets: list[str]) -> TrialFacts:
    """Redact everything, then cut the step tails (read with slack, so a secret printed across the
    cut was redacted whole) and scrub a secret's fragment left at any cut edge."""
    # Every string, wherever it sits: redaction walks the facts' JSON, then the typed model takes it back.
    out = TrialFacts.model_validate(redact(valid_tree(facts.model_dump(mode="json")), secrets))
    for step in (out.agent, out.verifier):
        if step is not None:
            step.stdout_tail = cut_tail(step.stdout_tail, secrets)
            step.stderr_tail = cut_tail(step.stderr_tail, secrets)
    if out.extra.log_tail is not None:
        out.extra.log_tail = scrub_sections(out.extra.log_tail, secrets)
    return out


def settle(
    result: TrialFacts | BaseException,
    *,
    reward_threshold: float,
    retry: RetryPolicy,
    finished_before: int,
    secrets: list[str],
    grader: GoldenGrader | None = None,
) -> Settlement:
    """Classify (or grade, for a golden task), redact, and decide whether to try again.

    ``finished_before`` counts the trial's earlier finished tries, so retries stay bounded.
    """
    if isinstance(result, BaseException):
        facts, verdict = error_facts(result), Verdict(Outcome.HARNESS_ERROR, HarnessReason.ORCHESTRATOR_ERROR)
    else:
        facts, verdict = result, classify(result, reward_threshold)
        if grader is not None:
            facts, verdict = apply_grader(grader, facts, verdict, reward_threshold)
        verdict = model_side(facts, verdict)  # the gateway's evidence: a spent limit, a starved try
        if facts.agent is not None and agent_not_found(facts.agent):  # evidence only: see classify
            lines = [ln for ln in facts.agent.stderr_tail.splitlines() if ln.strip()]
            extra = facts.extra.model_copy()
            extra.agent_not_found = AgentNotFound(
                exit_code=facts.agent.exit_code, evidence=lines[-1][-500:] if lines else None
            )
            facts = facts.model_copy(update={"extra": extra})
    # One choke point for secrets and for text: everything a backend saw passes through here before the
    # store, redacted and made valid UTF-8 (orchestrator.agentio.text).
    facts = _redact_facts(facts, secrets)
    again = (
        verdict.outcome is Outcome.INFRA_ERROR
        and verdict.reason in retry.reasons
        and finished_before + 1 <= retry.max_retries
    )
    return Settlement(facts, verdict, final=not again)


#: The longest wait before a starved try's retry.
MAX_RETRY_WAIT_S = 600.0


def retry_wait(settlement: Settlement, base_s: float, finished_before: int) -> float:
    """Seconds before a retry of a starved try (``infra_error(model_unavailable)``) may start: ``base_s`` doubled
    for each finished try before it (at most 10 minutes), or the provider's last Retry-After if longer.
    Every other retry starts at once."""
    if settlement.final or settlement.verdict.reason is not InfraReason.MODEL_UNAVAILABLE:
        return 0.0
    usage = settlement.facts.model_usage
    after = usage.starved.retry_after_s if usage is not None and usage.starved is not None else None
    return max(min(base_s * 2**finished_before, MAX_RETRY_WAIT_S), min(after or 0.0, MAX_RETRY_WAIT_S))
