"""Pod status + Events -> the facts of one try, or "not yet". A pure function.

Kubernetes signals, strongest first:

====================================================================  ==========================
signal                                                                facts
====================================================================  ==========================
pod gone without a harvest (finalizer removed by someone else)         infra ``pod_deleted``
``DisruptionTarget`` condition: PreemptionByScheduler                  infra ``preempted``
  EvictionByEvictionAPI / DeletionByTaintManager / DeletionByPodGC     ``api_eviction`` / ``taint_eviction``
                                                                       (``node_lost`` if the node became
                                                                       unreachable) / ``pod_gc``
  TerminationByKubelet, or ``status.reason: Evicted``                  ``evicted``, or ``storage_limit`` when
                                                                       the message names ephemeral storage
``status.reason: DeadlineExceeded``                                    ``deadline_exceeded``
``OOMKilled`` in any container, init containers included               ``oom_killed``
deletionTimestamp we did not set                                       ``pod_deleted``
``ErrImagePull``/``ImagePullBackOff`` past the pull deadline;          ``image_pull`` (at once for the two
``InvalidImageName``/``ErrImageNeverPull``                             that never recover)
``CreateContainerConfigError``/``CreateContainerError`` past deadline  ``container_config``
``Unschedulable`` past the pending deadline (a ``TriggeredScaleUp``    ``unschedulable``
event restarts the clock); a scheduling gate is queued, never failing
task container terminated                                              the runner's report: steps, OOM
                                                                       counter, reward -> the usual rules
====================================================================  ==========================

The raw pod status and the relevant Events go into ``facts.extra`` (:class:`~orchestrator.spec.evidence.PodEvidence`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.backends.kubernetes import message as runner_message
from orchestrator.spec.evidence import AgentCheck, CpuThrottling, Evidence, PodEvent, PodImage, PodStatus
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.outcome import InfraReason
from orchestrator.spec.resources import ResourceAmounts

#: The runner's two halves: the agent's (an init container) and the verifier's, on a fresh root filesystem.
AGENT_CONTAINER = "agent"
TASK_CONTAINER = "task"
WARDEN_CONTAINER = "warden"
_PULL_WAITING = {"ErrImagePull", "ImagePullBackOff"}
_PULL_FATAL = {"InvalidImageName", "ErrImageNeverPull"}
_CONFIG_WAITING = {"CreateContainerConfigError", "CreateContainerError"}
_START_FAILED = {"StartError", "ContainerCannotRun"}
_DISRUPTION = {
    "PreemptionByScheduler": InfraReason.PREEMPTED,
    "PreemptionByKubeScheduler": InfraReason.PREEMPTED,
    "EvictionByEvictionAPI": InfraReason.API_EVICTION,
    "DeletionByTaintManager": InfraReason.TAINT_EVICTION,
    "DeletionByPodGC": InfraReason.POD_GC,
    "TerminationByKubelet": InfraReason.EVICTED,
}
MAX_EVENTS = 20

State = Literal["queued", "pending", "running", "done"]


@dataclass(frozen=True)
class Context:
    """What the pure function needs besides the objects: the clock, the deadlines, our own actions."""

    now: float  # epoch seconds
    amounts: ResourceAmounts
    pending_deadline_s: float = 600
    pull_deadline_s: float = 300
    config_deadline_s: float = 60
    deleting: bool = False  # we asked for the deletion (cancel): not an outside deletion
    gone: bool = False  # the pod no longer exists and was never harvested
    log_tail: str | None = None


@dataclass(frozen=True)
class Observation:
    state: State
    facts: TrialFacts | None = None
    stop: bool = False  # the pod must be deleted (a deadline passed while it waited)


def timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    st = pod.get("status") or {}
    return [*(st.get("initContainerStatuses") or []), *(st.get("containerStatuses") or [])]


def _condition(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def _storage_words(text: str) -> bool:
    t = text.lower()
    return "ephemeral-storage" in t or "ephemeral local storage" in t or "ephemeral storage" in t


def relevant_events(events: list[dict[str, Any]]) -> list[PodEvent]:
    """The pod's events, newest last, trimmed to what a report shows."""
    keep = []
    for e in events[-MAX_EVENTS:]:
        keep.append(
            PodEvent.model_validate(
                {k: e.get(k) for k in ("type", "reason", "message", "count") if e.get(k) is not None}
                | {"time": e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")}
            )
        )
    return keep


def _base(pod: dict[str, Any] | None, events: list[dict[str, Any]], ctx: Context) -> TrialFacts:
    a = ctx.amounts
    status = (pod or {}).get("status") or {}
    spec = (pod or {}).get("spec") or {}
    extra = Evidence(
        pod=(pod or {}).get("metadata", {}).get("name"),
        node=spec.get("nodeName"),
        ran_in=f"container {AGENT_CONTAINER!r} of the trial pod (the task image; the verifier in a fresh {TASK_CONTAINER!r})",
        # the status as the API server gave it: PodStatus keeps these keys only
        pod_status=PodStatus.model_validate(
            {k: status.get(k) for k in PodStatus.model_fields if status.get(k) is not None}
        ),
        events=relevant_events(events),
    )
    images = {
        str(s.get("name")): PodImage(image=s.get("image"), image_id=s.get("imageID"))
        for s in _statuses(pod or {})
        if s.get("imageID")
    }
    if images:
        extra.images = images
    if ctx.log_tail:
        extra.log_tail = ctx.log_tail
    return TrialFacts(
        enforcement="kubernetes",
        request_cpus=a.request_cpus,
        request_memory_bytes=a.request_memory_bytes,
        limit_cpus=a.limit_cpus,
        limit_memory_bytes=a.limit_memory_bytes,
        qos_class=status.get("qosClass") or a.qos_class,
        extra=extra,
    )


def _infra(
    pod: dict[str, Any] | None,
    events: list[dict[str, Any]],
    ctx: Context,
    reason: InfraReason,
    detail: str | None,
    stop: bool = False,
) -> Observation:
    facts = _base(pod, events, ctx)
    facts.infra_hint = reason
    facts.infra_detail = (detail or reason.value)[:500]
    _add_report(pod, facts)
    return Observation("done", facts, stop=stop)


def without_pod(name: str, ctx: Context, reason: InfraReason, detail: str) -> TrialFacts:
    """The facts of a try that never got a pod (refused by the API server, or API errors throughout)."""
    facts = _base({"metadata": {"name": name}}, [], ctx)
    facts.infra_hint, facts.infra_detail = reason, detail[:500]
    return facts


def _task_status(pod: dict[str, Any]) -> dict[str, Any] | None:
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        if s.get("name") == TASK_CONTAINER:
            return s
    return None


def _agent_status(pod: dict[str, Any]) -> dict[str, Any] | None:
    for s in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if s.get("name") == AGENT_CONTAINER:
            return s
    return None


def runner_report(pod: dict[str, Any] | None) -> runner_message.RunnerReport | None:
    """The runner's termination message, parsed (None when it wrote none).

    The verifier's container carries both halves' facts. When it never ran (the agent's container ended
    non-zero, e.g. OOM-killed), the agent's container's own message is the agent step's facts: the kernel's
    OOM count and peak for the evidence. The verdict never rests on it (the kubelet's status decides)."""
    for s in (_task_status(pod or {}), _agent_status(pod or {})):
        st = s or {}
        term = (st.get("state") or {}).get("terminated") or (st.get("lastState") or {}).get("terminated")
        if report := runner_message.parse((term or {}).get("message")):
            return report
    return None


def _add_report(pod: dict[str, Any] | None, facts: TrialFacts) -> runner_message.RunnerReport | None:
    """Whatever the runner reported (also for an infra end: the agent may have finished first)."""
    report = runner_report(pod)
    if report is None:
        return None
    facts.agent = report.step("agent")
    facts.verifier = report.step("verifier")
    facts.reward, facts.reward_error = report.reward()
    facts.agent_result = report.agent_result()
    facts.peak_memory_bytes = report.peak_memory_bytes()
    facts.cpu_time_s = report.cpu_time_s()  # the container cgroup's counter, as the local backend's trial cgroup
    if throttling := report.cpu_throttling():
        facts.extra.cpu_throttling = CpuThrottling.model_validate(throttling)
    facts.duration_s = sum(s.duration_s for s in (facts.agent, facts.verifier) if s is not None)
    facts.extra.runner = report.evidence()
    skipped = report.fields.get("verifier_skipped")
    if skipped == "agent_setup_failed":
        facts.infra_hint = InfraReason.AGENT_SETUP_FAILED
        facts.infra_detail = "the agent's setup phase failed (see the container log)"
    elif skipped == "unjudged_state":
        what = (
            report.fields.get("sanitise") or f"the work dir could not be carried over ({report.fields.get('work_in')})"
        )
        facts.agent_fault = f"the sanitiser could not judge what the agent left: {what}"
    elif skipped == "agent_report_missing":  # the agent's container ended (exit 0) without its runner's report
        facts.agent_fault = "the agent's container ended without the runner's report of the agent step"
    elif skipped == "tests_withheld" and (report.fields.get("detail") or "").startswith("agent_processes_left"):
        # The warden saw processes besides the verifier's runner after the agent's container had ended: only the
        # agent starts processes that outlive its container's sweep, so the tests were withheld on its account.
        facts.agent_fault = f"processes outlived the agent's step: {report.fields.get('detail')}"
    elif skipped == "agent_not_found":  # the runner's own check, before the agent had control
        facts.agent_unresolved = report.fields.get("agent_not_found") or "the agent command's program was not found"
        facts.agent = StepFacts(name="agent", skipped=f"agent_not_found: {facts.agent_unresolved}")
    if "agent_check" in report.fields:
        facts.extra.agent_check = AgentCheck(
            status=report.fields["agent_check"],
            **({"detail": facts.agent_unresolved} if facts.agent_unresolved else {}),
        )
    facts.verifier_on_agent_state = report.fields.get("sanitise") == "ok" and facts.verifier is not None
    if "verifier_only_links_removed" in report.fields:
        facts.extra.verifier_only_links_removed = report._int("verifier_only_links_removed")
    return report


def _scale_up_time(events: list[dict[str, Any]]) -> float | None:
    times = [
        timestamp(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"))
        for e in events
        if e.get("reason") == "TriggeredScaleUp"
    ]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def observe(pod: dict[str, Any] | None, events: list[dict[str, Any]], ctx: Context) -> Observation:
    """Classify one try's pod. Pure: the same objects and clock give the same answer."""
    if pod is None or ctx.gone:
        return _infra(pod, events, ctx, InfraReason.POD_DELETED, "the pod was deleted before its result was harvested")
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    phase = status.get("phase") or "Pending"

    disruption = _condition(pod, "DisruptionTarget")
    if disruption and disruption.get("status") == "True":
        reason = _DISRUPTION.get(disruption.get("reason") or "", InfraReason.OTHER)
        text = f"{disruption.get('reason')}: {disruption.get('message') or ''}".strip()
        if reason is InfraReason.TAINT_EVICTION and any(w in text for w in ("unreachable", "not-ready")):
            reason = InfraReason.NODE_LOST
        if reason is InfraReason.EVICTED and _storage_words(f"{text} {status.get('message') or ''}"):
            reason = InfraReason.STORAGE_LIMIT
        if phase in ("Succeeded", "Failed") or meta.get("deletionTimestamp"):
            return _infra(pod, events, ctx, reason, text)
    if status.get("reason") == "Evicted":
        msg = status.get("message") or ""
        return _infra(pod, events, ctx, InfraReason.STORAGE_LIMIT if _storage_words(msg) else InfraReason.EVICTED, msg)
    if status.get("reason") == "NodeLost":
        return _infra(pod, events, ctx, InfraReason.NODE_LOST, status.get("message"))
    if status.get("reason") == "DeadlineExceeded":
        return _infra(pod, events, ctx, InfraReason.DEADLINE_EXCEEDED, status.get("message"))
    for s in _statuses(pod):
        for state_key in ("state", "lastState"):
            term = ((s.get(state_key) or {}).get("terminated")) or {}
            if term.get("reason") == "OOMKilled":
                return _infra(
                    pod,
                    events,
                    ctx,
                    InfraReason.OOM_KILLED,
                    f"container {s.get('name')} OOMKilled (exit {term.get('exitCode')})",
                )
    if meta.get("deletionTimestamp") and not ctx.deleting:
        return _infra(pod, events, ctx, InfraReason.POD_DELETED, "the pod was deleted from outside headroom")

    # The agent's container (an init container) must end with the runner's exit 0 for the verifier's to start.
    aterm = ((_agent_status(pod) or {}).get("state") or {}).get("terminated")
    if aterm is not None and aterm.get("exitCode") != 0:
        facts = _base(pod, events, ctx)
        how = f"exit {aterm.get('exitCode')}, {aterm.get('reason')}"
        if aterm.get("reason") in _START_FAILED:
            facts.setup_error = f"the runner could not start ({aterm.get('reason')}): {aterm.get('message') or ''}"[
                :500
            ]
        else:  # as for the task container below: the agent stopped its runner; nothing it wrote is believed
            facts.agent_fault = f"the agent's runner was stopped during the try ({how}): its report is not believed"
        return Observation("done", facts)

    task = _task_status(pod)
    term = ((task or {}).get("state") or {}).get("terminated")
    if term is not None:
        facts = _base(pod, events, ctx)
        how = f"exit {term.get('exitCode')}, {term.get('reason')}"
        if term.get("reason") in _START_FAILED:
            facts.setup_error = f"the runner could not start ({term.get('reason')}): {term.get('message') or ''}"[:500]
        elif term.get("exitCode") != 0:
            # The runner always ends with exit 0 (the runtime's record, which no process in the pod can
            # write). Anything else: it was stopped mid-try, and what the cluster does to a pod (OOM,
            # eviction, deadline, deletion) was judged above, so the agent (same container, same uid)
            # stopped it. Its message is then not believed: the agent can write the termination log, and
            # with FallbackToLogsOnError the container log, and it once forged a pass that way. Nor is
            # it a spawn failure, which is retried: that made killing the runner a re-roll.
            facts.agent_fault = f"the runner was stopped during the try ({how}): its report is not believed"
        elif (report := _add_report(pod, facts)) is None or not report.complete:
            facts.agent_fault = f"the runner ended without a complete report ({how})"
            facts.extra.runner_incomplete = how
        return Observation("done", facts)

    if phase in ("Succeeded", "Failed"):  # ended, yet the task container never terminated
        return _infra(
            pod, events, ctx, InfraReason.OTHER, f"pod {phase} ({status.get('reason')}: {status.get('message')})"
        )

    # Still waiting or running: fail only past a deadline, and say so.
    created = timestamp(meta.get("creationTimestamp")) or ctx.now
    for s in _statuses(pod):
        waiting = (s.get("state") or {}).get("waiting") or {}
        why = waiting.get("reason")
        text = f"container {s.get('name')}: {why}: {waiting.get('message') or ''}"
        if why in _PULL_FATAL:
            return _infra(pod, events, ctx, InfraReason.IMAGE_PULL, text, stop=True)
        if why in _PULL_WAITING and ctx.now - created > ctx.pull_deadline_s:
            return _infra(pod, events, ctx, InfraReason.IMAGE_PULL, text, stop=True)
        if why in _CONFIG_WAITING and ctx.now - created > ctx.config_deadline_s:
            return _infra(pod, events, ctx, InfraReason.CONTAINER_CONFIG, text, stop=True)
    if spec.get("schedulingGates"):
        return Observation("queued")
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        since = max(created, _scale_up_time(events) or created)
        if ctx.now - since > ctx.pending_deadline_s:
            return _infra(pod, events, ctx, InfraReason.UNSCHEDULABLE, scheduled.get("message"), stop=True)
        return Observation("pending")
    agent_running = ((_agent_status(pod) or {}).get("state") or {}).get("running") is not None
    return Observation("running" if phase == "Running" or agent_running else "pending")
