"""Simulated trial ends on the kwok test plane (kwok runs no containers).

The backend builds the real Pod; a ``pod_hook`` adds the test plane's outcome
annotations (docs/kubernetes-test-plane.md). For a pod that "succeeds", the
annotation ``headroom.test/message`` carries the termination message the in-pod
runner would have written (rendered by :func:`message.render`, the runner's format),
so the reward reaches the store through the same parsing path as on a real node.
What is simulated is only the container: the API server, scheduler, quota, watch,
finalizers, deletion and classification are real.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.backends.kubernetes import message
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import Launch

from .plane import (
    FAKE_NODE_TOLERATION,
    OUTCOME_AFTER_ANNOTATION,
    OUTCOME_ANNOTATION,
    OUTCOME_CONTAINER_ANNOTATION,
    OUTCOME_MESSAGE_ANNOTATION,
)


@dataclass(frozen=True)
class Sim:
    outcome: str = "succeed"  # succeed | oom | exit:N | evict | imagepull | none (keeps running)
    fields: dict[str, Any] | None = None  # the runner's report; None: no termination message
    after: str | None = None  # how long the container "runs"


def report(
    reward: str | None = "1",
    *,
    agent_exit: int = 0,
    agent_timeout: bool = False,
    agent_oom: int = 0,
    verifier_exit: int = 0,
    agent_result: str | None = None,
) -> dict[str, Any]:
    """The fields the runner writes for one try (see runner.sh)."""
    f: dict[str, Any] = {
        "workdir": "/app",
        "memcg": "v2",
        "agent_exit": 137 if agent_timeout else agent_exit,
        "agent_cs": 150,
        "agent_timeout": int(agent_timeout),
        "agent_oom0": 0,
        "agent_oom1": agent_oom,
        "agent_peak": 50_000_000,
    }
    if agent_result is not None:
        f["agent_result"] = agent_result
    if agent_timeout or agent_oom:
        f["verifier_skipped"] = "agent_timeout" if agent_timeout else "agent_oom"
        return f
    f.update(
        {
            "verifier_exit": verifier_exit,
            "verifier_cs": 40,
            "verifier_timeout": 0,
            "verifier_oom0": agent_oom,
            "verifier_oom1": agent_oom,
            "verifier_peak": 50_000_000,
        }
    )
    if reward is not None:
        f.update({"reward_file": "reward.txt", "reward_size": len(reward) + 1, "reward": reward})
    return f


def kwok_options(namespace: str, **kw: Any) -> KubernetesOptions:
    return KubernetesOptions(
        namespace=namespace, node_selector={"type": "kwok"}, tolerations=[dict(FAKE_NODE_TOLERATION)], **kw
    )


def hook(decide: Callable[[Launch], Sim]) -> Callable[[Launch, dict[str, Any]], dict[str, Any]]:
    def apply(launch: Launch, body: dict[str, Any]) -> dict[str, Any]:
        sim = decide(launch)
        ann = body["metadata"].setdefault("annotations", {})
        if sim.outcome != "none":
            ann[OUTCOME_ANNOTATION] = sim.outcome
        ann[OUTCOME_CONTAINER_ANNOTATION] = "task"
        if sim.fields is not None:
            ann[OUTCOME_MESSAGE_ANNOTATION] = message.render(sim.fields)
        if sim.after:
            ann[OUTCOME_AFTER_ANNOTATION] = sim.after
        return body

    return apply


@dataclass
class Recorder:
    """Counts what the hook decided, per (task, configuration, outcome)."""

    decide: Callable[[Launch], Sim]
    seen: dict[str, Sim] = field(default_factory=dict)

    def __call__(self, launch: Launch) -> Sim:
        sim = self.decide(launch)
        self.seen[launch.name] = sim
        return sim
