"""The Kubernetes backend: each try one Pod, watched through one informer per run.

``submit`` creates the try's Pod (idempotent on its name; a ResourceQuota rejection
or a 429 is retried later, never a trial failure; other API errors are retried for
``api_retry_s`` and then end the try as ``api_error``). ``observe`` reads the
informer's cache and never waits for the try: once :func:`signals.observe` says the
pod is done, the status is harvested, the finalizer removed and the pod marked for
deletion (harvested pods are deleted in one collection request every few seconds,
or kept with ``keep_pods``). ``adopt`` finds a pod a previous process left running.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from orchestrator.backends.base import CleanupReport, ClosesOnExit, Handle
from orchestrator.backends.kubernetes import cluster_facts, fit, limit_resource, node_arch, runlease, scripts, signals
from orchestrator.backends.kubernetes import pod as pod_mod
from orchestrator.backends.kubernetes.api_workers import CREATE, RELEASE, ApiWorkers
from orchestrator.backends.kubernetes.nodes import Nodes
from orchestrator.backends.kubernetes.run_cache import RunCache
from orchestrator.errors import KubeConfigError, UserError
from orchestrator.kube import finalizers, raw
from orchestrator.kube.api import ApiException, client
from orchestrator.kube.client import connect, counted
from orchestrator.kube.errors import API_ERRORS, Failure, api_message, classify
from orchestrator.spec.backend import BackendAbilities, BackendFacts
from orchestrator.spec.evidence import ApiRefusal, QueueHold
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import Launch, environment_network
from orchestrator.spec.names import label_value
from orchestrator.spec.outcome import InfraReason
from orchestrator.spec.resources import ResourceAmounts
from orchestrator.tasks.environment_image import built_image_ref
from orchestrator.tasks.files import AgentFiles, ImageTaskFiles, TaskBundle, agent_files
from orchestrator.tasks.files import bundle as make_bundle

if TYPE_CHECKING:
    from orchestrator.backends.kubernetes.external import PodAgent

log = logging.getLogger(__name__)
PodHook = Callable[[Launch, dict[str, Any]], dict[str, Any]]
RUN_LABEL = "headroom.dev/run"
#: Harvested pods are deleted together, at most this often (one request for all of them).
SWEEP_EVERY_S = 5.0
#: A pod created but not yet seen by the watch is looked up once after this long.
UNSEEN_GRACE_S = 30.0
LOG_TAIL_BYTES = 8192
#: A pod create's connect and read timeouts (s): a create that hangs is retried (a 409 then says it had landed),
#: never waited on for good. An admission webhook may take up to 30 s.
CREATE_TIMEOUT_S = (10, 60)
#: Creates and finalizer releases run on this many workers, off the engine's loop (creates first, paced).
API_WORKERS = 8
#: An infrastructure ending is held this long for its Events: they come on their own watch and
#: are often written after the status change (the kubelet's eviction, kwok's stages), so a
#: harvest at the first sight of the status would keep the classification but lose its evidence.
EVENT_GRACE_S = 2.0


def api_client_for(options: KubernetesOptions) -> Any:
    """An API client from the kubeconfig files (path list, context) or, inside a cluster, the service account."""
    try:
        return connect(options.kubeconfig, options.context)
    except KubeConfigError as exc:
        raise UserError(str(exc), field="kubernetes.kubeconfig") from None


def _drain(resp: Any) -> None:
    """Read a raw response to its end (its connection goes back to the pool) without decoding it."""
    _ = resp.data
    resp.release_conn()


@dataclass
class _Try:
    launch: Launch
    body: dict[str, Any]
    submitted_at: float
    created: bool = False
    retry_at: float = 0.0
    api_errors_since: float | None = None
    last_error: str | None = None
    queued_waits: int = 0
    looked_up_at: float | None = None
    deleting: bool = False
    creating: bool = False
    result: TrialFacts | None = None
    created_at: float | None = None
    seen_version: int | None = None  # the informer's change count for this pod at the last classification
    seen_state: str | None = None
    seen_at: float = 0.0
    extended: dict[str, str] | None = None  # limit-aware placement: the extended resource the task container holds
    ended_at: float | None = None  # when an infrastructure ending was first seen (see EVENT_GRACE_S)
    gated: bool = False  # seen held by a scheduling gate (Kueue's, until it admits the pod)
    gated_s: float | None = None  # creation to the first sight of the pod without its gates
    adopted: bool = False  # found running by a later process: an external agent's host thread died with the first


@dataclass
class _Stats:
    submitted: int = 0
    harvested: int = 0
    quota_waits: int = 0
    api_retries: int = 0
    lookups: int = 0
    log_tails: int = 0
    by_state: dict[str, int] = field(default_factory=dict)


class KubernetesBackend(ClosesOnExit):
    #: external agents run on this host and act on the try's pod over pods/exec (:mod:`.external`)
    abilities = BackendAbilities(
        enforcement="kubernetes",
        memory_limit=True,
        memory_request=True,
        cpu_quota=True,
        cpu_request=True,
        storage_limit=True,
        oom_signal="container status OOMKilled, and the container cgroup's oom_kill counter read by the runner",
        isolation="pod",
        network_control=True,
        notes=[
            "limits are enforced by the kubelet and container runtime of each node (recorded per trial)",
            "allow_internet=false is a NetworkPolicy: enforced only where the cluster's network plugin implements it",
        ],
        check_fit=True,
        hold_run=True,
        recorded=True,
        canary_targets=True,
        informer=True,
        places_tries=True,
        canary_needs_image=True,
        force_cleanup=True,
        exec_channel=True,
        task_images=True,
        node_architectures=True,
        verifier_outputs=False,  # the verifier's container gets the work dir alone (docs/container-contract.md)
        flags=frozenset({"--namespace", "--kube-context", "--queue", "--keep-pods", "--force"}),
    )
    name = "kubernetes"

    def __init__(
        self,
        options: KubernetesOptions | None = None,
        *,
        api_client: Any = None,
        pod_hook: PodHook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options or KubernetesOptions()
        self.namespace = self.options.namespace
        self.api_client = counted(api_client or api_client_for(self.options))
        self.requests = self.api_client.requests
        self.core = client.CoreV1Api(self.api_client)
        self.nodes = Nodes(self.core, self.options)  # canary targets and per-node overcommit (nodes.py)
        self.pod_hook = self.nodes.pinning(pod_hook)  # tests add the simulated plane's outcome annotations
        self.clock = clock
        self.stats = _Stats()
        if self.options.run_as_root:
            self._note("task containers run as root (Pod Security 'baseline')")
        self._lock = threading.RLock()
        self._changed = threading.Condition()
        self._informers: dict[str, RunCache] = {}
        self._tries: dict[str, _Try] = {}
        self._bundles: dict[str, TaskBundle] = {}
        self._agents: dict[str, AgentFiles] = {}
        self._pod_agents: dict[str, PodAgent] = {}  # external agents running on this host, by pod name
        self._configmaps: set[str] = set()
        self._secrets: set[str] = set()
        self._policy_done = False
        self._to_delete: set[str] = set()  # run labels with harvested pods awaiting the collection delete
        self._unreleased: dict[str, tuple[Launch, bool]] = {}  # harvested, finalizer not yet removed
        # Harvested, but the caller has not yet said the result is durable: the finalizer stays,
        # so a crash before that write finds the pod again (adopt) instead of losing the result.
        self._harvested: dict[str, tuple[Launch, bool]] = {}
        self._last_sweep = 0.0
        self._sweeping = threading.Lock()
        self._sweep_refused = False
        self._latency: dict[str, float] = {"submit_to_created_s": 0.0, "created_to_harvest_s": 0.0, "n": 0}
        self._generation = 0
        self._waited_generation = 0
        # tries whose create ended since the engine last asked (changed()): the watch may show the pod before the
        # create's answer comes back, and until then observe cannot use what it shows
        self._touched: set[str] = set()
        # submitted tries whose pod is not known to be created (a result is only ever set before that): what
        # changed() and wait() look through, instead of every try in flight on every wake-up
        self._uncreated: set[str] = set()
        self._pool = ApiWorkers(API_WORKERS)
        self._leases = runlease.RunLeases(self.api_client, self.namespace, self.clock)
        self._fit_check: dict[str, Any] = {
            "checked": False,
            "why": "not asked (headroom sweep asks before a run starts)",
        }

    # -- informers ------------------------------------------------------------------------
    def _notify(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def informer(self, run_id: str) -> RunCache:
        run_label = label_value(run_id)
        with self._lock:
            inf = self._informers.get(run_label)
            if inf is None:
                selector = f"{RUN_LABEL}={run_label},app.kubernetes.io/managed-by=headroom"
                inf = RunCache(self.core, self.namespace, selector, self._notify, self.nodes.pod_seen)
                self.nodes.start(wait=False)
                self._informers[run_label] = inf
                inf.start()
            return inf

    # -- objects a try needs --------------------------------------------------------------
    def _pod_body(self, t: _Try) -> dict[str, Any]:
        """The try's pod, once every object it needs exists: the no-network policy (an offline pod is never
        created before it), the runner's and the task's ConfigMaps, the agent's Secret and files. At submit, and
        again before a create when an API error stopped that (``_try_create``)."""
        launch = t.launch
        if not environment_network(launch):
            self._network_policy()
        self._config_map(scripts.configmap_name(), scripts.configmap)  # every pod mounts the runner and the warden
        bundle = self._bundle(launch)
        image = launch.task.docker_image or built_image_ref(launch.task_id, launch.task.path) or ""
        body = pod_mod.build(
            launch, self.options, bundle, image, self._secret(launch), t.extended, self._agent_files(launch)
        )
        return self.pod_hook(launch, body) if self.pod_hook else body

    def _config_map(self, name: str, body: Callable[[dict[str, str]], dict[str, Any]]) -> None:
        """The ConfigMap ``name`` (named by its content), created once per process; one already there is kept."""
        if name not in self._configmaps:
            self._create(self.core.create_namespaced_config_map, body(dict(pod_mod.MANAGED_BY)))
            self._configmaps.add(name)

    def _bundle(self, launch: Launch) -> TaskBundle | ImageTaskFiles:
        if self.options.task_set_image:
            # The files come from the task-set image; its catalog's tests manifest is next to the
            # task's metadata the controller wrote out (see orchestrator.controller.taskimage).
            from orchestrator.tasks.image import tests_manifest_of

            return ImageTaskFiles(launch.task.task_id, self.options.task_set_image, tests_manifest_of(launch.task.path))
        b = self._bundles.get(launch.task.digest)
        if b is None:
            b = make_bundle(launch.task.task_id, launch.task.path, launch.task.digest)
            self._bundles[launch.task.digest] = b
        self._config_map(b.name, b.configmap)
        return b

    def _agent_files(self, launch: Launch) -> AgentFiles | None:
        """An installed agent's directory as its ConfigMap (read once per directory, created once per content)."""
        if not launch.agent_dir:
            return None
        a = self._agents.get(launch.agent_dir)
        if a is None:
            a = agent_files(launch.agent_dir)
            self._agents[launch.agent_dir] = a
        self._config_map(a.name, a.configmap)
        return a

    def _create(self, fn: Callable[..., Any], body: dict[str, Any]) -> None:
        try:
            fn(self.namespace, body)
        except ApiException as exc:
            if exc.status != 409:  # already there: created by an earlier try or process
                raise

    def _secret(self, launch: Launch) -> str | None:
        if not launch.agent.secret_env or launch.agent_kind == "external":  # an external agent's stay on the host
            return None
        name = pod_mod.secret_name(launch.labels[RUN_LABEL])
        if name not in self._secrets:
            values = {k: os.environ[k] for k in launch.agent.secret_env if k in os.environ}
            self._create(
                self.core.create_namespaced_secret,
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "Opaque",
                    "metadata": {"name": name, "labels": {**pod_mod.MANAGED_BY, RUN_LABEL: launch.labels[RUN_LABEL]}},
                    "stringData": values,
                },
            )
            self._secrets.add(name)
        return name

    def _network_policy(self) -> None:
        if self._policy_done:
            return
        try:
            self._create(
                client.NetworkingV1Api(self.api_client).create_namespaced_network_policy, pod_mod.network_policy()
            )
        except ApiException as exc:
            if exc.status not in (403, 404):
                raise
            self._note(f"could not create the no-network policy ({exc.status})")
        self._policy_done = True

    def _note(self, note: str) -> None:
        """What a reader of the report must know, learnt since the class declared its abilities."""
        self.abilities = self.abilities.model_copy(update={"notes": [*self.abilities.notes, note]})

    # -- the protocol ---------------------------------------------------------------------
    def _handle(self, launch: Launch) -> Handle:
        return Handle(
            name=launch.name,
            run_id=launch.run_id,
            trial_id=launch.trial_id,
            try_index=launch.try_index,
            backend=self.name,
            data={"namespace": self.namespace},
        )

    def submit(self, launch: Launch) -> Handle:
        with self._lock:
            if launch.name in self._tries:
                return self._handle(launch)
        inf = self.informer(launch.run_id)
        inf.expect(launch.name)
        if launch.verifier is None:  # refused before any run (check_capabilities); this guards direct callers
            raise UserError(
                f"task {launch.task_id} has no tests/: the kubernetes backend needs tests/test.sh",
                field="tests/test.sh",
            )
        image = launch.task.docker_image or built_image_ref(launch.task_id, launch.task.path)
        if not image:
            raise UserError(
                f"task {launch.task_id} has no docker_image and no environment/Dockerfile; set one "
                "or the experiment's image",
                field="image",
            )
        t = _Try(launch=launch, body={}, submitted_at=self.clock())
        with self._lock:
            self._tries[launch.name] = t
            self._uncreated.add(launch.name)
        if launch.placement == "limit-aware":
            t.extended = self._limit_resource(launch)
            if t.extended is None:  # the CLI refuses this before the run (check_fit); a controller run lands here
                why = (
                    f"nodes cannot be read ({self.nodes.forbidden})"
                    if self.nodes.forbidden
                    else f"no candidate node advertises {limit_resource.RESOURCE} (an admin runs "
                    f"`{limit_resource.ADVERTISE_COMMAND}`)"
                )
                t.result = self._api_error_facts(
                    t,
                    f"placement limit-aware: a try without a memory limit requests the largest amount of "
                    f"{limit_resource.RESOURCE} a candidate node advertises, but {why}",
                    InfraReason.SPAWN_FAILED,
                )
                return self._handle(launch)
        try:
            t.body = self._pod_body(t)
        except API_ERRORS as exc:
            self._api_failure(t, exc)
            return self._handle(launch)
        except BaseException:
            with self._lock:
                self._tries.pop(launch.name, None)
                self._uncreated.discard(launch.name)
            raise
        self.stats.submitted += 1
        self._spawn_create(t)
        return self._handle(launch)

    def _limit_resource(self, launch: Launch) -> dict[str, str] | None:
        """The extended resource a limit-aware try requests: its pod's memory limit in MiB.

        A try without a memory limit takes the largest amount a candidate node advertises, so it
        runs alone on such a node; None when no candidate node advertises any.
        """
        limit = launch.amounts.limit_memory_bytes
        if limit is not None:
            return {limit_resource.RESOURCE: str(limit_resource.pod_limit_mib(limit))}
        self.nodes.start()
        largest = self.nodes.largest_advertised()
        return None if largest is None else {limit_resource.RESOURCE: str(largest)}

    def _spawn_create(self, t: _Try) -> None:
        """Create the pod on a worker: the engine's loop never waits for a POST."""
        if t.creating:
            return
        t.creating = True

        def work() -> None:
            try:
                self._try_create(t)
            finally:
                with self._lock:
                    self._touched.add(t.launch.name)
                    if t.created and self._tries.get(t.launch.name) is t:  # not a later try of that name
                        self._uncreated.discard(t.launch.name)
                t.creating = False
                self._notify()

        self._pool.submit(work, priority=CREATE)

    def _api_failure(self, t: _Try, exc: BaseException) -> None:
        """Wait and retry: a full quota or a 429 forever, anything else for api_retry_s."""
        now = self.clock()
        status = getattr(exc, "status", None)
        body = str(getattr(exc, "body", "") or exc)
        t.last_error = (
            f"{status} {getattr(exc, 'reason', '')}: {body}"[:500] if status else f"{type(exc).__name__}: {exc}"[:500]
        )
        failure = classify(exc)
        if failure is Failure.THROTTLED:
            self.stats.quota_waits += 1
            t.queued_waits += 1
            t.retry_at = now + min(30.0, 1.0 * 2 ** min(t.queued_waits, 5))
            t.api_errors_since = None
            return
        if failure in (Failure.REFUSED, Failure.NOT_FOUND, Failure.GONE):
            # A refused spec (422 Invalid, an admission webhook's or Pod Security's 403): retrying
            # cannot help, and the try never started. The server's own words are the evidence.
            t.result = self._api_error_facts(
                t, f"the API server refused the pod: {api_message(exc)}", InfraReason.SPAWN_FAILED
            )
            t.result.extra.api_refusal = ApiRefusal(
                status=status, reason=getattr(exc, "reason", None), message=api_message(exc)
            )
            return
        self.stats.api_retries += 1
        if t.api_errors_since is None:
            t.api_errors_since = now
        if now - t.api_errors_since > self.options.api_retry_s:
            t.result = self._api_error_facts(t, f"API errors for {self.options.api_retry_s:.0f}s: {t.last_error}")
            return
        t.retry_at = now + 2.0

    def _api_error_facts(self, t: _Try, detail: str, reason: InfraReason = InfraReason.API_ERROR) -> TrialFacts:
        ctx = signals.Context(now=self.clock(), amounts=t.launch.amounts)
        return signals.without_pod(t.launch.name, ctx, reason, detail)

    def _try_create(self, t: _Try) -> None:
        if not t.body:  # an object the pod needs (the policy, a ConfigMap, the Secret) could not be made yet
            try:
                t.body = self._pod_body(t)
            except API_ERRORS as exc:
                self._api_failure(t, exc)
                return
        try:
            # The body is sent as the JSON it is: the generated create_namespaced_pod validated it into a V1Pod and
            # dumped that back (about 1.5 ms of CPU a pod, the same JSON: tests/kubernetes/test_pod_spec.py), and the
            # created pod comes back on the watch, so its echo here is read but not decoded. Strict: a field the API
            # server does not know is a refusal (spawn_failed, its words as evidence), never silently dropped.
            raw.request(
                self.api_client,
                "POST",
                f"/api/v1/namespaces/{quote(self.namespace, safe='')}/pods",
                query={"fieldValidation": "Strict"},
                body=t.body,
                timeout=CREATE_TIMEOUT_S,
            )
        except ApiException as exc:
            if exc.status == 409:
                t.created = True  # an earlier create did reach the server
                return
            self._api_failure(t, exc)
            return
        except Exception as exc:  # connection refused, reset: the API server is away
            self._api_failure(t, exc)
            return
        t.created, t.api_errors_since, t.created_at = True, None, self.clock()

    def adopt(self, launch: Launch) -> Handle | None:
        inf = self.informer(launch.run_id)
        pod = inf.pod(launch.name)
        if pod is None:
            return None
        inf.expect(launch.name)
        with self._lock:
            self._tries[launch.name] = _Try(
                launch=launch, body={}, submitted_at=self.clock(), created=True, adopted=True
            )
            self._uncreated.discard(launch.name)
        return self._handle(launch)

    def observe(self, handle: Handle) -> TrialFacts | None:
        with self._lock:
            t = self._tries.get(handle.name)
        if t is None:
            raise KeyError(f"unknown try {handle.name}: submit or adopt it first")
        if t.result is None and not t.created:
            if self.clock() >= t.retry_at:
                self._spawn_create(t)
            return None
        if t.result is not None:
            return self._finish(t, t.result)
        inf = self.informer(t.launch.run_id)
        version = inf.version(t.launch.name)
        now = self.clock()
        if version == t.seen_version and (t.seen_state == "running" or now - t.seen_at < 1.0):
            return None  # nothing changed, and no deadline can have passed meanwhile
        pod = inf.pod(t.launch.name)
        gone = inf.is_gone(t.launch.name)
        if pod is None and not gone:
            now = self.clock()
            if now - t.submitted_at > UNSEEN_GRACE_S and (
                t.looked_up_at is None or now - t.looked_up_at > UNSEEN_GRACE_S
            ):
                t.looked_up_at = now
                self.stats.lookups += 1
                try:
                    pod = self.api_client.sanitize_for_serialization(
                        self.core.read_namespaced_pod(t.launch.name, self.namespace)
                    )
                except ApiException as exc:
                    gone = exc.status == 404
                except Exception:  # noqa: S110 - the API server is away; look again later
                    pass
            if pod is None and not gone:
                return None
        ctx = signals.Context(
            now=self.clock(),
            amounts=t.launch.amounts,
            pending_deadline_s=self.options.pending_deadline_s,
            pull_deadline_s=self.options.pull_deadline_s,
            config_deadline_s=self.options.config_deadline_s,
            deleting=t.deleting,
            gone=gone and pod is None,
        )
        events = inf.events_of(t.launch.name)
        obs = signals.observe(pod, events, ctx)
        self.stats.by_state[obs.state] = self.stats.by_state.get(obs.state, 0) + 1
        if pod is not None:
            self._note_gate(t, pod, obs.state)
        if obs.state == "running" and t.launch.agent_kind == "external" and not t.adopted:
            self._start_pod_agent(t.launch)
        if obs.state != "done" or obs.facts is None:
            t.seen_version, t.seen_state, t.seen_at = version, obs.state, now
            return None
        facts = obs.facts
        if pod is not None and facts.infra_hint is not None and not t.deleting:
            t.ended_at = now if t.ended_at is None else t.ended_at
            if now - t.ended_at < EVENT_GRACE_S:
                t.seen_version, t.seen_state, t.seen_at = version, "settling", now
                return None
        if pod is not None and self._wants_log_tail(facts):
            tail = self._log_tail(t.launch.name)
            if tail:
                facts.extra.log_tail = tail
        facts.extra.pod_events_total = len(events)
        with self._lock:
            agent = self._pod_agents.pop(t.launch.name, None)
        if agent is not None:
            agent.stop()
            agent.merge(facts)
            agent.keep_artifacts(t.launch)
            agent.remove()
        # Imported at the first harvest, as PodAgent at the first external agent: a controller that
        # only counts finished Trials never loads their imports (tarfile, sqlite3, zstandard; the host
        # agent's sandbox), about 4 MB of its fixed size (docs/development.md).
        from orchestrator.backends.kubernetes import records

        if pod is not None and (rec := records.harvest(self.core, self.namespace, pod, t.launch)) is not None:
            facts.extra.records = rec.evidence()
        if pod is not None:  # released once the caller has recorded the result (``recorded``)
            with self._lock:
                self._harvested[t.launch.name] = (t.launch, obs.stop)
        return self._finish(t, facts)

    def _start_pod_agent(self, launch: Launch) -> None:
        from orchestrator.backends.kubernetes.external import PodAgent

        with self._lock:
            if launch.name in self._pod_agents:
                return
            agent = self._pod_agents[launch.name] = PodAgent(self.api_client, self.namespace, launch)
        agent.start()

    def _stop_pod_agent(self, name: str) -> None:
        with self._lock:
            agent = self._pod_agents.pop(name, None)
        if agent is not None:
            agent.stop()
            agent.remove()

    def recorded(self, handle: Handle) -> None:
        """The try's result is durable with the caller: drop the finalizer (on a worker) and delete the pod."""
        with self._lock:
            held = self._harvested.pop(handle.name, None)
        if held is not None:
            self._pool.submit(self._release, *held, priority=RELEASE)

    def _note_gate(self, t: _Try, pod: dict[str, Any], state: str) -> None:
        """Time held in a queue: from the pod's creation until it is first seen without its gates."""
        if state == "queued":
            t.gated = True
        elif t.gated and t.gated_s is None:
            created = signals.timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
            t.gated_s = max(0.0, self.clock() - created) if created is not None else None

    @staticmethod
    def _wants_log_tail(facts: TrialFacts) -> bool:
        return facts.reward is None or facts.infra_hint is not None or facts.setup_error is not None

    def _log_tail(self, name: str) -> str | None:
        self.stats.log_tails += 1
        try:
            text = self.core.read_namespaced_pod_log(
                name, self.namespace, container=signals.TASK_CONTAINER, limit_bytes=LOG_TAIL_BYTES, _request_timeout=10
            )
        except Exception as exc:  # no kubelet behind the node (kwok), or the container never started
            return f"(log unavailable: {str(exc).splitlines()[0][:200]})"
        return str(text)[-LOG_TAIL_BYTES:]

    def _finish(self, t: _Try, facts: TrialFacts) -> TrialFacts:
        now = self.clock()
        with self._lock:
            self._tries.pop(t.launch.name, None)
            self._uncreated.discard(t.launch.name)
            if t.created_at is not None:
                self._latency["submit_to_created_s"] += t.created_at - t.submitted_at
                self._latency["created_to_harvest_s"] += now - t.created_at
                self._latency["n"] += 1
        self.informer(t.launch.run_id).forget(t.launch.name)
        self.stats.harvested += 1
        if "pod" not in facts.extra.model_fields_set:  # the pod's own name, when signals saw it
            facts.extra.pod = t.launch.name
        if (placed := self.nodes.overcommit(t.launch.name)) is not None:
            facts.extra.overcommit = placed
        facts.extra.namespace = self.namespace
        if self.options.queue or t.gated:
            # Queue time, not run time: the try's deadlines start in the pod, after admission.
            facts.extra.queue = QueueHold(
                name=self.options.queue, gated=t.gated, gated_s=None if t.gated_s is None else round(t.gated_s, 3)
            )
        return facts

    def _release(self, launch: Launch, delete_now: bool = False) -> None:
        """Harvested: drop our finalizer and mark the pod; it is deleted with the next collection delete.

        The result is already safe with the caller; if the API server is away, the release is
        retried from ``wait`` (a finalizer left behind would keep the pod forever).
        """
        label = [
            {"op": "add", "path": f"/metadata/labels/{pod_mod.HARVESTED_LABEL.replace('/', '~1')}", "value": "true"}
        ]
        try:
            self._release_finalizer(launch.name, label, known=self._cached_pod(launch))
        except API_ERRORS as exc:
            if getattr(exc, "status", None) != 404:
                with self._lock:
                    self._unreleased[launch.name] = (launch, delete_now)
            return
        with self._lock:
            self._unreleased.pop(launch.name, None)
        if self.options.keep_pods and not delete_now:
            return
        if delete_now:
            self._delete(launch.name)
        else:
            with self._lock:
                self._to_delete.add(launch.labels[RUN_LABEL])

    def _cached_pod(self, launch: Launch) -> dict[str, Any] | None:
        with self._lock:
            inf = self._informers.get(label_value(launch.run_id))
        return inf.pod(launch.name) if inf is not None else None

    def _release_finalizer(
        self, name: str, also: list[dict[str, Any]] | None = None, known: dict[str, Any] | None = None
    ) -> bool:
        """Remove headroom's finalizer from the pod, and only it (other controllers' stay: Kueue's)."""

        def read() -> dict[str, Any]:
            resp = self.core.read_namespaced_pod(name, self.namespace, _preload_content=False)
            return dict(json.loads(resp.data))  # type: ignore[attr-defined]  # _preload_content=False: the raw response

        return finalizers.release(
            pod_mod.FINALIZER,
            read,
            lambda ops: _drain(self.core.patch_namespaced_pod(name, self.namespace, ops, _preload_content=False)),
            known=known,
            also=also,
        )

    def _delete(self, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        except API_ERRORS as exc:
            if getattr(exc, "status", None) != 404:
                self.sweep_later(name)

    def sweep_later(self, name: str) -> None:
        """A pod whose delete failed: the collection delete of its run takes it."""
        with self._lock:
            for inf_run, inf in self._informers.items():
                pod = inf.pod(name)
                if pod is not None:
                    self._to_delete.add(inf_run)

    def sweep_harvested(self, force: bool = False) -> None:
        """Retry finalizer releases that failed, and delete harvested pods, one collection request a run.

        On a worker, at most every SWEEP_EVERY_S: a collection delete of a few hundred pods takes
        the API server a while, and the engine's loop must not wait for it.
        """
        now = time.monotonic()
        if not force and (now - self._last_sweep < SWEEP_EVERY_S or self._sweeping.locked()):
            return
        self._last_sweep = now
        if force:
            self._sweep()
        else:
            self._pool.submit(self._sweep, priority=RELEASE)

    def _sweep(self) -> None:
        with self._sweeping:
            with self._lock:
                unreleased = list(self._unreleased.values())
            for launch, delete_now in unreleased:
                self._release(launch, delete_now)
            with self._lock:
                runs, self._to_delete = self._to_delete, set()
            for run_label in runs:
                try:
                    _drain(
                        self.core.delete_collection_namespaced_pod(
                            self.namespace,
                            label_selector=f"{RUN_LABEL}={run_label},{pod_mod.HARVESTED_LABEL}=true",
                            grace_period_seconds=0,
                            _preload_content=False,
                        )
                    )
                except Exception as exc:  # the API server is away, or refuses: next time
                    if classify(exc) is Failure.REFUSED and not self._sweep_refused:
                        # Said once: a Role without deletecollection on pods (the chart's lacked it) left
                        # every harvested pod in place, running ones holding their requests, unseen.
                        self._sweep_refused = True
                        log.warning(
                            "kubernetes backend: harvested pods cannot be deleted (%s): grant "
                            "deletecollection on pods in namespace %s",
                            api_message(exc),
                            self.namespace,
                        )
                    with self._lock:
                        self._to_delete.add(run_label)

    def cancel(self, handle: Handle) -> None:
        with self._lock:
            t = self._tries.pop(handle.name, None)
            self._uncreated.discard(handle.name)
        if t is None:
            return
        t.deleting = True
        self._stop_pod_agent(handle.name)
        self._release(t.launch, delete_now=True)

    def wait(self, handles: Sequence[Handle], timeout: float) -> None:
        self.sweep_harvested()
        with self._lock:
            due = [
                t
                for n in self._uncreated
                if (t := self._tries.get(n)) is not None and not t.created and t.result is None
            ]
        if due:
            timeout = min(timeout, max(0.05, min(t.retry_at for t in due) - self.clock()))
        with self._changed:
            # Anything since the last wait ended happened while the engine was observing: no sleep.
            if self._generation == self._waited_generation:
                self._changed.wait(timeout)
            self._waited_generation = self._generation

    def changed(self) -> set[str]:
        """The tries whose :meth:`observe` may have news since the last call: their pod or its Events changed,
        their create ended, or they still wait for a create or hold a result. Between its sweeps of every try
        (``engine.execute.FULL_SWEEP_S``, which catch what only the clock changes) the engine observes only these:
        with 200 pods in flight it observed all 200 on every event of any of them."""
        with self._lock:
            names, self._touched = self._touched, set()
            names |= self._uncreated
            informers = list(self._informers.values())
        for inf in informers:
            names |= inf.take_changed()
        return names

    def hold_run(self, run_id: str) -> None:
        """This process executes ``run_id``: hold its Lease, so ``cleanup`` elsewhere leaves it alone."""
        self._leases.hold(run_id)

    def node_architectures(self) -> list[str]:
        """The CPU architectures of the schedulable nodes matching ``node_selector`` (empty: not known), read now
        for the faithful check and kept in the abilities the provenance records (``node_arch.py``)."""
        got = node_arch.read(self.core, self.options)
        notes = [n for n in self.abilities.notes if not n.startswith("node architectures:")]
        if got.why:
            notes.append(f"node architectures: {got.why}")
        self.abilities = self.abilities.model_copy(update={"architectures": list(got.architectures), "notes": notes})
        return list(got.architectures)

    def check_fit(self, needs: Sequence[tuple[str, str, ResourceAmounts]], placement: str = "default") -> None:
        """Refuse a try whose pod no candidate node (``node_selector``) could ever hold, before the run.

        Under ``placement="limit-aware"`` also refuse when no candidate node advertises the extended
        resource, or a try's memory limit is more than any advertises (``fit.limit_refusal``).

        A caller that may not list nodes cannot check: the check is skipped, with a warning in the
        log and in the provenance (``fit_check``), never an error.
        """
        selector = ",".join(f"{k}={v}" for k, v in self.options.node_selector.items()) or None
        where = f"node matching {selector}" if selector else "node"
        try:
            nodes = self.core.list_node(label_selector=selector, _preload_content=False, _request_timeout=30)
            items = json.loads(nodes.data).get("items") or []  # type: ignore[attr-defined]  # _preload_content=False: the raw response
        except ApiException as exc:
            why = f"cannot list nodes ({exc.status} {exc.reason}): oversized requests were not checked"
            log.warning("kubernetes backend: %s", why)
            self._fit_check = {"checked": False, "why": why}
            return
        rooms = [fit.node_room(n) for n in items]
        if not rooms:
            self._fit_check = {"checked": False, "why": f"no {where} yet (an autoscaler may add one)"}
            return
        self._fit_check = {
            "checked": True,
            "candidate_nodes": len(rooms),
            "node_selector": selector,
            "largest_cpus": max(r.cpus for r in rooms),
            "largest_memory_bytes": max(r.memory_bytes for r in rooms),
        }
        if placement == "limit-aware":
            self._fit_check["largest_advertised_mib"] = max(
                (r.advertised_mib for r in rooms if r.advertised_mib is not None), default=None
            )
        problem = fit.refusal([fit.Need(*n) for n in needs], rooms, where)
        if problem is None and placement == "limit-aware":
            problem = fit.limit_refusal([fit.Need(*n) for n in needs], rooms, where)
        if problem:
            raise UserError(problem, field="resources")

    def cleanup(self, run_id: str | None = None, *, force: bool = False) -> CleanupReport:
        """Remove the pods and Secrets of one run (``run_id``), or of every dead run and the task ConfigMaps.

        ``run_id`` names the run deliberately (the controller does, for its own runs): its objects
        go whatever its state, as before. Without it, a run whose Lease is fresh is still executing
        somewhere and is left alone, and so are pods owned by the controller's Trials (the
        controller removes those itself); ``force`` removes them all the same. If the Leases
        cannot be read, nothing is removed without ``force``: a live run could not be told from a
        dead one.
        """
        report = CleanupReport()
        selector = "app.kubernetes.io/managed-by=headroom"
        if run_id:
            selector += f",{RUN_LABEL}={label_value(run_id)}"
        live: dict[str, str] = {}
        stale: list[str] = []
        guarded = run_id is None and not force
        if guarded:
            try:
                live, stale = runlease.live_runs(self.api_client, self.namespace, self.clock())
            except ApiException as exc:
                report.kept.append(
                    f"everything: the run Leases are not readable ({exc.status} {exc.reason}), so a "
                    "live run cannot be told from a dead one (--force removes anyway)"
                )
                return report
        elif run_id is None:  # --force: every run Lease goes with its run
            stale = self._run_lease_names(client.CoordinationV1Api(self.api_client))
        controller_owned: set[str] = set()
        skipped: dict[str, list[str]] = {}
        for p in self.core.list_namespaced_pod(self.namespace, label_selector=selector).items:
            meta = p.metadata
            assert meta is not None and meta.name is not None  # the server names every object it lists
            name = meta.name
            run_label = (meta.labels or {}).get(RUN_LABEL, "")
            if run_label in live:
                skipped.setdefault(run_label, []).append(f"pod/{name}")
                continue
            owners = [o for o in meta.owner_references or [] if o.api_version.startswith("headroom.dev/")]
            if owners and guarded:
                controller_owned.add(f"pod/{name}")
                continue
            try:
                self._release_finalizer(name, known=self.api_client.sanitize_for_serialization(p))
                self._delete(name)
                report.removed.append(f"pod/{name}")
            except ApiException as exc:
                report.kept.append(f"pod/{name}: {exc.status} {exc.reason}")
        for sec in self.core.list_namespaced_secret(self.namespace, label_selector=selector).items:
            meta = sec.metadata
            assert meta is not None and meta.name is not None  # the server names every object it lists
            run_label = (meta.labels or {}).get(RUN_LABEL, "")
            if run_label in live:
                skipped.setdefault(run_label, []).append(f"secret/{meta.name}")
                continue
            self.core.delete_namespaced_secret(meta.name, self.namespace)
            report.removed.append(f"secret/{meta.name}")
        for run_label, holder in sorted(live.items()):
            report.kept.append(
                f"run {run_label}: still executing (its Lease is renewed by {holder}); "
                f"left {len(skipped.get(run_label, []))} objects alone (--force removes them)"
            )
        if controller_owned:
            report.kept.append(
                f"{len(controller_owned)} pods owned by the controller's Trials: the controller "
                "removes them (--force removes them)"
            )
        if run_id is None:
            configmaps = self.core.list_namespaced_config_map(self.namespace, label_selector=selector).items
            if live or controller_owned:  # shared by content digest: a live run may still mount any of them
                if configmaps:
                    report.kept.append(f"{len(configmaps)} task ConfigMaps: shared with the runs still executing")
            else:
                for cm in configmaps:
                    meta = cm.metadata
                    assert meta is not None and meta.name is not None  # the server names every object it lists
                    self.core.delete_namespaced_config_map(meta.name, self.namespace)
                    report.removed.append(f"configmap/{meta.name}")
        coordination = client.CoordinationV1Api(self.api_client)
        for lease in stale:
            try:
                coordination.delete_namespaced_lease(lease, self.namespace)
                report.removed.append(f"lease/{lease}")
            except ApiException as exc:
                if exc.status != 404:
                    report.kept.append(f"lease/{lease}: {exc.status} {exc.reason}")
        return report

    def _run_lease_names(self, coordination: Any) -> list[str]:
        try:
            items = coordination.list_namespaced_lease(
                self.namespace, label_selector=f"app.kubernetes.io/managed-by=headroom,{runlease.KIND_LABEL}=run"
            ).items
        except ApiException:
            return []
        return [lease.metadata.name for lease in items]

    def canary_targets(self) -> list[str]:
        return self.nodes.canary_targets()

    def canary_skipped(self) -> list[dict[str, str]]:
        return self.nodes.canary_skipped()

    def facts(self) -> BackendFacts:
        cluster = cluster_facts.collect(self.api_client, self.options)
        cluster.fit_check = dict(self._fit_check)
        return BackendFacts(name=self.name, abilities=self.abilities, kubernetes=cluster)

    def request_report(self) -> dict[str, Any]:
        """API requests so far, by kind, and per harvested try."""
        total = self.requests.total
        return {
            "total": total,
            "by_kind": self.requests.snapshot(),
            "harvested": self.stats.harvested,
            "per_trial": total / self.stats.harvested if self.stats.harvested else None,
            "mean_latency_s": {k: v / self._latency["n"] for k, v in self._latency.items() if k != "n"}
            if self._latency["n"]
            else {},
            "informers": {k: v.stats() for k, v in self._informers.items()},
        }

    def threads(self) -> list[threading.Thread]:
        """Every thread this backend started (watches, lease renewal, API workers)."""
        with self._lock:
            infs = list(self._informers.values())
        out = [t for inf in infs for t in inf.threads()] + self.nodes.threads()
        if self._leases.thread is not None:
            out.append(self._leases.thread)
        return out + self._pool.threads()

    def close(self) -> None:
        """Stop everything at once: the watches end now, not at the server's watch timeout."""
        self._pool.shutdown(wait=True)
        with self._lock:
            agents = list(self._pod_agents)
        for name in agents:
            self._stop_pod_agent(name)
        try:
            self.sweep_harvested(force=True)
        finally:
            try:
                self.nodes.stop()
                with self._lock:
                    infs, self._informers = list(self._informers.values()), {}
                for inf in infs:
                    inf.stop()
                self._leases.close()
            finally:
                self.api_client.close()
