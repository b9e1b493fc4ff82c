"""Raw facts -> exactly one outcome (+ reason). The same rules for every backend.

Order matters and encodes the taxonomy's priorities:

1. The trial could not be set up, or the backend saw an infra failure
   (eviction, unschedulable, image pull, storage limit, ...)  -> infra_error(reason)
2. Any OOM kill inside the trial, in either step               -> infra_error(oom_killed)
   (as with ``memory.oom.group`` on a cgroup v2 node, one kill ends the container)
3. The agent exceeded its budget                               -> timeout
4. The verifier timed out, crashed (non-zero exit or killed by a
   signal) without a reward, or wrote a missing or malformed
   reward                                                      -> harness_error(reason)
5. reward >= threshold                                         -> passed, else failed

The agent's own exit code does not decide the outcome: as in Harbor, the
verifier judges the work whatever the agent's exit status. An OOM verdict
comes only from a kernel or runtime signal recorded by the backend, never from
text a workload printed.
"""

from __future__ import annotations

import math

from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.outcome import HarnessReason, InfraReason, Outcome
from orchestrator.spec.trial import Verdict

__all__ = ["Verdict", "classify"]


def classify(facts: TrialFacts, reward_threshold: float = 1.0) -> Verdict:
    if facts.infra_hint is not None:
        return Verdict(Outcome.INFRA_ERROR, facts.infra_hint)
    if facts.setup_error or (facts.agent and facts.agent.spawn_error):
        return Verdict(Outcome.INFRA_ERROR, InfraReason.SPAWN_FAILED)
    steps = [s for s in (facts.agent, facts.verifier) if s is not None]
    if any(s.oom_kills > 0 for s in steps):
        return Verdict(Outcome.INFRA_ERROR, InfraReason.OOM_KILLED)
    if facts.agent is None:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.ORCHESTRATOR_ERROR)
    if facts.agent.timed_out:
        return Verdict(Outcome.TIMEOUT)
    v = facts.verifier
    if v is None or v.spawn_error:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_CRASHED)
    if v.skipped:  # no verifier to give a reward: only a golden task's grader (settle) can judge this try
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MISSING)
    if v.timed_out:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_TIMEOUT)
    if facts.reward is None or not math.isfinite(facts.reward):
        if facts.reward_error and facts.reward_error.startswith("malformed"):
            return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MALFORMED)
        if v.signal is not None or v.exit_code not in (0, None):
            return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_CRASHED)
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MISSING)
    return Verdict(Outcome.PASSED if facts.reward >= reward_threshold else Outcome.FAILED)
