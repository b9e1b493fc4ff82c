"""The pod-signal classification, on pod and Event JSON in the API's own shape.

``fixtures/pod_running.json`` is a trial pod as the API server returns it; each case
changes what a kubelet, the scheduler, the eviction API or a controller would have
written, and checks the reason. The outcome then goes through the engine's
``classify``, as every backend's facts do.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.backends.kubernetes import message
from orchestrator.backends.kubernetes.signals import Context, observe
from orchestrator.engine.classify import classify
from orchestrator.spec.evidence import CpuThrottling
from orchestrator.spec.outcome import InfraReason, ModelReason, Outcome
from orchestrator.spec.resources import ResourceAmounts

FIX = Path(__file__).parent / "fixtures"
BASE = json.loads((FIX / "pod_running.json").read_text())
PENDING_EVENTS = json.loads((FIX / "events_pending.json").read_text())
T0 = dt.datetime(2026, 11, 30, 17, 0, tzinfo=dt.UTC).timestamp()
AMOUNTS = ResourceAmounts(request_cpus=1, request_memory_bytes=96 << 20, limit_cpus=1, limit_memory_bytes=96 << 20)


def ctx(after_s: float = 5, **kw: Any) -> Context:
    return Context(
        now=T0 + after_s, amounts=AMOUNTS, pending_deadline_s=600, pull_deadline_s=300, config_deadline_s=60, **kw
    )


def pod(**status: Any) -> dict[str, Any]:
    p = copy.deepcopy(BASE)
    p["status"].update(status)
    return p


def terminated(name: str, reason: str, code: int, msg: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": "registry.example/word-index:1",
        "imageID": BASE["status"]["containerStatuses"][0]["imageID"],
        "state": {
            "terminated": {
                "exitCode": code,
                "reason": reason,
                "message": msg,
                "startedAt": "2026-11-30T17:00:03Z",
                "finishedAt": "2026-11-30T17:01:00Z",
            }
        },
    }


def waiting(name: str, reason: str, msg: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": "registry.example/word-index:1",
        "imageID": "",
        "state": {"waiting": {"reason": reason, "message": msg}},
    }


def finished(task_msg: str, phase: str = "Succeeded", task_reason: str = "Completed", code: int = 0) -> dict[str, Any]:
    return pod(
        phase=phase,
        containerStatuses=[terminated("task", task_reason, code, task_msg), terminated("warden", "Completed", 0)],
    )


def disrupted(why: str, msg: str, phase: str = "Failed", **extra: Any) -> dict[str, Any]:
    p = pod(phase=phase, **extra)
    p["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": why,
            "message": msg,
            "lastTransitionTime": "2026-11-30T17:00:30Z",
        }
    )
    return p


PASS = message.render(
    {
        "agent_exit": 0,
        "agent_cs": 250,
        "agent_timeout": 0,
        "agent_oom0": 0,
        "agent_oom1": 0,
        "agent_peak": 41_000_000,
        "verifier_exit": 0,
        "verifier_cs": 30,
        "verifier_timeout": 0,
        "verifier_oom0": 0,
        "verifier_oom1": 0,
        "verifier_peak": 43_000_000,
        "reward_file": "reward.txt",
        "reward_size": 2,
        "reward": "1 ",
    }
)


def verdict(p: dict[str, Any] | None, events: list[dict[str, Any]] | None = None, **kw: Any) -> tuple[Any, ...]:
    obs = observe(p, events or [], ctx(**kw))
    assert obs.state == "done" and obs.facts is not None
    v = classify(obs.facts)
    return v.outcome, v.reason


CASES = [
    (
        "oom in the task container",
        finished("", "Failed", "OOMKilled", 137),
        (Outcome.INFRA_ERROR, InfraReason.OOM_KILLED),
    ),
    (
        "oom in an init container",
        pod(
            phase="Failed",
            initContainerStatuses=[terminated("fetch", "OOMKilled", 137)],
            containerStatuses=[waiting("task", "PodInitializing"), waiting("warden", "PodInitializing")],
        ),
        (Outcome.INFRA_ERROR, InfraReason.OOM_KILLED),
    ),
    (
        "node-pressure eviction",
        disrupted(
            "TerminationByKubelet",
            "The node was low on resource: memory.",
            reason="Evicted",
            message="The node was low on resource: memory. Threshold quantity: 100Mi, available: 64Mi.",
        ),
        (Outcome.INFRA_ERROR, InfraReason.EVICTED),
    ),
    (
        "ephemeral-storage limit eviction",
        pod(
            phase="Failed",
            reason="Evicted",
            message="Pod ephemeral local storage usage exceeds the total limit of containers 512Mi.",
        ),
        (Outcome.INFRA_ERROR, InfraReason.STORAGE_LIMIT),
    ),
    (
        "container ephemeral-storage limit",
        disrupted(
            "TerminationByKubelet",
            'Container task exceeded its local ephemeral storage limit "512Mi".',
            reason="Evicted",
            message='Container task exceeded its local ephemeral storage limit "512Mi".',
        ),
        (Outcome.INFRA_ERROR, InfraReason.STORAGE_LIMIT),
    ),
    (
        "preemption",
        disrupted("PreemptionByScheduler", "node-3: preempting to accommodate a higher priority pod"),
        (Outcome.INFRA_ERROR, InfraReason.PREEMPTED),
    ),
    (
        "API eviction (drain)",
        {
            **disrupted("EvictionByEvictionAPI", "Eviction API: evicting", phase="Running"),
            "metadata": {**BASE["metadata"], "deletionTimestamp": "2026-11-30T17:00:31Z"},
        },
        (Outcome.INFRA_ERROR, InfraReason.API_EVICTION),
    ),
    (
        "taint manager",
        disrupted("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"),
        (Outcome.INFRA_ERROR, InfraReason.TAINT_EVICTION),
    ),
    (
        "node lost",
        disrupted(
            "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint node.kubernetes.io/unreachable"
        ),
        (Outcome.INFRA_ERROR, InfraReason.NODE_LOST),
    ),
    ("pod GC", disrupted("DeletionByPodGC", "PodGC: node no longer exists"), (Outcome.INFRA_ERROR, InfraReason.POD_GC)),
    (
        "deadline exceeded",
        pod(
            phase="Failed",
            reason="DeadlineExceeded",
            message="Pod was active on the node longer than the specified deadline",
        ),
        (Outcome.INFRA_ERROR, InfraReason.DEADLINE_EXCEEDED),
    ),
    ("passed through the runner's report", finished(PASS), (Outcome.PASSED, None)),
    (
        "OOM counter rising inside the container",
        finished(
            message.render(
                {
                    "agent_exit": 137,
                    "agent_cs": 90,
                    "agent_timeout": 0,
                    "agent_oom0": 0,
                    "agent_oom1": 1,
                    "agent_peak": 100_663_296,
                    "verifier_skipped": "agent_oom",
                }
            )
        ),
        (Outcome.INFRA_ERROR, InfraReason.OOM_KILLED),
    ),
    (
        "agent timeout",
        finished(
            message.render(
                {
                    "agent_exit": 137,
                    "agent_cs": 2000,
                    "agent_timeout": 1,
                    "agent_oom0": 0,
                    "agent_oom1": 0,
                    "verifier_skipped": "agent_timeout",
                }
            )
        ),
        (Outcome.TIMEOUT, None),
    ),
    (
        "tests withheld",
        finished(
            message.render(
                {
                    "agent_exit": 0,
                    "agent_cs": 20,
                    "agent_timeout": 0,
                    "agent_oom0": 0,
                    "agent_oom1": 0,
                    "verifier_skipped": "tests_withheld",
                    "detail": "agent_processes_left 12(sleep)",
                }
            )
        ),
        (Outcome.FAILED, ModelReason.UNJUDGED_STATE),  # the agent's processes held the tests back
    ),
    (
        "runner could not start (no /bin/sh)",
        finished('exec: "/bin/sh": stat /bin/sh: no such file or directory', "Failed", "StartError", 128),
        (Outcome.INFRA_ERROR, InfraReason.SPAWN_FAILED),
    ),
    # Issue 19: the runner always exits 0; stopped otherwise, only the agent (same container and uid) did it,
    # and it can write the termination log (and the container log): its message is not believed, and the
    # try is the agent's failure, never a retried spawn_failed.
    (
        "a forged passing message, the runner killed",
        finished(PASS, "Failed", "Error", 137),
        (Outcome.FAILED, ModelReason.UNJUDGED_STATE),
    ),
    (
        "a forged OOM in the message, the runner killed",
        finished(
            message.render(
                {
                    "agent_exit": 137,
                    "agent_cs": 90,
                    "agent_timeout": 0,
                    "agent_oom0": 0,
                    "agent_oom1": 1,
                    "verifier_skipped": "agent_oom",
                }
            ),
            "Failed",
            "Error",
            143,
        ),
        (Outcome.FAILED, ModelReason.UNJUDGED_STATE),
    ),
    (
        "the runner killed before any report",
        finished("", "Failed", "Error", 137),
        (Outcome.FAILED, ModelReason.UNJUDGED_STATE),
    ),
    (
        "the runner killed, its log tail as the message",
        finished("v=1\nagent_exit=0\n", "Failed", "Error", 1),
        (Outcome.FAILED, ModelReason.UNJUDGED_STATE),
    ),
    ("exit 0 without a report", finished(""), (Outcome.FAILED, ModelReason.UNJUDGED_STATE)),
    (
        "deleted from outside",
        {**pod(), "metadata": {**BASE["metadata"], "deletionTimestamp": "2026-11-30T17:00:40Z"}},
        (Outcome.INFRA_ERROR, InfraReason.POD_DELETED),
    ),
    ("gone without a harvest", None, (Outcome.INFRA_ERROR, InfraReason.POD_DELETED)),
]


@pytest.mark.parametrize("name,p,expected", CASES, ids=[c[0] for c in CASES])
def test_each_signal_gets_its_reason(name: str, p: dict[str, Any] | None, expected: tuple[Any, ...]) -> None:
    assert verdict(p) == expected


def test_evidence_keeps_status_events_node_and_image_digest() -> None:
    obs = observe(finished(PASS), PENDING_EVENTS, ctx())
    assert obs.facts is not None
    extra = obs.facts.extra
    assert extra.node == "node-3"
    assert extra.pod_status is not None and extra.pod_status.phase == "Succeeded"
    assert [e.reason for e in extra.events or []] == ["FailedScheduling", "TriggeredScaleUp"]
    assert extra.images is not None and (extra.images["task"].image_id or "").endswith("a6b7c")
    assert obs.facts.qos_class == "Guaranteed" and obs.facts.enforcement == "kubernetes"
    assert obs.facts.reward == 1.0 and obs.facts.peak_memory_bytes == 43_000_000
    assert obs.facts.agent is not None and obs.facts.agent.duration_s == 2.5


def test_a_running_pod_is_not_done() -> None:
    assert observe(pod(), [], ctx()).state == "running"


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_image_pull_fails_only_past_the_pull_deadline(reason: str) -> None:
    p = pod(
        phase="Pending",
        containerStatuses=[waiting("task", reason, "Back-off pulling image"), waiting("warden", reason)],
    )
    assert observe(p, [], ctx(after_s=200)).state == "pending"
    late = observe(p, [], ctx(after_s=301))
    assert late.state == "done" and late.stop
    assert classify(late.facts).reason is InfraReason.IMAGE_PULL  # type: ignore[arg-type]


def test_an_invalid_image_name_fails_at_once() -> None:
    p = pod(phase="Pending", containerStatuses=[waiting("task", "InvalidImageName", "couldn't parse image name")])
    assert verdict(p, after_s=1) == (Outcome.INFRA_ERROR, InfraReason.IMAGE_PULL)


def test_container_config_error_past_its_deadline() -> None:
    p = pod(
        phase="Pending",
        containerStatuses=[
            waiting("task", "CreateContainerConfigError", "container has runAsNonRoot and image will run as root")
        ],
    )
    assert observe(p, [], ctx(after_s=30)).state == "pending"
    assert verdict(p, after_s=61) == (Outcome.INFRA_ERROR, InfraReason.CONTAINER_CONFIG)


def _unschedulable() -> dict[str, Any]:
    p = pod(phase="Pending")
    p["spec"].pop("nodeName")
    p["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient memory.",
        }
    ]
    p["status"].pop("containerStatuses")
    return p


def test_unschedulable_past_the_pending_deadline() -> None:
    assert observe(_unschedulable(), [], ctx(after_s=599)).state == "pending"
    assert verdict(_unschedulable(), after_s=601) == (Outcome.INFRA_ERROR, InfraReason.UNSCHEDULABLE)


def test_a_scale_up_restarts_the_pending_clock() -> None:
    # TriggeredScaleUp at 17:08: the deadline now ends at 17:18, not 17:10.
    assert observe(_unschedulable(), PENDING_EVENTS, ctx(after_s=700)).state == "pending"
    assert verdict(_unschedulable(), PENDING_EVENTS, after_s=1081) == (Outcome.INFRA_ERROR, InfraReason.UNSCHEDULABLE)


def test_a_scheduling_gate_is_queued_never_failing() -> None:
    p = _unschedulable()
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    p["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    assert observe(p, [], ctx(after_s=100_000)).state == "queued"


def test_our_own_deletion_is_not_an_outside_deletion() -> None:
    p = {**pod(), "metadata": {**BASE["metadata"], "deletionTimestamp": "2026-11-30T17:00:40Z"}}
    assert observe(p, [], ctx(deleting=True)).state == "running"


def test_cpu_time_and_throttling_come_from_the_runners_cpu_stat_deltas() -> None:
    fields = {
        "agent_exit": 0,
        "agent_cs": 250,
        "agent_timeout": 0,
        "agent_oom0": 0,
        "agent_oom1": 0,
        "agent_cpu_us": 1_500_000,
        "agent_cpu_thr": "20,5,300000",
        "verifier_exit": 0,
        "verifier_cs": 30,
        "verifier_timeout": 0,
        "verifier_oom0": 0,
        "verifier_oom1": 0,
        "verifier_cpu_us": 250_000,
        "verifier_cpu_thr": "3,0,0",
        "reward_file": "reward.txt",
        "reward_size": 2,
        "reward": "1 ",
    }
    obs = observe(finished(message.render(fields)), [], ctx())
    assert obs.facts is not None
    assert obs.facts.cpu_time_s == pytest.approx(1.75)
    assert obs.facts.extra.cpu_throttling == CpuThrottling(nr_periods=23, nr_throttled=5, throttled_usec=300_000)
    # without the counters (an older runner, no cgroup): not recorded, never zero
    obs = observe(finished(PASS), [], ctx())
    assert obs.facts is not None and obs.facts.cpu_time_s is None and obs.facts.extra.cpu_throttling is None


# --- the agent's init container: the runner's agent half --------------------------------------------------------


def _agent_ended(code: int, reason: str) -> dict[str, Any]:
    """The agent's init container ended; with a non-zero exit the kubelet starts neither the task container nor the
    warden (they wait PodInitializing) and the pod fails."""
    return pod(
        phase="Failed",
        initContainerStatuses=[terminated("agent", reason, code, "v=1\nreward_file=reward.txt\nreward=1\n")],
        containerStatuses=[waiting("task", "PodInitializing"), waiting("warden", "PodInitializing")],
    )


@pytest.mark.parametrize(("code", "reason"), [(137, "Error"), (2, "Error"), (143, "Error")])
def test_an_agent_that_stops_its_runner_fails_at_once_and_its_message_is_not_believed(code: int, reason: str) -> None:
    obs = observe(_agent_ended(code, reason), [], ctx())
    assert obs.state == "done" and obs.facts is not None
    assert obs.facts.reward is None and "agent's runner was stopped" in (obs.facts.agent_fault or "")
    v = classify(obs.facts)
    assert (v.outcome, v.reason) == (Outcome.FAILED, ModelReason.UNJUDGED_STATE)


def test_an_agent_container_that_could_not_start_is_a_spawn_failure() -> None:
    obs = observe(_agent_ended(128, "StartError"), [], ctx())
    assert obs.facts is not None
    assert (classify(obs.facts).outcome, classify(obs.facts).reason) == (Outcome.INFRA_ERROR, InfraReason.SPAWN_FAILED)


def test_an_agent_oom_killed_in_its_init_container_is_oom_killed() -> None:
    obs = observe(_agent_ended(137, "OOMKilled"), [], ctx())
    assert obs.facts is not None and classify(obs.facts).reason == InfraReason.OOM_KILLED


def test_a_running_agent_container_is_a_running_try_for_the_external_agents_host_thread() -> None:
    p = pod(
        phase="Pending", containerStatuses=[waiting("task", "PodInitializing"), waiting("warden", "PodInitializing")]
    )
    p["status"]["initContainerStatuses"] = [
        {
            "name": "agent",
            "ready": False,
            "restartCount": 0,
            "state": {"running": {"startedAt": "2026-11-30T17:00:03Z"}},
        }
    ]
    assert observe(p, [], ctx()).state == "running"
    p["status"]["initContainerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    assert observe(p, [], ctx()).state == "pending"


def test_a_verifier_half_without_the_agents_report_is_the_agents_failure() -> None:
    msg = message.render({"verifier_skipped": "agent_report_missing", "records_bytes": 0})
    obs = observe(finished(msg), [], ctx())
    assert obs.facts is not None and "without the runner's report" in (obs.facts.agent_fault or "")
    v = classify(obs.facts)
    assert (v.outcome, v.reason) == (Outcome.FAILED, ModelReason.UNJUDGED_STATE)


def test_a_work_dir_that_could_not_be_carried_in_time_is_the_agents_failure() -> None:
    fields = {
        "agent_exit": 0,
        "agent_cs": 10,
        "agent_timeout": 0,
        "agent_oom0": 0,
        "agent_oom1": 0,
        "work_out": "ok",
        "work_in": "timeout",
        "verifier_skipped": "unjudged_state",
    }
    obs = observe(finished(message.render(fields)), [], ctx())
    assert obs.facts is not None and "carried over (timeout)" in (obs.facts.agent_fault or "")
    assert obs.facts.extra.runner is not None and obs.facts.extra.runner.work_in == "timeout"
    v = classify(obs.facts)
    assert (v.outcome, v.reason) == (Outcome.FAILED, ModelReason.UNJUDGED_STATE)


def test_tests_withheld_for_processes_left_after_the_agent_are_the_agents_failure() -> None:
    base = {"agent_exit": 0, "agent_cs": 10, "agent_timeout": 0, "agent_oom0": 0, "agent_oom1": 0}
    left = {**base, "verifier_skipped": "tests_withheld", "detail": "agent_processes_left 41(sleep)"}
    obs = observe(finished(message.render(left)), [], ctx())
    assert obs.facts is not None and "41(sleep)" in (obs.facts.agent_fault or "")
    assert (classify(obs.facts).outcome, classify(obs.facts).reason) == (Outcome.FAILED, ModelReason.UNJUDGED_STATE)
    # a copy the warden could not make is not the agent's doing
    failed_copy = {**base, "verifier_skipped": "tests_withheld", "detail": "copy_failed"}
    obs = observe(finished(message.render(failed_copy)), [], ctx())
    assert obs.facts is not None and obs.facts.agent_fault is None
