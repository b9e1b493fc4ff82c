"""Raw facts -> exactly one outcome (+ reason). The same rules for every backend.

Order matters and encodes the taxonomy's priorities:

1. The trial could not be set up, or the backend saw an infra failure
   (eviction, unschedulable, image pull, ...)        -> infra_error(reason)
2. Any OOM kill inside the trial, in either step      -> infra_error(oom_killed)
   (as with ``memory.oom.group`` on a cgroup v2 node, one kill ends the container)
3. The agent exceeded its budget                      -> timeout
4. The verifier timed out, crashed without a reward,
   or wrote a missing or malformed reward             -> harness_error(reason)
5. reward >= threshold                                -> passed, else failed

The agent's own exit code does not decide the outcome: as in Harbor, the
verifier judges the work whatever the agent's exit status.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.outcome import HarnessReason, InfraReason, Outcome


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: str | None = None

    def __str__(self) -> str:
        return f"{self.outcome.value}({self.reason})" if self.reason else self.outcome.value


def classify(facts: TrialFacts, reward_threshold: float = 1.0) -> Verdict:
    if facts.infra_hint:
        return Verdict(Outcome.INFRA_ERROR, InfraReason(facts.infra_hint).value)
    if facts.setup_error or (facts.agent and facts.agent.spawn_error):
        return Verdict(Outcome.INFRA_ERROR, InfraReason.SPAWN_FAILED.value)
    steps = [s for s in (facts.agent, facts.verifier) if s is not None]
    if any(s.oom_kills > 0 for s in steps):
        return Verdict(Outcome.INFRA_ERROR, InfraReason.OOM_KILLED.value)
    if facts.agent is None:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.ORCHESTRATOR_ERROR.value)
    if facts.agent.timed_out:
        return Verdict(Outcome.TIMEOUT)
    v = facts.verifier
    if v is None or v.spawn_error:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_CRASHED.value)
    if v.timed_out:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_TIMEOUT.value)
    if facts.reward is None:
        if facts.reward_error and facts.reward_error.startswith("malformed"):
            return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MALFORMED.value)
        if v.exit_code not in (0, None):
            return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_CRASHED.value)
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MISSING.value)
    return Verdict(Outcome.PASSED if facts.reward >= reward_threshold else Outcome.FAILED)
