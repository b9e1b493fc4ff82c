"""The CPU architectures of the nodes a trial pod could land on, for the faithful check (engine/faithful.py).

A task built for another CPU (its Dockerfile's ``FROM --platform``, a compose service's ``platform``) runs on a
node of the wrong architecture as an ``exec format error``, scored as the model's failure. So before a run (the
CLI's sweep, the controller's plan) the nodes matching the experiment's ``node_selector`` are listed once, and
those a trial pod could be scheduled on (Ready, not cordoned, every NoSchedule/NoExecute taint tolerated, as the
canary chooses them: :func:`nodes.why_not`) give the architectures the run has. A node's architecture is its
``kubernetes.io/arch`` label (what a ``nodeSelector`` on the architecture matches), else its kubelet's
``status.nodeInfo.architecture``.

No architecture is known (nothing is refused) when nodes cannot be listed (a namespace-scoped user) or no node
is schedulable yet (an autoscaler may add one); ``why`` says which, for the provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from orchestrator.backends.kubernetes.nodes import why_not
from orchestrator.backends.kubernetes.pod import ARCH_LABEL
from orchestrator.kube.api import ApiException
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.tasks.needs import normalize_arch


@dataclass(frozen=True)
class NodeArchitectures:
    architectures: tuple[str, ...]  # sorted; empty: not known, so not checked
    schedulable: int  # nodes a trial pod could land on
    why: str | None = None  # why the architectures are not known


def node_architecture(node: dict[str, Any]) -> str | None:
    labels = (node.get("metadata") or {}).get("labels") or {}
    info = (node.get("status") or {}).get("nodeInfo") or {}
    raw = labels.get(ARCH_LABEL) or info.get("architecture")
    return normalize_arch(str(raw)) if raw else None


def of_nodes(nodes: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> NodeArchitectures:
    usable = [n for n in nodes if why_not(n, tolerations) is None]
    if not usable:
        why = f"no schedulable node among {len(nodes)}" if nodes else "no node yet (an autoscaler may add one)"
        return NodeArchitectures((), 0, why)
    found = {a for n in usable if (a := node_architecture(n))}
    if not found:
        return NodeArchitectures((), len(usable), "no schedulable node records its architecture")
    return NodeArchitectures(tuple(sorted(found)), len(usable))


def read(core: Any, options: KubernetesOptions) -> NodeArchitectures:
    """List the nodes matching ``options.node_selector`` once and keep those a trial pod could land on."""
    selector = ",".join(f"{k}={v}" for k, v in options.node_selector.items()) or None
    try:
        resp = core.list_node(label_selector=selector, _preload_content=False, _request_timeout=30)
        items = json.loads(resp.data).get("items") or []
    except ApiException as exc:
        return NodeArchitectures((), 0, f"nodes not readable ({exc.status} {exc.reason}): not checked")
    return of_nodes(items, list(options.tolerations))
