"""Raw facts -> exactly one outcome (+ reason). The same rules for every backend.

Order matters and encodes the taxonomy's priorities:

1. The trial could not be set up, or the backend saw an infra failure
   (eviction, unschedulable, image pull, storage limit, ...)  -> infra_error(reason)
2. Any OOM kill inside the trial, in either step               -> infra_error(oom_killed)
   (as with ``memory.oom.group`` on a cgroup v2 node, one kill ends the container)
3. headroom's own check, before the agent got control, found
   that the agent command's program does not resolve           -> harness_error(agent_not_found)
4. The agent exceeded its budget                               -> timeout
5. The agent left a state the sanitiser could not judge       -> failed(unjudged_state)
6. The verifier ran on the sanitised state the agent left and
   gave no usable reward (timed out, crashed, wrote none, wrote
   a malformed one)                                            -> failed(verifier_broken)
7. The verifier could not start, or (not run on the agent's
   state) timed out, crashed or wrote no usable reward          -> harness_error(reason)
8. reward >= threshold                                         -> passed, else failed

With a model gateway, :func:`model_side` then reads the gateway's evidence (settle applies it, after a
golden task's grader): a verdict that is not a pass becomes ``failed(<limit>_limit)`` when the try spent a
per-try limit, else ``infra_error(model_unavailable)`` when its provider starved it.

Rule 6: once the verifier has started on what the agent left, nothing it did can be told
apart from what the agent made it do. A reward missing or malformed after a clean exit is
as much the agent's doing as a crash (an answer that makes ``float()`` raise inside a
``|| true``, a file the verifier copies into its reward): as ``harness_error`` it would
drop out of the infra-excluded score, a way out the agent could choose. The cost falls on
a task whose verifier is broken for everyone: every agent, the oracle included, fails it
with ``verifier_broken``, which is how such a task is found (an oracle run of it). Only what comes from headroom's own channels (the verifier could not be
spawned; the sanitiser never let it start) is a harness or infra verdict.

The agent's own exit code does not decide the outcome: as in Harbor, the
verifier judges the work whatever the agent's exit status. That holds for 126
and 127 too: the agent writes its exit code, so "command not found" read from it
would let a failing agent turn its failure into a harness error that the
infra-excluded score leaves out. A command that cannot start is caught before it
runs, by headroom's own check in the trial's environment (rule 3,
orchestrator/contract/agent_check.py) and before the sweep
(orchestrator.engine.preflight); after the agent started, an exit of 126/127 is
kept as evidence (``extra.agent_not_found``, :func:`agent_not_found`), never a verdict. An OOM verdict
comes only from a kernel or runtime signal recorded by the backend, never from
text a workload printed.
"""

from __future__ import annotations

import math

from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.outcome import HarnessReason, InfraReason, ModelReason, Outcome
from orchestrator.spec.trial import Verdict

__all__ = ["Verdict", "classify", "model_side"]

#: A per-try limit the gateway enforced -> the reason of a try that hit it and did not pass.
LIMIT_REASONS = {
    "tokens": ModelReason.TOKEN_LIMIT,
    "cost": ModelReason.COST_LIMIT,
    "working_time": ModelReason.WORKING_TIME_LIMIT,
}


#: What a shell exits with when the command is not found (127) or found but not executable (126).
NOT_FOUND_EXITS = (126, 127)


def agent_not_found(agent: StepFacts) -> bool:
    """The agent's step ended as a shell reports a command not found or not executable: evidence for the
    report and the user, not a verdict (the agent chooses its own exit code)."""
    return agent.signal is None and agent.exit_code in NOT_FOUND_EXITS


def classify(facts: TrialFacts, reward_threshold: float = 1.0) -> Verdict:
    if facts.infra_hint is not None:
        return Verdict(Outcome.INFRA_ERROR, facts.infra_hint)
    if facts.setup_error or (facts.agent and facts.agent.spawn_error):
        return Verdict(Outcome.INFRA_ERROR, InfraReason.SPAWN_FAILED)
    steps = [s for s in (facts.agent, facts.verifier) if s is not None]
    if any(s.oom_kills > 0 for s in steps):
        return Verdict(Outcome.INFRA_ERROR, InfraReason.OOM_KILLED)
    if facts.agent_unresolved:  # headroom's own check before the agent ran: never the agent's exit code or output
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.AGENT_NOT_FOUND)
    if facts.agent is None:
        if facts.agent_fault:  # e.g. the agent stopped the pod's runner: no step on record, and the agent's doing
            return Verdict(Outcome.FAILED, ModelReason.UNJUDGED_STATE)
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.ORCHESTRATOR_ERROR)
    if facts.agent.timed_out:
        return Verdict(Outcome.TIMEOUT)
    if facts.agent_fault:
        return Verdict(Outcome.FAILED, ModelReason.UNJUDGED_STATE)
    v = facts.verifier
    if v is None or v.spawn_error:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_CRASHED)
    if v.skipped:  # no verifier to give a reward: only a golden task's grader (settle) can judge this try
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MISSING)
    usable = facts.reward is not None and math.isfinite(facts.reward)
    if facts.verifier_on_agent_state and (v.timed_out or not usable):  # rule 6
        return Verdict(Outcome.FAILED, ModelReason.VERIFIER_BROKEN)
    if v.timed_out:
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_TIMEOUT)
    if facts.reward is None or not math.isfinite(facts.reward):
        if facts.reward_error and facts.reward_error.startswith("malformed"):
            return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MALFORMED)
        if v.signal is not None or v.exit_code not in (0, None):
            return Verdict(Outcome.HARNESS_ERROR, HarnessReason.VERIFIER_CRASHED)
        return Verdict(Outcome.HARNESS_ERROR, HarnessReason.REWARD_MISSING)
    return Verdict(Outcome.PASSED if facts.reward >= reward_threshold else Outcome.FAILED)


def model_side(facts: TrialFacts, verdict: Verdict) -> Verdict:
    """What the model gateway saw changes a model verdict that is not a pass (docs/agents.md, "Starved tries"):

    - a per-try limit spent: ``failed`` with the limit's reason (the agent's own spending, as a timeout is);
    - else a try its provider starved (``model_usage.starved``, the gateway's rule over its calls):
      ``infra_error(model_unavailable)``, retryable.

    A pass stands (the agent solved the task whatever its calls met), and so do every infra and harness
    verdict and ``failed(unjudged_state)`` (the agent's own misconduct is no provider's fault).
    """
    usage = facts.model_usage
    if usage is None or verdict.outcome not in (Outcome.FAILED, Outcome.TIMEOUT, Outcome.ABSTAINED):
        return verdict
    if verdict.reason is ModelReason.UNJUDGED_STATE:
        return verdict
    if usage.limit_hit is not None:
        return Verdict(Outcome.FAILED, LIMIT_REASONS[usage.limit_hit])
    if usage.starved is not None:
        return Verdict(Outcome.INFRA_ERROR, InfraReason.MODEL_UNAVAILABLE)
    return verdict
