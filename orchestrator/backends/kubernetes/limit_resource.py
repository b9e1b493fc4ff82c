"""Limit-aware placement in a cluster: an extended resource that counts memory limits.

A kube-scheduler places pods by their requests, so a node's memory limits can add up
to far more than it has, and the node-pressure evictions that follow grow with the
limit multiplier -- the very effect a sweep measures. With ``placement: limit-aware``
every trial pod's task container also requests (and, as extended resources need,
limits) :data:`RESOURCE`: the pod's whole memory limit (task container + warden) in
MiB, rounded up. An admin advertises the resource on nodes (``headroom nodes
advertise``) with each node's allocatable memory in MiB, the way Kubernetes documents
for node-level extended resources. The real scheduler then never binds pods whose
limits add up to more than a node's allocatable memory.

A try without a memory limit requests the largest amount advertised among the candidate
nodes: it runs alone on such a node (and waits for a free one).
"""

from __future__ import annotations

import math
from typing import Any

from orchestrator.backends.kubernetes.pod import WARDEN_RESOURCES
from orchestrator.kube.api import parse_quantity

RESOURCE = "headroom.dev/memory-limit-mib"
#: The resource name as a JSON-pointer segment ("/" escaped as "~1").
POINTER = RESOURCE.replace("~", "~0").replace("/", "~1")
MIB = 2**20
ADVERTISE_COMMAND = "headroom cluster nodes advertise"


def pod_limit_mib(task_limit_bytes: int) -> int:
    """What a bounded try holds: its pod's memory limit (task container + warden) in MiB, rounded up."""
    return math.ceil((task_limit_bytes + int(parse_quantity(WARDEN_RESOURCES["memory"]))) / MIB)


def advertised_mib(node: dict[str, Any]) -> int | None:
    """The node's allocatable amount of the resource (what the scheduler counts), or None when not advertised."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(RESOURCE)
    return None if value is None else int(parse_quantity(value))


def memory_mib(node: dict[str, Any]) -> int:
    """The node's allocatable memory in whole MiB: what ``advertise`` puts on it."""
    alloc = ((node.get("status") or {}).get("allocatable") or {}).get("memory", "0")
    return int(parse_quantity(alloc)) // MIB


def advertise_patch(node: dict[str, Any], mib: int) -> list[dict[str, Any]]:
    """JSON patch for the node's status subresource: the resource in capacity and allocatable.

    A kubelet derives allocatable from capacity itself; a node without one (a virtual or
    simulated node) keeps what is written, so both are set.
    """
    status = node.get("status") or {}
    ops: list[dict[str, Any]] = []
    for part in ("capacity", "allocatable"):
        if part not in status:
            ops.append({"op": "add", "path": f"/status/{part}", "value": {}})
        ops.append({"op": "add", "path": f"/status/{part}/{POINTER}", "value": str(mib)})
    return ops


def remove_patch(node: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON patch taking the resource off again (only where it is: a JSON-patch remove of nothing fails)."""
    status = node.get("status") or {}
    return [
        {"op": "remove", "path": f"/status/{part}/{POINTER}"}
        for part in ("capacity", "allocatable")
        if RESOURCE in (status.get(part) or {})
    ]


def held_mib(pod: dict[str, Any]) -> int | None:
    """How much of the resource a pod holds (its containers' requests), or None when it holds none."""
    held = [
        ((c.get("resources") or {}).get("requests") or {}).get(RESOURCE)
        for c in (pod.get("spec") or {}).get("containers") or []
    ]
    amounts = [int(parse_quantity(v)) for v in held if v is not None]
    return sum(amounts) if amounts else None
