"""How the model gateway's evidence settles a try (orchestrator.engine.classify.model_side, settle.retry_wait):
a starved try is infra_error(model_unavailable) and retried after the provider's wait, a spent limit is the
agent's failure with its own reason, and a pass or the agent's own misconduct stands."""

from __future__ import annotations

import pytest

from orchestrator.engine.settle import MAX_RETRY_WAIT_S, retry_wait, settle
from orchestrator.spec.experiment import RetryPolicy
from orchestrator.spec.facts import ModelUsage, Starved, TrialFacts
from orchestrator.spec.steps import StepFacts

STARVED = Starved(rule="final_call", final_call="429 rate_limit", window_calls=3, window_failed=3, retry_after_s=40)


def facts(reward: float, usage: ModelUsage | None, **kw: object) -> TrialFacts:
    return TrialFacts(
        enforcement="cgroup-v2",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=1,
        limit_memory_bytes=1,
        qos_class="Guaranteed",
        agent=StepFacts(name="agent", exit_code=1, timed_out=bool(kw.pop("timed_out", False))),
        verifier=StepFacts(name="verifier", exit_code=0),
        reward=reward,
        model_usage=usage,
        **kw,  # type: ignore[arg-type]
    )


def verdict(f: TrialFacts, retries: int = 0, before: int = 0) -> str:
    s = settle(f, reward_threshold=1.0, retry=RetryPolicy(max_retries=retries), finished_before=before, secrets=[])
    return f"{s.verdict}{'' if s.final else ' (again)'}"


@pytest.mark.parametrize(
    "f, expected",
    [
        (facts(0.0, ModelUsage(starved=STARVED)), "infra_error(model_unavailable)"),
        (facts(0.0, ModelUsage(starved=STARVED), timed_out=True), "infra_error(model_unavailable)"),
        (facts(1.0, ModelUsage(starved=STARVED)), "passed"),  # it solved the task: the pass stands
        (facts(0.0, ModelUsage()), "failed"),  # no gateway evidence against the agent's failure
        (facts(0.0, None), "failed"),  # no gateway at all
        (facts(0.0, ModelUsage(limit_hit="tokens", starved=STARVED)), "failed(token_limit)"),  # its own spending
        (facts(0.0, ModelUsage(limit_hit="cost")), "failed(cost_limit)"),
        (facts(0.0, ModelUsage(limit_hit="working_time"), timed_out=True), "failed(working_time_limit)"),
        (facts(1.0, ModelUsage(limit_hit="tokens")), "passed"),
        # the agent's own misconduct, and infra the backend saw, are never the provider's
        (facts(0.0, ModelUsage(starved=STARVED), agent_fault="left a process"), "failed(unjudged_state)"),
        (facts(0.0, ModelUsage(starved=STARVED), infra_hint="evicted"), "infra_error(evicted)"),
    ],
)
def test_the_gateways_evidence_settles_a_verdict_that_is_not_a_pass(f: TrialFacts, expected: str) -> None:
    assert verdict(f) == expected


def test_a_starved_try_is_retried_by_default_after_the_providers_wait() -> None:
    f = facts(0.0, ModelUsage(starved=STARVED))
    assert verdict(f, retries=2) == "infra_error(model_unavailable) (again)"
    assert verdict(f, retries=2, before=2) == "infra_error(model_unavailable)"  # bounded like every retry
    s = settle(f, reward_threshold=1.0, retry=RetryPolicy(max_retries=2), finished_before=0, secrets=[])
    assert retry_wait(s, base_s=30, finished_before=0) == 40  # the provider asked for longer than the base
    assert retry_wait(s, base_s=30, finished_before=1) == 60  # doubled for the second retry
    assert retry_wait(s, base_s=30, finished_before=9) == MAX_RETRY_WAIT_S
    evicted = settle(
        facts(0.0, None, infra_hint="evicted"),
        reward_threshold=1.0,
        retry=RetryPolicy(max_retries=2),
        finished_before=0,
        secrets=[],
    )
    assert not evicted.final and retry_wait(evicted, base_s=30, finished_before=0) == 0  # other retries: at once
