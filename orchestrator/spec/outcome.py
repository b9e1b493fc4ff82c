"""The one outcome taxonomy every backend classifies into.

A trial ends in exactly one :class:`Outcome`. Infrastructure errors carry an
:class:`InfraReason` so a report can tell an OOM kill from an eviction; harness
errors carry a :class:`HarnessReason`. Both enumerations are closed on purpose:
a new reason is a design change, not a free-form string.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # verifier ran; reward below threshold: the agent's fault
    TIMEOUT = "timeout"  # the agent step exceeded its budget
    INFRA_ERROR = "infra_error"  # the environment failed the trial, not the agent
    HARNESS_ERROR = "harness_error"  # verifier crashed, reward missing/malformed, our bug


class InfraReason(StrEnum):
    OOM_KILLED = "oom_killed"
    EVICTED = "evicted"
    UNSCHEDULABLE = "unschedulable"
    IMAGE_PULL = "image_pull"
    CONTAINER_CONFIG = "container_config"
    NODE_LOST = "node_lost"
    PREEMPTED = "preempted"
    API_ERROR = "api_error"
    POD_DELETED = "pod_deleted"
    SPAWN_FAILED = "spawn_failed"  # local backend: the process could not be started


class HarnessReason(StrEnum):
    REWARD_MISSING = "reward_missing"
    REWARD_MALFORMED = "reward_malformed"
    VERIFIER_CRASHED = "verifier_crashed"
    VERIFIER_TIMEOUT = "verifier_timeout"
    ORCHESTRATOR_ERROR = "orchestrator_error"


#: Outcomes that say something about the agent (used for "infra excluded" scores).
MODEL_OUTCOMES = frozenset({Outcome.PASSED, Outcome.FAILED, Outcome.TIMEOUT})
