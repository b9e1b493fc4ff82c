"""The chart and the CRDs on the real test control plane: helm lint/template/install, the
API server's own validation of the generated schemas, and the ServiceAccount's permissions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from orchestrator.controller.resources import EXPERIMENT_PLURAL, GROUP, TRIAL_PLURAL, VERSION

from .controller_support import CHART, SERVICE_ACCOUNT, can, helm_install
from .plane import REPO, Cluster, wait_for

pytestmark = [pytest.mark.cluster]

BUNDLE = REPO / "manifests" / "install.yaml"
BUNDLE_HEADER = "# Rendered by: helm template headroom helm/headroom --namespace headroom --include-crds\n"
EXAMPLE = REPO / "manifests" / "examples" / "experiment-resource.yaml"


def _template(cluster: Cluster, *args: str) -> Any:
    return cluster.helm("template", "headroom", str(CHART), "--namespace", "headroom", *args)


def test_helm_lint_is_clean(cluster: Cluster) -> None:
    for extra in (
        [],
        [
            "--set",
            "nodeProvenance.enabled=true",
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "trialNetworkPolicy.enabled=false",
            "--set",
            "replicaCount=1",
        ],
    ):
        r = cluster.helm("lint", "--strict", str(CHART), *extra)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "[WARNING]" not in r.stdout and "[ERROR]" not in r.stdout, r.stdout
        assert "1 chart(s) linted, 0 chart(s) failed" in r.stdout


def test_install_bundle_is_the_rendered_chart(cluster: Cluster) -> None:
    r = _template(cluster, "--include-crds")
    assert r.returncode == 0, r.stderr
    assert BUNDLE.read_text() == BUNDLE_HEADER + r.stdout, (
        "manifests/install.yaml is stale: helm template headroom helm/headroom --namespace headroom --include-crds"
    )


def test_values_schema_rejects_mistakes(cluster: Cluster) -> None:
    for bad in (["--set", "replicaCount=0"], ["--set", "controler.workers=2"], ["--set", "image.pullPolicy=Sometimes"]):
        r = _template(cluster, *bad)
        assert r.returncode != 0 and "values don't meet the specifications of the schema" in r.stderr, (bad, r.stderr)


def test_optional_objects_follow_their_values(cluster: Cluster) -> None:
    def kinds(*args: str) -> list[str]:
        r = _template(cluster, *args)
        assert r.returncode == 0, r.stderr
        return sorted(d["kind"] for d in yaml.safe_load_all(r.stdout) if d)

    default = kinds()
    assert default == sorted(
        ["ServiceAccount", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"]
    )
    assert "ClusterRole" not in default  # no cluster-wide read unless asked for
    full = kinds("--set", "nodeProvenance.enabled=true", "--set", "metrics.serviceMonitor.enabled=true")
    assert {"ClusterRole", "ClusterRoleBinding", "ServiceMonitor", "NetworkPolicy"} <= set(full)
    assert "NetworkPolicy" not in kinds("--set", "trialNetworkPolicy.enabled=false")
    cr = next(
        d
        for d in yaml.safe_load_all(_template(cluster, "--set", "nodeProvenance.enabled=true").stdout)
        if d and d["kind"] == "ClusterRole"
    )
    assert cr["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ]
    nodes_only = next(
        d
        for d in yaml.safe_load_all(
            _template(
                cluster, "--set", "nodeProvenance.enabled=true", "--set", "nodeProvenance.otherWorkloads=false"
            ).stdout
        )
        if d and d["kind"] == "ClusterRole"
    )
    assert nodes_only["rules"] == cr["rules"][:1]


@pytest.fixture(scope="module")
def installed(cluster: Cluster) -> str:
    """The chart installed (CRDs included) into a namespace that enforces Pod Security 'restricted'."""
    ns = cluster.create_namespace(prefix="hr", labels={"pod-security.kubernetes.io/enforce": "restricted"})
    r = helm_install(cluster, ns)
    assert r.returncode == 0, r.stdout + r.stderr
    return ns


def test_helm_install_runs_restricted_with_two_replicas(cluster: Cluster, installed: str) -> None:
    dep = cluster.apps.read_namespaced_deployment("headroom", installed)
    assert dep.status.available_replicas == 2
    pod_spec = dep.spec.template.spec
    c = pod_spec.containers[0]
    assert pod_spec.security_context.run_as_non_root is True
    assert c.security_context.read_only_root_filesystem is True
    assert c.security_context.allow_privilege_escalation is False
    assert "--leader-elect" in c.args
    pods = cluster.core.list_namespaced_pod(installed, label_selector="app.kubernetes.io/name=headroom").items
    assert len(pods) == 2  # admitted under Pod Security "restricted" (the namespace enforces it)
    assert cluster.core.read_namespaced_service("headroom-metrics", installed).spec.ports[0].port == 8080
    pdb = client.PolicyV1Api(cluster.api_client).read_namespaced_pod_disruption_budget("headroom", installed)
    assert pdb.spec.max_unavailable == 1


def _custom(cluster: Cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client)


def _example(name: str) -> dict[str, Any]:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"] = {"name": name}
    return body


def test_crds_are_established_and_validate(cluster: Cluster, installed: str) -> None:
    ext = client.ApiextensionsV1Api(cluster.api_client)
    for plural in (EXPERIMENT_PLURAL, TRIAL_PLURAL):
        crd = ext.read_custom_resource_definition(f"{plural}.{GROUP}")
        conds = {c.type: c.status for c in crd.status.conditions}
        assert conds.get("Established") == "True" and conds.get("NonStructuralSchema") is None, conds
    custom = _custom(cluster)
    bad = _example("bad")
    bad["spec"]["attempts"] = 0
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, installed, EXPERIMENT_PLURAL, bad)
    assert err.value.status == 422 and "spec.attempts" in err.value.body
    bad = _example("bad2")
    bad["spec"]["agent"]["kind"] = "wizard"
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, installed, EXPERIMENT_PLURAL, bad)
    assert err.value.status == 422 and "spec.agent.kind" in err.value.body
    good = _example("good")
    good["spec"]["tasks_dir"] = "/home/someone/tasks"  # a host path: pruned, never stored
    created = custom.create_namespaced_custom_object(GROUP, VERSION, installed, EXPERIMENT_PLURAL, good)
    assert "tasks_dir" not in created["spec"]
    assert created["spec"]["configurations"][2]["limit_multiplier"] is None  # null (unbounded) survives defaulting
    created["spec"]["attempts"] = 5
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(GROUP, VERSION, installed, EXPERIMENT_PLURAL, "good", created)
    assert err.value.status == 422 and "cannot change" in err.value.body


def test_status_subresource_and_printer_columns(cluster: Cluster, installed: str) -> None:
    custom = _custom(cluster)
    created = custom.create_namespaced_custom_object(GROUP, VERSION, installed, EXPERIMENT_PLURAL, _example("cols"))
    # A status sent with the main resource is ignored: only the status subresource writes it.
    created["status"] = {"phase": "Complete"}
    created["metadata"]["labels"] = {"x": "y"}
    after = custom.replace_namespaced_custom_object(GROUP, VERSION, installed, EXPERIMENT_PLURAL, "cols", created)
    assert "status" not in after
    after["status"] = {"phase": "Running", "progress": "3/90", "inFlight": 6, "infraErrors": "1x-strict=33% 1x/3x=0%"}
    custom.replace_namespaced_custom_object_status(GROUP, VERSION, installed, EXPERIMENT_PLURAL, "cols", after)
    resp = cluster.api_client.call_api(
        "GET",
        f"{cluster.api_client.configuration.host}/apis/{GROUP}/{VERSION}/namespaces/{installed}/"
        f"{EXPERIMENT_PLURAL}/cols",
        header_params={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"},
    )
    resp.read()
    table = json.loads(resp.data)
    cols = [c["name"] for c in table["columnDefinitions"]]
    assert cols == ["Name", "Phase", "Progress", "In-Flight", "Infra-Errors", "Age"]
    assert table["rows"][0]["cells"][1:5] == ["Running", "3/90", 6, "1x-strict=33% 1x/3x=0%"]


# ---- what the ServiceAccount may do (kubectl auth can-i --as=system:serviceaccount:NS:headroom) ----

ALLOWED = [
    ("list", "experiments", GROUP, ""),
    ("watch", "experiments", GROUP, ""),
    ("update", "experiments", GROUP, "status"),
    ("create", "trials", GROUP, ""),
    ("watch", "trials", GROUP, ""),
    ("update", "trials", GROUP, "status"),
    ("create", "pods", "", ""),
    ("delete", "pods", "", ""),
    ("patch", "pods", "", ""),
    ("watch", "pods", "", ""),
    ("deletecollection", "pods", "", ""),  # harvested pods go in one request per run (the backend's sweep)
    ("get", "pods", "", "log"),
    ("create", "events", "", ""),
    ("watch", "events", "", ""),
    ("get", "configmaps", "", ""),
    ("create", "configmaps", "", ""),
    ("list", "resourcequotas", "", ""),
    ("list", "limitranges", "", ""),
    ("create", "leases", "coordination.k8s.io", ""),
]
DENIED = [
    ("get", "secrets", "", ""),
    ("list", "secrets", "", ""),
    ("update", "experiments", GROUP, ""),
    ("delete", "experiments", GROUP, ""),
    ("create", "experiments", GROUP, ""),
    ("delete", "trials", GROUP, ""),
    ("update", "trials", GROUP, ""),
    ("update", "configmaps", "", ""),
    ("delete", "configmaps", "", ""),
    ("create", "networkpolicies", "networking.k8s.io", ""),
    ("create", "secrets", "", ""),
    ("create", "pods", "", "exec"),
    ("create", "rolebindings", "rbac.authorization.k8s.io", ""),
    ("create", "serviceaccounts", "", "token"),
    ("update", "deployments", "apps", ""),
]


def test_service_account_permission_matrix(cluster: Cluster, installed: str) -> None:
    user = f"system:serviceaccount:{installed}:{SERVICE_ACCOUNT}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{installed}", "system:authenticated"]
    other = cluster.create_namespace(prefix="other")
    matrix = []
    for verb, resource, group, sub in ALLOWED + DENIED:
        here = can(cluster, user, groups, installed, verb, resource, group, sub)
        there = can(cluster, user, groups, other, verb, resource, group, sub)
        matrix.append((f"{verb} {resource}{'/' + sub if sub else ''}", here, there))
    print("\nverb resource                 in release ns   in another ns")
    for row, here, there in matrix:
        print(f"{row:<32} {'yes' if here else 'no':<15} {'yes' if there else 'no'}")
    for (verb, resource, group, sub), (row, here, there) in zip(ALLOWED + DENIED, matrix):
        assert here is ((verb, resource, group, sub) in ALLOWED), row
        assert there is False, f"{row} allowed outside the release namespace"
    # The Lease: only the controller's own can be updated.
    assert can(cluster, user, groups, installed, "update", "leases", "coordination.k8s.io", name="headroom-controller")
    assert not can(cluster, user, groups, installed, "update", "leases", "coordination.k8s.io", name="someone-else")
    # No nodes unless nodeProvenance is on.
    assert not can(cluster, user, groups, None, "list", "nodes")


def test_node_provenance_grants_node_and_pod_reads_only(cluster: Cluster) -> None:
    ns = cluster.create_namespace(prefix="hrn")
    r = helm_install(
        cluster, ns, "--set", "nodeProvenance.enabled=true", "--set", "replicaCount=1", "--skip-crds", wait=False
    )
    assert r.returncode == 0, r.stderr
    user = f"system:serviceaccount:{ns}:{SERVICE_ACCOUNT}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
    wait_for(lambda: can(cluster, user, groups, None, "list", "nodes"), 30, "node read granted")
    assert not can(cluster, user, groups, None, "update", "nodes")
    # other workloads' limits on a trial's node: pods of every namespace may be listed, never changed
    assert can(cluster, user, groups, None, "list", "pods") and can(cluster, user, groups, None, "watch", "pods")
    assert not any(can(cluster, user, groups, None, verb, "pods") for verb in ("create", "delete", "patch"))
    r = cluster.helm(
        "upgrade",
        "headroom",
        str(CHART),
        "--namespace",
        ns,
        "--reuse-values",
        "--set",
        "nodeProvenance.otherWorkloads=false",
        "--skip-crds",
    )
    assert r.returncode == 0, r.stderr
    wait_for(lambda: not can(cluster, user, groups, None, "list", "pods"), 30, "pod read revoked")
    assert can(cluster, user, groups, None, "list", "nodes")
    r = cluster.helm("uninstall", "headroom", "--namespace", ns, "--wait")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: not can(cluster, user, groups, None, "list", "nodes"), 30, "node read revoked")


def test_bundle_parses(cluster: Cluster) -> None:
    docs = [d for d in yaml.safe_load_all(Path(BUNDLE).read_text()) if d]
    assert {d["kind"] for d in docs} >= {"CustomResourceDefinition", "Deployment", "Role", "RoleBinding"}
