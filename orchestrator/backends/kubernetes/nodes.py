"""The nodes of a cluster run: where the enforcement canary runs, and what each try ran beside on its node.

Both come from one LIST+WATCH on the nodes matching the run's ``node_selector``
(started on first use, shared by every run of the backend) and from the run
informer's pod cache: nothing here reads a pod or a node on its own.

* **Canary targets** (:meth:`Nodes.canary_targets`): the nodes a trial pod could
  land on -- matching ``node_selector``, Ready, not cordoned, every NoSchedule /
  NoExecute taint tolerated by ``tolerations``. At most ``canary_max_nodes`` are
  checked: first one node of each distinct (kernel, container runtime, kubelet,
  instance type) -- a limit that does not bite is a property of how a node is set
  up, so a new setup is worth more than a second node of a known one -- then the
  rest by name. Every node left out is kept with its reason
  (:meth:`Nodes.canary_skipped`). A canary try carries ``headroom.dev/canary-node``;
  :meth:`Nodes.pinning` turns it into a required node affinity on ``metadata.name``
  (what DaemonSets use), so the scheduler still checks taints and resources.
* **Overcommit per try** (:meth:`Nodes.pod_seen`, :meth:`Nodes.overcommit`): the
  first time the informer sees a pod bound to a node, the memory limits of every
  pod alive on that node then are summed -- the run's own from its informer, every
  other workload's from one cluster-wide watch (``node_pods.py``) -- and compared
  with the node's allocatable memory; the node's MemoryPressure condition is read
  at the same moment. A user who may not list pods cluster-wide gets the run's own
  pods counted, and ``limits_counted`` says so in every record. ``placement`` is
  ``limit-aware`` for a pod that holds the extended resource of ``limit_resource.py``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from orchestrator.backends.kubernetes import limit_resource
from orchestrator.backends.kubernetes.node_pods import NodePods, alive, container_limit
from orchestrator.backends.kubernetes.runlease import RUN_LABEL
from orchestrator.kube.api import ApiException, parse_quantity
from orchestrator.kube.watch import ListWatch, stop_all
from orchestrator.spec.evidence import Overcommit
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import Launch
from orchestrator.spec.names import CANARY_NODE_LABEL, label_value

log = logging.getLogger(__name__)

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
SYNC_TIMEOUT_S = 30.0
MAX_PLACEMENTS = 50_000
ALL_COUNTED = "every pod on the node (containers without a memory limit add nothing, as in kubectl describe node)"
RUN_ONLY = "this run's pods only: other workloads not readable ({why})"

PodHook = Callable[[Launch, dict[str, Any]], dict[str, Any]]


def tolerates(tolerations: Iterable[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Kubernetes' matching of one taint against a pod's tolerations."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t["key"] != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _condition(node: dict[str, Any], kind: str) -> bool | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return {"True": True, "False": False}.get(c.get("status"))
    return None


def _setup(node: dict[str, Any]) -> tuple[str, ...]:
    """What decides whether limits bite on a node: its kernel, runtime, kubelet and machine type."""
    info = (node.get("status") or {}).get("nodeInfo") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    return (
        info.get("kernelVersion", ""),
        info.get("containerRuntimeVersion", ""),
        info.get("kubeletVersion", ""),
        labels.get("node.kubernetes.io/instance-type", ""),
    )


def why_not(node: dict[str, Any], tolerations: list[dict[str, Any]]) -> str | None:
    """Why a trial pod could not land on this node, or None if it could."""
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned (unschedulable)"
    if _condition(node, "Ready") is not True:
        return "not Ready"
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, taint):
            return f"taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')} not tolerated"
    return None


def choose(
    nodes: list[dict[str, Any]], tolerations: list[dict[str, Any]], cap: int
) -> tuple[list[str], list[dict[str, str]]]:
    """(nodes to check, [{target, reason}] left out); one node of each setup first, then by name."""
    usable: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        reason = why_not(node, tolerations)
        if reason:
            skipped.append({"target": node["metadata"]["name"], "reason": reason})
        else:
            usable.append(node)
    first: dict[tuple[str, ...], dict[str, Any]] = {}
    for n in usable:
        first.setdefault(_setup(n), n)
    ordered = list(first.values()) + [n for n in usable if all(n is not f for f in first.values())]
    chosen = ordered[:cap]
    checked_setups = {_setup(n) for n in chosen}
    for n in ordered[cap:]:
        same = (
            " (same kernel, runtime, kubelet and instance type as a checked node)"
            if _setup(n) in checked_setups
            else ""
        )
        skipped.append({"target": n["metadata"]["name"], "reason": f"over canary_max_nodes={cap}{same}"})
    return [n["metadata"]["name"] for n in chosen], skipped


def pin(body: dict[str, Any], node: str) -> dict[str, Any]:
    """Require the pod to run on ``node`` (through the scheduler, not ``nodeName``: taints still apply)."""
    body["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            }
        }
    }
    return body


def memory_limit(pod: dict[str, Any]) -> int | None:
    """The pod's memory limit (all its containers), or None when a container has none."""
    limits = [container_limit(c) for c in (pod.get("spec") or {}).get("containers") or []]
    return None if any(lim is None for lim in limits) else sum(lim or 0 for lim in limits)


class Nodes:
    """The node cache of one backend, the canary's node choice, and each pod's node at scheduling time."""

    def __init__(self, core: Any, options: KubernetesOptions) -> None:
        self.core, self.options = core, options
        self._lock = threading.Lock()
        self._nodes: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._stream: ListWatch | None = None
        self._by_label: dict[str, str] = {}
        self._skipped: list[dict[str, str]] = []
        self._placements: dict[str, dict[str, Any]] = {}
        self._placements_lock = threading.Lock()  # the informers of several runs feed it
        self.forbidden: str | None = None  # set when this user may not list nodes: the watch then stops
        self.pods = NodePods(core)  # the other workloads on each node

    # -- the node cache ----------------------------------------------------------------
    def _listed(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self._nodes = {n["metadata"]["name"]: n for n in items}

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self._nodes.pop(obj["metadata"]["name"], None)
            else:
                self._nodes[obj["metadata"]["name"]] = obj

    def _list_nodes(self, **kwargs: Any) -> Any:
        try:
            return self.core.list_node(**kwargs)
        except ApiException as exc:
            if exc.status in (401, 403):  # not a passing failure: retrying would only repeat the refusal
                self.forbidden = f"{exc.status} {exc.reason}"
                self._stop.set()
            raise

    def start(self, wait: bool = True) -> bool:
        """Start the node watch once; with ``wait``, False when nodes cannot be read (a namespace-scoped user)."""
        with self._lock:
            if self._stream is None:
                selector = ",".join(f"{k}={v}" for k, v in self.options.node_selector.items())
                self._stream = ListWatch(
                    "nodes",
                    self._list_nodes,
                    {"label_selector": selector} if selector else {},
                    on_list=self._listed,
                    on_event=self._event,
                    stop=self._stop,
                )
                self._stream.thread.start()
                self.pods.start()
            stream = self._stream
        if not wait:
            return stream.synced.is_set()
        for _ in range(int(SYNC_TIMEOUT_S / 0.1)):
            if stream.synced.wait(0.1) or self.forbidden:
                break
        return stream.synced.is_set()

    def node(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._nodes.get(name)

    def largest_advertised(self) -> int | None:
        """The largest amount of the limit-aware resource a node matching ``node_selector`` advertises."""
        with self._lock:
            amounts = [limit_resource.advertised_mib(n) for n in self._nodes.values()]
        return max((a for a in amounts if a is not None), default=None)

    def stop(self, join_s: float = 10.0) -> None:
        stop_all([s for s in (self._stream, self.pods.stream) if s is not None], join_s)

    def threads(self) -> list[threading.Thread]:
        return ([self._stream.thread] if self._stream is not None else []) + self.pods.threads()

    # -- the enforcement canary ---------------------------------------------------------
    def canary_targets(self) -> list[str]:
        if not self.start():
            error = self.forbidden or (self._stream.last_error if self._stream else None)
            self._skipped = [{"target": "*", "reason": f"nodes not readable ({error})"}]
            return []
        with self._lock:
            nodes = list(self._nodes.values())
        chosen, self._skipped = choose(nodes, list(self.options.tolerations), self.options.canary_max_nodes)
        self._by_label.update({label_value(n): n for n in chosen})
        return chosen

    def canary_skipped(self) -> list[dict[str, str]]:
        return list(self._skipped)

    def pinning(self, hook: PodHook | None) -> PodHook | None:
        """The backend's pod hook with canary tries pinned to their node first."""

        def apply(launch: Launch, body: dict[str, Any]) -> dict[str, Any]:
            node = self._by_label.get(launch.labels.get(CANARY_NODE_LABEL, ""))
            if node is not None:
                body = pin(body, node)
            return hook(launch, body) if hook else body

        return apply

    # -- overcommit per try ---------------------------------------------------------------
    def pod_seen(self, name: str, pod: dict[str, Any], pods: dict[str, dict[str, Any]]) -> None:
        """Called by the run informer (under its lock) for every pod it sees; records the first binding."""
        with self._placements_lock:
            self._record(name, pod, pods)

    def _record(self, name: str, pod: dict[str, Any], pods: dict[str, dict[str, Any]]) -> None:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or name in self._placements or not alive(pod):
            return  # not bound yet, already recorded, or ended (a harvested pod's last events, a relist)
        beside = [
            p for n, p in pods.items() if n != name and alive(p) and (p.get("spec") or {}).get("nodeName") == node_name
        ]
        limits = [memory_limit(p) for p in beside]
        own = memory_limit(pod)
        total = (own or 0) + sum(lim or 0 for lim in limits)
        placement = "limit-aware" if limit_resource.held_mib(pod) is not None else "default"
        run = ((pod.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL, "")
        record = {
            "scope": "node",
            "node": node_name,
            "placement": placement,
            "concurrent_limit_bytes_max": total,
            "concurrent_tries_max": 1 + len(beside),
            "unbounded_in_flight": any(lim is None for lim in limits),
            "_run": run,
            "_run_limit_bytes": total,
        }
        self._placements[name] = self._with_others(self._with_node(record, "scheduling"), "scheduling")
        while len(self._placements) > MAX_PLACEMENTS:  # records of cancelled tries are never read
            self._placements.pop(next(iter(self._placements)))

    def _with_node(self, record: dict[str, Any], when: str) -> dict[str, Any]:
        node = self.node(record["node"])
        if node is None:
            record.update(capacity_bytes=None, ratio_max=None, node_memory_pressure=None)
            return record
        alloc = ((node.get("status") or {}).get("allocatable") or {}).get("memory")
        capacity = int(parse_quantity(alloc)) if alloc else None
        record.update(
            capacity_bytes=capacity,
            node_memory_pressure=_condition(node, "MemoryPressure"),
            ratio_max=record["concurrent_limit_bytes_max"] / capacity if capacity else None,
            node_read_at=when,
        )
        return record

    def _with_others(self, record: dict[str, Any], when: str) -> dict[str, Any]:
        """Add the other workloads on the node, once the cluster-wide pod watch has them (else left for later)."""
        if self.pods.forbidden is not None:
            record.update(
                limits_counted=RUN_ONLY.format(why=f"pods cluster-wide: {self.pods.forbidden}"),
                other_pods=None,
                other_limit_bytes=None,
                other_pods_without_limit=None,
            )
        elif self.pods.synced:
            others = self.pods.beside(record["node"], record["_run"])
            total = record["_run_limit_bytes"] + others.limit_bytes
            record.update(
                limits_counted=ALL_COUNTED,
                others_read_at=when,
                other_pods=others.pods,
                other_limit_bytes=others.limit_bytes,
                other_pods_without_limit=others.without_limit,
                concurrent_limit_bytes_max=total,
                ratio_max=total / record["capacity_bytes"] if record.get("capacity_bytes") else None,
            )
        return record

    def overcommit(self, name: str) -> Overcommit | None:
        """The record of a harvested try (taken out: each is read once).

        The node and pod watches start with the run's first informer; a pod bound before
        their lists arrived gets the node's allocatable and condition, and the other
        workloads, as of its harvest (``node_read_at`` and ``others_read_at`` say which).
        """
        with self._placements_lock:
            record = self._placements.pop(name, None)
        if record is None:
            return None
        if record.get("node_read_at") is None:
            record = self._with_node(record, "harvest")
        if record.get("limits_counted") is None:
            record = self._with_others(record, "harvest")
        if record.get("limits_counted") is None:  # the pod watch never listed (the API refused or failed)
            why = self.pods.last_error or "the cluster-wide pod watch had not listed yet"
            record.update(
                limits_counted=RUN_ONLY.format(why=why),
                other_pods=None,
                other_limit_bytes=None,
                other_pods_without_limit=None,
            )
        record.pop("_run", None)
        record.pop("_run_limit_bytes", None)
        return Overcommit.model_validate(record)
