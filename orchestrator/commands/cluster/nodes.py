"""``headroom cluster nodes advertise``: put the limit-aware placement resource on cluster nodes (an admin step).

Each selected node gets the extended resource ``headroom.dev/memory-limit-mib`` with its
allocatable memory in MiB, through a JSON patch of the node's status subresource (what
Kubernetes documents for node-level extended resources); ``--remove`` takes it off again.
A run with ``placement: limit-aware`` then has each trial pod request its memory limit of
that resource, so the scheduler never binds pods whose limits add up to more than a node's
memory. Patching ``nodes/status`` is a cluster-admin permission, not one of the controller's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from orchestrator.commands.console import out
from orchestrator.commands.options import kube_context_option, kubeconfig_option
from orchestrator.errors import UserError


def _selector(pairs: tuple[str, ...]) -> str | None:
    for p in pairs:
        key, eq, _ = p.partition("=")
        if not eq or not key:
            raise UserError(f"--selector takes key=value, got {p!r}", field="--selector")
    return ",".join(pairs) or None


def _api_error(exc: Any, what: str) -> UserError:
    hint = " (an admin step: it needs 'patch' on nodes/status)" if getattr(exc, "status", None) in (401, 403) else ""
    return UserError(f"cannot {what} ({exc.status} {exc.reason}){hint}", field="--kubeconfig")


@click.group("nodes")
def nodes() -> None:
    """Cluster nodes as headroom's limit-aware placement sees them."""


@nodes.command("advertise")
@click.option(
    "--selector",
    "-l",
    "selectors",
    multiple=True,
    metavar="KEY=VALUE",
    help="only nodes with this label (repeatable; default: every node)",
)
@click.option("--remove", is_flag=True, help="take the resource off the selected nodes instead")
@kubeconfig_option()
@kube_context_option()
def advertise(selectors: tuple[str, ...], remove: bool, kubeconfig: Path | None, kube_context: str | None) -> None:
    """Advertise headroom.dev/memory-limit-mib (= allocatable memory in MiB) on nodes, for --placement limit-aware."""
    from orchestrator.backends.kubernetes import limit_resource as lr
    from orchestrator.errors import KubeConfigError
    from orchestrator.kube.api import ApiException, client
    from orchestrator.kube.client import connect

    selector = _selector(selectors)
    try:
        core = client.CoreV1Api(connect(kubeconfig, kube_context))
    except KubeConfigError as exc:
        raise UserError(str(exc), field="--kubeconfig") from None
    try:
        listed = core.list_node(label_selector=selector, _preload_content=False, _request_timeout=30)
    except ApiException as exc:
        raise _api_error(exc, "list nodes") from None
    items: list[dict[str, Any]] = json.loads(listed.data).get("items") or []  # type: ignore[attr-defined]  # _preload_content=False: the raw response
    if not items:
        raise UserError(f"no node matches {selector}" if selector else "the cluster has no nodes", field="--selector")
    for node in sorted(items, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        if remove:
            patch = lr.remove_patch(node)
            done = f"{name}: removed {lr.RESOURCE}" if patch else f"{name}: had no {lr.RESOURCE}"
        else:
            mib = lr.memory_mib(node)
            patch = lr.advertise_patch(node, mib)
            done = f"{name}: {lr.RESOURCE}={mib} (allocatable memory {mib} MiB)"
        if patch:
            try:
                core.patch_node_status(name, patch, _content_type="application/json-patch+json")
            except ApiException as exc:
                raise _api_error(exc, f"patch the status of node {name}") from None
        out.print(done)
