"""Raw facts a backend returns about one trial. Classification turns them into an Outcome.

Backends report what they saw and never decide the outcome themselves, so every
backend is judged by the same rules (see :mod:`orchestrator.engine.classify`).
"""

from __future__ import annotations

import math
from typing import Any, Final, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from orchestrator.spec.evidence import SCHEMA_VERSION, STORED, Evidence
from orchestrator.spec.outcome import InfraReason, infra_reason
from orchestrator.spec.steps import StepFacts

#: Where a try's tokens and cost come from (executions.usage_source): measured at the model gateway,
#: or the agent's own report (``$HEADROOM_AGENT_RESULT``), which an agent is free to get wrong.
GATEWAY: Final = "gateway"
SELF_REPORTED = "self-reported"


class Starved(BaseModel):
    """Why the gateway holds a try starved by its provider (docs/agents.md, "Starved tries"): the calls as evidence."""

    rule: Literal["final_call", "last_minute"] = Field(
        description="final_call: the try's last call failed on the provider's side; last_minute: most of the "
        "calls it started in the minute up to its last call did"
    )
    final_call: str = Field(description="status and class of the try's last call, e.g. '429 rate_limit'")
    window_calls: int = Field(description="calls started in the minute up to the last call, the last included")
    window_failed: int = Field(description="those that failed on the provider's side")
    retry_after_s: float | None = Field(default=None, description="the provider's last Retry-After, if it gave one")


class ModelUsage(BaseModel):
    """A try's model calls as the gateway measured them (orchestrator/agents/gateway): the upstream's usage
    fields, priced by the experiment's table. Set by the engine, never by a backend or the agent."""

    source: Literal["gateway"] = GATEWAY
    calls: int = 0
    tokens_in: int = Field(default=0, description="all input tokens, cached ones included")
    tokens_out: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = Field(default=0.0, description="None when a call's model has no price in the table")
    unpriced_models: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    statuses: dict[str, int] = Field(default_factory=dict, description="HTTP status the agent got -> calls")
    rejected_after_end: int = Field(default=0, description="calls refused because the try had ended (not counted)")
    in_flight_at_close: int = Field(default=0, description="calls still streaming when the try was recorded")
    failures: dict[str, int] = Field(
        default_factory=dict,
        description="failure class -> calls: rate_limit, quota, auth, server, timeout, connection (the provider's "
        "side), request (the provider refused what the agent sent), limit (the gateway's own refusal)",
    )
    starved: Starved | None = Field(default=None, description="the provider starved the try (infra_error)")
    limit_hit: Literal["tokens", "cost", "working_time"] | None = Field(
        default=None, description="the per-try limit that was spent, and refused the try's later calls"
    )
    working_time_s: float | None = Field(
        default=None, description="time since the try's first call, less the time spent waiting on the provider"
    )
    backoff_s: float = Field(default=0.0, description="the time left out of working_time_s")
    unrecorded_calls: int = Field(
        default=0,
        description="calls whose row the store would not take after retries: counted in the totals from the "
        "gateway's memory, missing from model_calls",
    )
    usage_missing: int = Field(
        default=0, description="calls that ended without the provider's usage (a stream cut before its usage)"
    )

    @property
    def incomplete(self) -> bool:
        """Some of the try's usage is not on record, row by row or at all: a report must say so."""
        return bool(self.unrecorded_calls or self.usage_missing or self.in_flight_at_close)


class TrialFacts(BaseModel):
    """Everything a backend observed about one trial."""

    enforcement: str = Field(description="kubernetes | cgroup-v1 | cgroup-v2 | rlimit")
    request_cpus: float
    request_memory_bytes: int
    limit_cpus: float | None
    limit_memory_bytes: int | None
    qos_class: str
    setup_error: str | None = Field(default=None, description="the trial could not be set up at all")
    infra_hint: InfraReason | None = Field(
        default=None, description="backend-observed infra reason (evicted, unschedulable, ...)"
    )
    infra_detail: str | None = Field(default=None, description="the backend's own words for the infra failure")
    agent: StepFacts | None = None
    verifier: StepFacts | None = None
    reward: float | None = None
    reward_error: str | None = None
    peak_memory_bytes: int | None = None
    cpu_time_s: float | None = None
    duration_s: float = 0.0
    agent_result: dict[str, Any] = Field(default_factory=dict)
    agent_fault: str | None = Field(
        default=None,
        description="the agent left a state the contract could not make safe for the verifier "
        "(the sanitiser could not judge it, or an agent process outlived the stop): the agent's failure",
    )
    agent_unresolved: str | None = Field(
        default=None,
        description="headroom's own check, before the agent started, found that the agent command's "
        "program does not resolve (orchestrator/contract/agent_check.py): the agent never ran",
    )
    verifier_on_agent_state: bool = Field(
        default=False,
        description="the verifier ran on what the agent left, after the sanitiser: a timeout or "
        "crash of it then is the agent's failure, not the harness's",
    )
    model_usage: ModelUsage | None = Field(default=None, description="the gateway's measurement; None: no gateway")
    extra: Evidence = Field(
        default_factory=Evidence,
        description="everything else the backend and the engine "
        "recorded: one typed, versioned schema (orchestrator/spec/evidence.py)",
    )

    @classmethod
    def from_stored(cls, data: Any) -> TrialFacts:
        """Facts as a store (or a Trial resource) holds them, written by this or any earlier version:
        evidence keys this version has no field for are kept in ``extra.legacy`` (orchestrator/spec/evidence.py)."""
        return cls.model_validate(data, context={STORED: True})

    @model_validator(mode="before")
    @classmethod
    def _unknown_reason_is_other(cls, data: Any) -> Any:
        # A reason this version does not know must not crash a sweep: keep the text as detail.
        if isinstance(data, dict) and isinstance(hint := data.get("infra_hint"), str):
            typed = infra_reason(hint)
            if typed is InfraReason.OTHER and hint != InfraReason.OTHER.value:
                data = {**data, "infra_hint": typed, "infra_detail": data.get("infra_detail") or hint}
        return data

    @field_validator("reward")
    @classmethod
    def _finite_reward(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("reward must be a finite number")
        return value


def evidence_schema() -> dict[str, Any]:
    """The JSON Schema of one stored evidence row: a try's facts, whose ``extra`` is the versioned
    :class:`~orchestrator.spec.evidence.Evidence` that every backend fills."""
    schema = TrialFacts.model_json_schema()
    schema["$id"] = f"headroom.evidence/{SCHEMA_VERSION}"
    return schema
