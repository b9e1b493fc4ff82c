"""Reconcile one Experiment: read the plan against its Trials, settle what ended, start what is due.

Level-triggered and crash-only. Every decision is recomputed from the Experiment and its
Trials; nothing lives only in this process:

* a try's Trial is created *before* its pod, under a deterministic name, so a crash
  between the two is healed by the next reconcile (the backend's submit is idempotent
  and adopts a pod that already exists);
* a try is settled by writing its Trial status with the resourceVersion it was read at,
  and only if it is not already Finished, so a result is never written twice, even by
  two replicas during a failover;
* a retry's Trial is named by its try number, so it can be created only once.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import structlog
import urllib3
from pydantic import ValidationError

from orchestrator.agentio.redact import secret_values
from orchestrator.backends.abilities import pod_informer
from orchestrator.backends.base import recorded
from orchestrator.backends.kubernetes import node_arch
from orchestrator.controller import engine, taskimage, tasksets
from orchestrator.controller.events import EventRecorder
from orchestrator.controller.metrics import Metrics
from orchestrator.controller.planned import CompactPlan
from orchestrator.controller.progress import (
    Ledger,
    Pending,
    experiment_status,
    failed_status,
    is_finished,
    ledger,
    now_rfc3339,
)
from orchestrator.controller.resources import (
    API_VERSION,
    EVIDENCE_LIMIT_BYTES,
    EXPERIMENT_PLURAL,
    GROUP,
    LABEL_CONFIGURATION,
    LABEL_EXPERIMENT,
    LABEL_FINAL,
    LABEL_RUN,
    LABEL_TASK,
    TRIAL_PLURAL,
    VERSION,
    ConfigurationRef,
    ExperimentResourceSpec,
    ExperimentStatus,
    TrialSpec,
    TrialStatus,
    TrialTimings,
)
from orchestrator.engine import faithful
from orchestrator.engine.settle import unstorable
from orchestrator.errors import CatalogPending, SpecError, SpecInvalid, StatusConflict
from orchestrator.kube.api import ApiException, client
from orchestrator.kube.raw import CoreJson
from orchestrator.kube.watch import Informer
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.names import label_value
from orchestrator.spec.task import Task
from orchestrator.spec.unknown import first_validation_error

log = structlog.get_logger("headroom.reconcile")

#: While trials are in flight, look again at least this often even without a watch event.
IN_FLIGHT_RESYNC = 10.0
#: How many passes may fail to write one try's result for a transient reason (the API server unreachable, 5xx,
#: conflicts) before the try is recorded as unstorable; a refusal of the data itself (4xx) is recorded at once.
WRITE_ATTEMPTS = 5


def _transient(exc: BaseException) -> bool:
    """A failed write that may succeed on the next pass, as opposed to the API server refusing what was written."""
    if isinstance(exc, ApiException):
        return exc.status is None or exc.status >= 500 or exc.status in (408, 409, 429)
    return isinstance(exc, (StatusConflict, OSError, urllib3.exceptions.HTTPError))


def run_id_of(experiment: dict[str, Any]) -> str:
    """Stable for the life of the Experiment object, different for a re-created one; a valid label value."""
    meta = experiment["metadata"]
    return f"{meta['name'][:54].rstrip('-.')}-{meta['uid'][:8]}"


@dataclass
class _Plan:
    key: tuple[str, int, str]
    digest: str
    experiment: ExperimentResourceSpec
    tasks: dict[str, Task]
    trials: CompactPlan  # a few bytes per planned trial: a 100,000-trial Experiment is held for its whole life


BackendMaker = Callable[[str, "ExperimentResourceSpec | None"], engine.Backend]


@dataclass
class Reconciler:
    namespace: str
    custom: client.CustomObjectsApi
    core: client.CoreV1Api
    experiments: Informer
    trials: Informer
    make_backend: BackendMaker  # one backend per Experiment (its kubernetes options), built on first need
    metrics: Metrics
    events: EventRecorder
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="headroom-tasks-")))
    _plans: dict[str, _Plan] = field(default_factory=dict)
    _backends: dict[str, engine.Backend] = field(default_factory=dict)
    _handles: dict[str, Any] = field(default_factory=dict)
    _cleaned: set[str] = field(default_factory=set)
    #: Trial -> status writes of its result that failed in a row (a transient API error is retried on the next pass)
    _write_failures: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def backend(self, name: str, planned: _Plan) -> engine.Backend:
        with self._lock:
            b = self._backends.get(name)
        if b is None:
            b = self.make_backend(name, planned.experiment)
            with self._lock:
                self._backends[name] = b
        return b

    def current_backend(self, name: str) -> engine.Backend | None:
        with self._lock:
            return self._backends.get(name)

    def _drop_backend(self, name: str) -> None:
        with self._lock:
            b = self._backends.pop(name, None)
            for key in [k for k, h in self._handles.items() if h[0] == name]:
                del self._handles[key]
        if b is not None:
            b.close()

    # -- entry point -----------------------------------------------------------------------
    def reconcile(self, name: str) -> float | None:
        """Bring one Experiment one step closer to done. Returns seconds until the next look, or None."""
        exp = self.experiments.get(name)
        if exp is None or exp["metadata"].get("deletionTimestamp"):
            self._forget(name)
            return None
        bound = log.bind(experiment=name, namespace=self.namespace)
        generation = exp["metadata"].get("generation")
        previous = _status_of(exp)
        try:
            planned = self._plan(exp)
        except ValidationError as exc:
            field_name, msg = first_validation_error(exc, ExperimentResourceSpec)
            self._fail(exp, previous, "SpecInvalid", f"spec.{field_name}: {msg}", terminal=True)
            return None
        except SpecInvalid as exc:
            self._fail(exp, previous, "SpecInvalid", str(exc), terminal=True)
            return None
        except SpecError as exc:
            self._fail(exp, previous, "TasksUnavailable", exc.one_line(), terminal=False)
            return 30.0
        except CatalogPending:
            return 2.0  # the task-set image's catalog pod is still running
        run_id = run_id_of(exp)
        book = ledger(planned.trials, self._trials_of(run_id))
        settled_any = False
        failures = 0
        for trial in list(book.in_flight):
            try:
                settled_any |= self._advance(exp, planned, trial, bound)
            except Exception:  # one try's trouble must not stall the others; it is looked at again
                failures += 1
                bound.exception("observing a trial failed", trial=trial["metadata"]["name"])
                self.metrics.reconcile_errors.inc()
        if settled_any:
            book = ledger(planned.trials, self._trials_of(run_id))
        capacity = planned.experiment.concurrency - len(book.in_flight)
        for pending in book.to_start[: max(0, capacity)]:
            self._start(exp, planned, run_id, pending, bound)
        if book.to_start[: max(0, capacity)]:
            book = ledger(planned.trials, self._trials_of(run_id))
        status = experiment_status(
            previous,
            generation=generation,
            run_id=run_id,
            plan=planned.trials,
            book=book,
            task_digests={t.id: t.digest for t in planned.tasks.values()},
        )
        if status.cluster is None and (book.in_flight or book.to_start):
            status.cluster = cluster_provenance(self.backend(name, planned))
        self._milestones(exp, previous, status)
        self._write_experiment_status(exp, status)
        if book.in_flight or settled_any:
            self.backend(name, planned).wait([], 0)  # lets it delete harvested pods (one request for many)
        if status.phase == "Complete":
            if run_id not in self._cleaned:
                if self._pods_of(name):
                    self.backend(name, planned).cleanup(run_id)  # pods a crash left behind after their harvest
                self._cleaned.add(run_id)
                self._drop_backend(name)
            return None
        if failures:
            return 2.0
        return IN_FLIGHT_RESYNC if book.in_flight else None

    # -- plan --------------------------------------------------------------------------------
    def _plan(self, exp: dict[str, Any]) -> _Plan:
        meta = exp["metadata"]
        spec = ExperimentResourceSpec.model_validate(exp.get("spec") or {})
        source = spec.task_source
        key = (meta["uid"], int(meta.get("generation") or 0), source.key)
        cached = self._plans.get(meta["name"])
        if cached is not None and cached.key == key:
            return cached
        if source.image is not None:
            cat = taskimage.read_catalog(
                self.core,
                self.namespace,
                source.image,
                spec.kubernetes or KubernetesOptions(),
                on_read=self._catalog_read,
            )
            tasks, root = taskimage.load_set(cat, source.image, self.scratch, spec.tasks)
        else:
            assert source.bundle is not None
            tasks = tasksets.load_set(self.core, self.namespace, source.bundle, self.scratch, spec.tasks)
            root = self.scratch / source.bundle
        no_image = sorted(t.id for t in tasks if not (spec.image or t.spec.environment.docker_image))
        if no_image:
            raise SpecInvalid(
                f"spec.image: tasks without a docker_image need the experiment's image: {', '.join(no_image[:5])}"
            )
        experiment = spec.model_copy(update={"tasks_dir": str(root)})
        # as the CLI refuses a sweep; the CPUs are those of the nodes this Experiment's pods could land on
        archs = node_arch.read(CoreJson(self.core.api_client), spec.kubernetes or KubernetesOptions()).architectures
        if refused := faithful.controller_refusal(experiment, tasks, architectures=archs):
            raise SpecInvalid(refused)
        p = _Plan(
            key,
            engine.experiment_digest(experiment),
            experiment,
            {t.id: t for t in tasks},
            CompactPlan.of(experiment, tasks),
        )
        self._plans[meta["name"]] = p
        return p

    @staticmethod
    def _catalog_read(image: str, image_id: str, tasks: int) -> None:
        log.info("task-set catalog read from image", image=image, image_id=image_id, tasks=tasks)

    def _forget(self, name: str) -> None:
        """An Experiment is gone: its Trials and pods go with it (owner references); release the finalizers."""
        self._plans.pop(name, None)
        pods = self._pods_of(name)
        with self._lock:
            backend = self._backends.get(name)
        runs = sorted(
            cast("set[str]", {((p.get("metadata") or {}).get("labels") or {}).get(LABEL_RUN) for p in pods} - {None})
        )
        if runs and backend is None:
            backend = self.make_backend(name, None)
            with self._lock:
                self._backends[name] = backend
        for run in runs:
            log.info("experiment deleted: releasing its pods", experiment=name, run_id=run)
            assert backend is not None
            backend.cleanup(run)
        self._drop_backend(name)

    def _pods_of(self, experiment: str) -> list[dict[str, Any]]:
        # JSON, not V1Pods: the typed core API is 20 MB the controller loads only once it runs pods (kube/raw.py).
        return CoreJson(self.core.api_client).list_pods(self.namespace, f"{LABEL_EXPERIMENT}={label_value(experiment)}")

    def _trials_of(self, run_id: str) -> list[dict[str, Any]]:
        return [t for t in self.trials.items() if t["spec"].get("runId") == run_id]

    # -- one try -------------------------------------------------------------------------------
    def _start(self, exp: dict[str, Any], planned: _Plan, run_id: str, pending: Pending, bound: Any) -> None:
        p = pending.trial
        name = engine.trial_name(run_id, p.trial_id, pending.try_index)
        task = planned.tasks[p.task_id]
        spec = TrialSpec(
            experiment=exp["metadata"]["name"],
            run_id=run_id,
            trial_id=p.trial_id,
            task=p.task_id,
            task_digest=task.digest,
            configuration=ConfigurationRef(
                label=p.config.label,
                request_multiplier=p.config.request_multiplier,
                limit_multiplier=p.config.limit_multiplier,
            ),
            attempt=p.attempt,
            try_=pending.try_index,
            retry_of=pending.retry_of,
            seed=p.seed,
            order=p.order,
        )
        body = {
            "apiVersion": API_VERSION,
            "kind": "Trial",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    LABEL_EXPERIMENT: exp["metadata"]["name"],
                    LABEL_RUN: run_id,
                    LABEL_TASK: label_value(p.task_id),
                    LABEL_CONFIGURATION: label_value(p.config.label),
                },
                "ownerReferences": [
                    {
                        "apiVersion": API_VERSION,
                        "kind": "Experiment",
                        "name": exp["metadata"]["name"],
                        "uid": exp["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": spec.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        try:
            # The custom objects API returns the decoded JSON object; its client types that as object.
            created = cast(
                "dict[str, Any]",
                self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, TRIAL_PLURAL, body),
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            created = cast(
                "dict[str, Any]",
                self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, TRIAL_PLURAL, name),
            )
        self.trials.upsert(created)
        bound.info(
            "trial created",
            trial=name,
            trial_id=p.trial_id,
            attempt=p.attempt,
            try_=pending.try_index,
            retry_of=pending.retry_of,
        )
        self._handle(created, planned, self.backend(exp["metadata"]["name"], planned))

    def _launch(self, trial: dict[str, Any], planned: _Plan) -> Any:
        spec = trial["spec"]
        p = planned.trials.get(spec["trialId"])
        if p is None:
            raise KeyError(f"trial {spec['trialId']!r} is not in the plan")
        return engine.launch_for(
            planned.experiment,
            planned.tasks[p.task_id],
            p,
            spec["try"],
            spec["runId"],
            planned.digest,
            labels={LABEL_EXPERIMENT: label_value(spec["experiment"])},
        )

    def _handle(self, trial: dict[str, Any], planned: _Plan, backend: engine.Backend) -> engine.Handle | None:
        """The backend's handle of a Trial's pod, or None when the try was found dead and abandoned.

        In this process: from memory. After a restart: the backend adopts the pod if it is
        still there (running, or ended and not yet recorded); a Trial never submitted is
        submitted now (idempotent on the name, so a pod created just before a crash is
        adopted, not started twice); a pod that vanished while no controller ran leaves
        its try abandoned (kept on record, never counted), and the next try runs.
        """
        name = trial["metadata"]["name"]
        exp_name = trial["spec"]["experiment"]
        with self._lock:
            held = self._handles.get(name)
        if held is not None:
            return held[1]
        launch = self._launch(trial, planned)
        status = TrialStatus.model_validate(trial.get("status") or {})
        handle = backend.adopt(launch)
        if handle is None and status.handle and not _ever_placed(status):
            # The handle was written while the pod's create was still on its way (creates are
            # asynchronous) and the controller died before it landed: the try never ran, so it is
            # submitted now under its own name, not abandoned. A pod that was placed keeps its
            # finalizer until its result is recorded, so "placed and gone" means someone removed it.
            log.info("try resubmitted: its pod was never created", trial=name, trial_id=trial["spec"]["trialId"])
        elif handle is None and status.handle:
            status.phase = "Abandoned"
            status.message = "the pod was gone when the controller came back; the trial runs again"
            status.timings.finished = now_rfc3339()
            self._write_trial_status(trial, status, only_if_unfinished=True)
            log.warning("try abandoned: its pod is gone", trial=name, trial_id=trial["spec"]["trialId"])
            return None
        if handle is None:
            handle = backend.submit(launch)
        if not status.handle:
            status.handle = handle.model_dump(mode="json")
            status.pod = handle.name
            status.timings.queued = status.timings.queued or trial["metadata"].get("creationTimestamp")
            self._write_trial_status(trial, status, only_if_unfinished=True)
        with self._lock:
            self._handles[name] = (exp_name, handle)
        return handle

    def owner_hook(self, launch: Any, body: dict[str, Any]) -> dict[str, Any]:
        """Chain Experiment -> Trial -> Pod in the pod's own body, so deleting a Trial deletes its pod."""
        trial = self.trials.get(launch.name)
        if trial is not None:
            body["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": API_VERSION,
                    "kind": "Trial",
                    "name": trial["metadata"]["name"],
                    "uid": trial["metadata"]["uid"],
                    "controller": True,
                }
            ]
        return body

    def _advance(self, exp: dict[str, Any], planned: _Plan, trial: dict[str, Any], bound: Any) -> bool:
        """Observe one in-flight try; settle it when it ended. True when it was settled (or abandoned)."""
        name = trial["metadata"]["name"]
        order = planned.trials.order_of(trial["spec"]["trialId"])
        if order is None:
            return False  # not in this plan (cannot happen while the spec is immutable)
        backend = self.backend(exp["metadata"]["name"], planned)
        handle = self._handle(trial, planned, backend)
        if handle is None:
            return True
        facts = backend.observe(handle)
        if facts is None:
            self._note_running(self.trials.get(name) or trial, backend)
            return False
        spec = trial["spec"]
        finished_before = sum(
            1
            for t in self._trials_of(spec["runId"])
            if t["spec"]["trialId"] == spec["trialId"] and (t.get("status") or {}).get("phase") == "Finished"
        )
        task = planned.tasks[planned.trials.task_id(order)]
        settled = engine.settle_try(facts, planned.experiment, task, finished_before)
        try:
            written = self._finish(self.trials.get(name) or trial, settled)
        except Exception as exc:  # noqa: BLE001 - one try's unstorable evidence must not stall the Experiment
            with self._lock:
                failures = self._write_failures[name] = self._write_failures.get(name, 0) + 1
            if _transient(exc) and failures < WRITE_ATTEMPTS:
                with self._lock:  # the pod is still held: the next pass adopts and harvests it again
                    self._handles.pop(name, None)
                raise
            # The API server refused this result (or kept failing on it): record that against the try, as the
            # CLI's loop does (orchestrator.engine.settle.unstorable), so the pod is released and the run goes on,
            # instead of harvesting the same pod and failing the same write forever.
            settled = unstorable(settled.facts, exc, secret_values(planned.experiment.agent.env_passthrough))
            bound.warning("trial result not storable; recorded as harness_error", trial=name, error=str(exc)[:300])
            try:
                written = self._finish(self.trials.get(name) or trial, settled)
            except Exception:
                with self._lock:
                    self._handles.pop(name, None)
                raise
        with self._lock:
            self._write_failures.pop(name, None)
        recorded(backend, handle)  # the result is in the Trial's status (or was already): the pod may go
        if written:
            self._account(exp, trial, settled, bound)
        with self._lock:
            self._handles.pop(name, None)
        return True

    def _note_running(self, trial: dict[str, Any], backend: engine.Backend) -> None:
        """Record when the pod was scheduled and started, and where, from the backend's pod cache."""
        pods = pod_informer(backend)
        if pods is None:
            return
        pod = pods.informer(trial["spec"]["runId"]).pod(trial["metadata"]["name"])
        if pod is None:
            return
        status = TrialStatus.model_validate(trial.get("status") or {})
        want = status.model_copy(deep=True)
        _pod_timings(want, pod)
        if (pod.get("status") or {}).get("phase") == "Running":
            want.phase = "Running"
        if want != status:
            self._write_trial_status(trial, want, only_if_unfinished=True)

    def _finish(self, trial: dict[str, Any], settled: engine.Settlement) -> bool:
        facts = settled.facts
        status = TrialStatus.model_validate(trial.get("status") or {})
        agent_s = facts.agent.duration_s if facts.agent else None
        verifier_s = facts.verifier.duration_s if facts.verifier else None
        evidence, truncated = bounded_evidence(facts)
        extra = facts.extra
        done = status.model_copy(
            update={
                "phase": "Finished",
                "outcome": settled.verdict.outcome.value,
                "reason": settled.verdict.reason.value if settled.verdict.reason else None,
                "final": settled.final,
                "reward": facts.reward,
                "node": extra.node or status.node,
                "qos_class": facts.qos_class or status.qos_class,
                "enforcement": facts.enforcement,
                "request_cpus": facts.request_cpus,
                "request_memory_bytes": facts.request_memory_bytes,
                "limit_cpus": facts.limit_cpus,
                "limit_memory_bytes": facts.limit_memory_bytes,
                "peak_memory_bytes": facts.peak_memory_bytes,
                "oom_kills": sum(s.oom_kills for s in (facts.agent, facts.verifier) if s is not None),
                "duration_seconds": facts.duration_s,
                "message": str(settled.verdict),
                "evidence": evidence,
                "evidence_truncated": truncated or None,
                "timings": TrialTimings(
                    queued=status.timings.queued or trial["metadata"].get("creationTimestamp"),
                    scheduled=status.timings.scheduled,
                    started=status.timings.started,
                    finished=now_rfc3339(),
                    agent_seconds=agent_s,
                    verifier_seconds=verifier_s,
                ),
            }
        )
        if extra.pod_status is not None:  # the pod as the evidence kept it, in the API's shape
            _pod_timings(done, {"status": extra.pod_status.model_dump(mode="json"), "spec": {"nodeName": extra.node}})
        return self._write_trial_status(trial, done, only_if_unfinished=True)

    def _account(self, exp: dict[str, Any], trial: dict[str, Any], settled: engine.Settlement, bound: Any) -> None:
        spec = trial["spec"]
        label = spec["configuration"]["label"]
        v = settled.verdict
        reason = v.reason.value if v.reason else ""
        m = self.metrics
        m.tries_settled.labels(
            self.namespace, spec["experiment"], label, v.outcome.value, reason, "true" if settled.final else "false"
        ).inc()
        facts = settled.facts
        if reason == "oom_killed":
            m.oom_kills.labels(self.namespace, spec["experiment"], label).inc()
        if facts.agent:
            m.phase_duration.labels("agent").observe(facts.agent.duration_s)
        if facts.verifier:
            m.phase_duration.labels("verifier").observe(facts.verifier.duration_s)
        m.phase_duration.labels("total").observe(facts.duration_s)
        timings = (trial.get("status") or {}).get("timings") or {}
        queued = _epoch(trial["metadata"].get("creationTimestamp"))
        scheduled = _epoch(timings.get("scheduled"))
        if queued is not None and scheduled is not None:
            m.queue_wait.labels(self.namespace, spec["experiment"]).observe(max(0.0, scheduled - queued))
            m.phase_duration.labels("scheduling").observe(max(0.0, scheduled - queued))
        bound.info(
            "trial settled",
            trial=trial["metadata"]["name"],
            trial_id=spec["trialId"],
            outcome=v.outcome.value,
            reason=reason,
            final=settled.final,
            reward=facts.reward,
        )
        if v.outcome.value == "infra_error":
            self.events.record(
                exp,
                "Warning",
                "TrialInfraError",
                f"trial {spec['trialId']} try {spec['try']}: {v}" + ("" if settled.final else " (will retry)"),
                key=f"{trial['metadata']['name']}.infra",
            )

    # -- writes ---------------------------------------------------------------------------------
    def _write_trial_status(self, trial: dict[str, Any], status: TrialStatus, *, only_if_unfinished: bool) -> bool:
        """Write a Trial's status; on a conflict re-read and try again. False if it was already Finished."""
        name = trial["metadata"]["name"]
        current = trial
        for _ in range(5):
            if only_if_unfinished and is_finished(current):
                return False
            body = {
                "apiVersion": API_VERSION,
                "kind": "Trial",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "resourceVersion": current["metadata"]["resourceVersion"],
                },
                "spec": current["spec"],
                "status": status.model_dump(by_alias=True, mode="json", exclude_none=True),
            }
            try:
                written = cast(
                    "dict[str, Any]",
                    self.custom.replace_namespaced_custom_object_status(
                        GROUP, VERSION, self.namespace, TRIAL_PLURAL, name, body
                    ),
                )
                self.trials.upsert(written)
                return True
            except ApiException as exc:
                if exc.status != 409:
                    raise
                current = cast(
                    "dict[str, Any]",
                    self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, TRIAL_PLURAL, name),
                )
        raise StatusConflict(f"trial {name}: status kept conflicting")

    def _write_experiment_status(self, exp: dict[str, Any], status: ExperimentStatus) -> None:
        want = status.model_dump(by_alias=True, mode="json", exclude_none=True)
        if want == (exp.get("status") or {}):
            return
        name = exp["metadata"]["name"]
        current = exp
        for _ in range(5):
            body = {**{k: v for k, v in current.items() if k != "status"}, "status": want}
            try:
                written = cast(
                    "dict[str, Any]",
                    self.custom.replace_namespaced_custom_object_status(
                        GROUP, VERSION, self.namespace, EXPERIMENT_PLURAL, name, body
                    ),
                )
                self.experiments.upsert(written)
                return
            except ApiException as exc:
                if exc.status == 404:
                    return  # deleted meanwhile
                if exc.status != 409:
                    raise
                current = cast(
                    "dict[str, Any]",
                    self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, EXPERIMENT_PLURAL, name),
                )
        raise RuntimeError(f"experiment {name}: status kept conflicting")

    def _fail(self, exp: dict[str, Any], previous: ExperimentStatus, reason: str, message: str, terminal: bool) -> None:
        status = failed_status(
            previous, generation=exp["metadata"].get("generation"), reason=reason, message=message, terminal=terminal
        )
        if status != previous:
            self.events.record(
                exp,
                "Warning",
                reason,
                message,
                key=f"{exp['metadata']['name']}.{reason.lower()}.{exp['metadata'].get('generation', 0)}",
            )
            log.warning("experiment cannot run", experiment=exp["metadata"]["name"], reason=reason, message=message)
        self._write_experiment_status(exp, status)

    def _milestones(self, exp: dict[str, Any], previous: ExperimentStatus, status: ExperimentStatus) -> None:
        name = exp["metadata"]["name"]
        if previous.phase in ("Pending", "Failed") and status.phase in ("Running", "Complete") and previous.tries == 0:
            self.events.record(
                exp,
                "Normal",
                "Started",
                f"run {status.run_id}: {status.planned} trials, first tries submitted",
                key=f"{name}.started",
            )
        if previous.phase != "Complete" and status.phase == "Complete":
            summary = ", ".join(
                f"{c.configuration}: {c.passed}/{c.finished} passed, {c.infra_error} infra errors"
                for c in status.configurations
            )
            self.events.record(
                exp, "Normal", "Completed", f"all {status.planned} trials finished ({summary})", key=f"{name}.completed"
            )
            log.info("experiment complete", experiment=name, run_id=status.run_id, planned=status.planned)


def _ever_placed(status: TrialStatus) -> bool:
    """The controller saw this try's pod bound to a node or running (so it existed)."""
    return bool(status.timings.scheduled or status.timings.started or status.phase == "Running" or status.node)


def cluster_provenance(backend: engine.Backend, max_nodes: int = 50) -> dict[str, Any]:
    """The backend's facts (server version, nodes, quotas, abilities), kept small for the status."""
    try:
        facts = backend.facts()
    except Exception as exc:  # provenance is recorded as unavailable, never a failed reconcile
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    cluster = facts.kubernetes
    if cluster is not None and isinstance(cluster.nodes, list) and len(cluster.nodes) > max_nodes:
        facts.kubernetes = cluster.model_copy(
            update={"nodes": cluster.nodes[:max_nodes], "nodes_truncated": len(cluster.nodes)}
        )
    return facts.model_dump(mode="json")


def _pod_timings(status: TrialStatus, pod: dict[str, Any]) -> None:
    """Fill scheduled/started/node/QoS from a pod (or the pod status kept in the evidence)."""
    ps = pod.get("status") or {}
    cond = {c.get("type"): c for c in ps.get("conditions") or [] if isinstance(c, dict)}
    sched = cond.get("PodScheduled") or {}
    if sched.get("status") == "True":
        status.timings.scheduled = status.timings.scheduled or sched.get("lastTransitionTime")
    if ps.get("startTime") and ps.get("phase") in ("Running", "Succeeded", "Failed"):
        status.timings.started = status.timings.started or ps.get("startTime")
    status.node = status.node or (pod.get("spec") or {}).get("nodeName")
    status.qos_class = status.qos_class or ps.get("qosClass")


def bounded_evidence(facts: TrialFacts, limit: int = EVIDENCE_LIMIT_BYTES) -> tuple[dict[str, Any], bool]:
    """The facts as JSON of at most ``limit`` bytes: long text is cut from the front, then extras dropped."""
    data = facts.model_dump(mode="json")
    if len(_json(data)) <= limit:
        return data, False
    for step in ("agent", "verifier"):
        s = data.get(step)
        if s:
            for k in ("stdout_tail", "stderr_tail"):
                if isinstance(s.get(k), str) and len(s[k]) > 512:
                    s[k] = "…" + s[k][-512:]
    if len(_json(data)) <= limit:
        return data, True
    extra = data.get("extra") or {}
    for key in sorted(extra, key=lambda k: len(_json(extra[k])), reverse=True):
        extra[key] = "[dropped: evidence limit]"
        if len(_json(data)) <= limit:
            return data, True
    return {k: data[k] for k in ("enforcement", "qos_class", "reward", "setup_error", "infra_hint") if k in data}, True


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj, separators=(",", ":"))


def _status_of(exp: dict[str, Any]) -> ExperimentStatus:
    try:
        return ExperimentStatus.model_validate(exp.get("status") or {})
    except ValidationError:
        return ExperimentStatus()


def _epoch(ts: str | None) -> float | None:
    if not ts:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


__all__ = ["Reconciler", "run_id_of", "bounded_evidence", "Ledger", "LABEL_FINAL"]
