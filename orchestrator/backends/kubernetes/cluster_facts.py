"""Cluster provenance: server version, candidate nodes, runtime class, the namespace's quota and limits.

Recorded once when a run starts. A namespace-scoped user may not read nodes or
runtime classes; that is recorded as such, never an error.
"""

from __future__ import annotations

from typing import Any

from orchestrator.backends.kubernetes.node_pods import FIELD_SELECTOR
from orchestrator.kube.api import ApiException, client
from orchestrator.spec.backend import ClusterFacts, NodeFacts
from orchestrator.spec.kubernetes import KubernetesOptions

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
MAX_NODES = 200


def node_facts(node: Any) -> NodeFacts:
    info = node.status.node_info
    labels = node.metadata.labels or {}
    return NodeFacts(
        name=node.metadata.name,
        kubelet_version=info.kubelet_version if info else None,
        kernel=info.kernel_version if info else None,
        container_runtime=info.container_runtime_version if info else None,
        os_image=info.os_image if info else None,
        architecture=info.architecture if info else None,
        instance_type=next((labels[k] for k in INSTANCE_LABELS if k in labels), None),
        zone=next((labels[k] for k in ZONE_LABELS if k in labels), None),
        allocatable=dict(node.status.allocatable or {}),
    )


def _forbidden(exc: ApiException) -> str:
    return f"not readable ({exc.status} {exc.reason})"


def collect(api_client: Any, options: KubernetesOptions) -> ClusterFacts:
    core = client.CoreV1Api(api_client)
    out: dict[str, Any] = {"namespace": options.namespace, "options": options.model_dump(mode="json")}
    try:
        v = client.VersionApi(api_client).get_code()
        out["server_version"] = {"git_version": v.git_version, "platform": v.platform}
    except ApiException as exc:
        out["server_version"] = _forbidden(exc)
    selector = ",".join(f"{k}={v}" for k, v in options.node_selector.items()) or None
    try:
        nodes = core.list_node(label_selector=selector, limit=MAX_NODES).items
        out["nodes"] = [node_facts(n) for n in nodes]
    except ApiException as exc:
        out["nodes"] = _forbidden(exc)
    try:  # whether each trial's overcommit record can count the other workloads on its node (node_pods.py)
        core.list_pod_for_all_namespaces(
            limit=1, field_selector=FIELD_SELECTOR, _preload_content=False, _request_timeout=30
        )
        out["other_workloads"] = "counted"
    except ApiException as exc:
        out["other_workloads"] = _forbidden(exc)
    out["runtime_class"] = options.runtime_class_name
    if options.runtime_class_name:
        try:
            rc = client.NodeV1Api(api_client).read_runtime_class(options.runtime_class_name)
            out["runtime_class_handler"] = rc.handler
        except ApiException as exc:
            out["runtime_class_handler"] = _forbidden(exc)
    try:
        out["resource_quotas"] = [
            {"name": q.metadata.name, "hard": dict(q.spec.hard or {})}  # type: ignore[union-attr]  # listed objects always carry metadata and spec
            for q in core.list_namespaced_resource_quota(options.namespace).items
        ]
    except ApiException as exc:
        out["resource_quotas"] = _forbidden(exc)
    try:
        out["limit_ranges"] = [
            {
                # listed objects always carry metadata and spec
                "name": lr.metadata.name,  # type: ignore[union-attr]
                "limits": [api_client.sanitize_for_serialization(i) for i in lr.spec.limits or []],  # type: ignore[union-attr]
            }
            for lr in core.list_namespaced_limit_range(options.namespace).items
        ]
    except ApiException as exc:
        out["limit_ranges"] = _forbidden(exc)
    try:
        ns = core.read_namespace(options.namespace)
        labels: dict[str, str] | str = {
            k: v
            for k, v in (ns.metadata.labels or {}).items()  # type: ignore[union-attr]  # a read namespace has metadata
            if k.startswith("pod-security.kubernetes.io/")
        }
    except ApiException as exc:
        labels = _forbidden(exc)
    out["pod_security"] = {
        "profile": "baseline" if options.run_as_root else "restricted",
        "run_as_root": options.run_as_root,
        "namespace_labels": labels,
    }
    return ClusterFacts.model_validate(out)
