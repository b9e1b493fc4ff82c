"""Refuse, before a run starts, a try whose pod no candidate node could ever hold.

A pod's request is its task container's request plus the warden's. A node is a candidate
when it matches the experiment's ``node_selector``; it can hold the pod when its allocatable
cpu and memory are both at least the pod's request. Such a try would otherwise sit
Unschedulable until its pending deadline, on every try. Taints and the other pods on a node
are not considered: a node that is merely busy now is not a reason to refuse.

Under limit-aware placement (``limit_resource.py``) a run is also refused when no candidate
node advertises the extended resource, and a try whose pod memory limit is more than every
candidate node advertises.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from orchestrator.backends.kubernetes import limit_resource
from orchestrator.backends.kubernetes.pod import WARDEN_RESOURCES
from orchestrator.kube.api import parse_quantity
from orchestrator.spec.resources import ResourceAmounts

GIB = 1024**3


@dataclass(frozen=True)
class Need:
    task_id: str
    config_label: str
    amounts: ResourceAmounts


@dataclass(frozen=True)
class NodeRoom:
    name: str
    cpus: float
    memory_bytes: int
    advertised_mib: int | None = None  # the limit-aware resource (limit_resource.RESOURCE), if advertised


def node_room(node: dict[str, Any]) -> NodeRoom:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return NodeRoom(
        name=(node.get("metadata") or {}).get("name", "?"),
        cpus=float(parse_quantity(alloc.get("cpu", "0"))),
        memory_bytes=int(parse_quantity(alloc.get("memory", "0"))),
        advertised_mib=limit_resource.advertised_mib(node),
    )


def pod_request(a: ResourceAmounts) -> tuple[float, int]:
    """cpu and memory the scheduler needs for the whole pod (task container + warden)."""
    cpu = Decimal(str(a.request_cpus)) + parse_quantity(WARDEN_RESOURCES["cpu"])
    mem = a.request_memory_bytes + int(parse_quantity(WARDEN_RESOURCES["memory"]))
    return float(cpu), mem


def _mem(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / 2**20:.0f} MiB"


def refusal(needs: Iterable[Need], nodes: list[NodeRoom], where: str) -> str | None:
    """One line naming the first try no node can hold (and how many more), or None when all fit."""
    if not nodes:
        return None
    bad: list[str] = []
    for need in needs:
        cpu, mem = pod_request(need.amounts)
        if any(n.cpus >= cpu and n.memory_bytes >= mem for n in nodes):
            continue
        big_mem = max(nodes, key=lambda n: n.memory_bytes)
        big_cpu = max(nodes, key=lambda n: n.cpus)
        if mem > big_mem.memory_bytes:
            why = (
                f"a memory request of {_mem(mem)} but the largest candidate node ({big_mem.name}) has "
                f"{_mem(big_mem.memory_bytes)} allocatable"
            )
        elif cpu > big_cpu.cpus:
            why = (
                f"a cpu request of {cpu:g} but the largest candidate node ({big_cpu.name}) has "
                f"{big_cpu.cpus:g} allocatable"
            )
        else:
            why = (
                f"{cpu:g} cpu and {_mem(mem)} memory requested but no candidate node has both "
                f"(largest: {big_cpu.name} {big_cpu.cpus:g} cpu, {big_mem.name} {_mem(big_mem.memory_bytes)})"
            )
        bad.append(f"task {need.task_id} ({need.config_label}) needs {why}")
    if not bad:
        return None
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"{bad[0]}{more}; no {where} can ever schedule it: lower the request or add a bigger node"


def limit_refusal(needs: Iterable[Need], nodes: list[NodeRoom], where: str) -> str | None:
    """Under limit-aware placement: one line when no candidate node advertises the resource, or a
    try's pod memory limit is more than any of them advertises; None when all can be placed."""
    if not nodes:
        return None
    advertised = [n for n in nodes if n.advertised_mib is not None]
    if not advertised:
        return (
            f"placement limit-aware: no {where} advertises {limit_resource.RESOURCE}; an admin runs "
            f"`{limit_resource.ADVERTISE_COMMAND}` first (see docs/resource-specs.md)"
        )
    largest = max(advertised, key=lambda n: n.advertised_mib or 0)
    bad: list[str] = []
    for need in needs:
        limit = need.amounts.limit_memory_bytes
        if limit is None:
            continue  # requests the largest advertised amount: runs alone on such a node
        mib = limit_resource.pod_limit_mib(limit)
        if mib > (largest.advertised_mib or 0):
            bad.append(
                f"task {need.task_id} ({need.config_label}) has a pod memory limit of {mib} MiB but the "
                f"largest {limit_resource.RESOURCE} advertised ({largest.name}) is {largest.advertised_mib}"
            )
    if not bad:
        return None
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"{bad[0]}{more}; placement limit-aware can never schedule it: lower the limit or add a bigger node"
