"""Smoke tests proving the test control plane is a real Kubernetes API.

Validation, admission (PodSecurity), RBAC, service-account signing, the real scheduler
and controller-manager, helm, and the kwok Stages of the annotation contract
(docs/kubernetes-test-plane.md).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .plane import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CHART = Path(__file__).parent / "charts" / "trivial"


def _container_state(pod: Any) -> Any:
    statuses = pod.status.container_statuses or []
    return statuses[0].state if statuses else None


def _terminated(pod: Any) -> bool:
    st = _container_state(pod)
    return st is not None and st.terminated is not None


# ---- the API server validates and admits for real ------------------------------------


def test_limits_below_requests_rejected(cluster: Cluster, namespace: str) -> None:
    body = cluster.fake_pod(
        "bad-limits", requests={"cpu": "2", "memory": "1Gi"}, limits={"cpu": "1", "memory": "512Mi"}
    )
    with pytest.raises(ApiException) as err:
        cluster.core.create_namespaced_pod(namespace, body)
    assert err.value.status == 422
    assert "must be less than or equal to cpu limit" in err.value.body
    assert "must be less than or equal to memory limit" in err.value.body


def test_pod_security_restricted_enforced(cluster: Cluster) -> None:
    ns = cluster.create_namespace(prefix="psa", labels={"pod-security.kubernetes.io/enforce": "restricted"})
    bad = cluster.fake_pod("privileged", outcome="succeed")
    bad["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiException) as err:
        cluster.core.create_namespaced_pod(ns, bad)
    assert err.value.status == 403
    assert "violates PodSecurity" in err.value.body and "restricted" in err.value.body

    good = cluster.fake_pod("compliant", outcome="succeed")
    good["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    good["spec"]["containers"][0]["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    cluster.core.create_namespaced_pod(ns, good)  # admitted


def test_rbac_denies_default_service_account(cluster: Cluster, namespace: str) -> None:
    authz = client.AuthorizationV1Api(cluster.api_client)
    review = authz.create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{namespace}:default",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
                "resourceAttributes": {"namespace": namespace, "verb": "list", "resource": "secrets"},
            },
        }
    )
    assert review.status.allowed is False


def test_service_account_tokens_are_signed(cluster: Cluster, namespace: str) -> None:
    tr = cluster.core.create_namespaced_service_account_token(
        "default",
        namespace,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    token = tr.status.token
    assert token.count(".") == 2  # a JWT
    review = client.AuthenticationV1Api(cluster.api_client).create_token_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    )
    assert review.status.authenticated is True
    assert review.status.user.username == f"system:serviceaccount:{namespace}:default"


# ---- the real scheduler ----------------------------------------------------------------


def test_unschedulable_pod_gets_failed_scheduling(cluster: Cluster, namespace: str) -> None:
    body = cluster.fake_pod(
        "too-big", outcome="succeed", requests={"cpu": "1000", "memory": "1Ti"}, limits={"cpu": "1000", "memory": "1Ti"}
    )
    cluster.core.create_namespaced_pod(namespace, body)

    def failed_scheduling() -> list[Any]:
        return [e for e in cluster.events_for(namespace, "too-big") if e.reason == "FailedScheduling"]

    deadline = time.monotonic() + 30
    while not failed_scheduling() and time.monotonic() < deadline:
        time.sleep(0.25)
    events = failed_scheduling()
    assert events, "no FailedScheduling event"
    assert "Insufficient cpu" in events[0].message
    pod = cluster.core.read_namespaced_pod("too-big", namespace)
    assert pod.status.phase == "Pending" and not pod.spec.node_name
    sched = [c for c in pod.status.conditions or [] if c.type == "PodScheduled"]
    assert sched and sched[0].status == "False" and sched[0].reason == "Unschedulable"


def test_scheduler_places_pod_on_fake_node(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(
        namespace,
        cluster.fake_pod("runs", requests={"cpu": "500m", "memory": "256Mi"}, limits={"cpu": "1", "memory": "512Mi"}),
    )
    pod = cluster.wait_pod(namespace, "runs", lambda p: p.status.phase == "Running", what="Running")
    assert pod.spec.node_name in cluster.nodes
    time.sleep(2)  # no outcome annotation: it keeps running
    pod = cluster.core.read_namespaced_pod("runs", namespace)
    assert pod.status.phase == "Running"
    assert _container_state(pod).running is not None


# ---- kwok stages: the outcome annotation ---------------------------------------------


def test_outcome_succeed(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(namespace, cluster.fake_pod("ok", outcome="succeed"))
    pod = cluster.wait_pod(namespace, "ok", _terminated, what="terminated")
    term = _container_state(pod).terminated
    assert (pod.status.phase, term.reason, term.exit_code) == ("Succeeded", "Completed", 0)


def test_outcome_oom(cluster: Cluster, namespace: str) -> None:
    body = cluster.fake_pod("oom", outcome="oom", requests={"memory": "256Mi"}, limits={"memory": "256Mi"})
    cluster.core.create_namespaced_pod(namespace, body)
    pod = cluster.wait_pod(namespace, "oom", _terminated, what="terminated")
    term = _container_state(pod).terminated
    assert (pod.status.phase, term.reason, term.exit_code) == ("Failed", "OOMKilled", 137)


@pytest.mark.parametrize("code", [3, 124])
def test_outcome_exit_code(cluster: Cluster, namespace: str, code: int) -> None:
    cluster.core.create_namespaced_pod(
        namespace,
        cluster.fake_pod("exits", outcome=f"exit:{code}", annotations={"headroom.test/message": "verifier failed"}),
    )
    pod = cluster.wait_pod(namespace, "exits", _terminated, what="terminated")
    term = _container_state(pod).terminated
    assert (pod.status.phase, term.reason, term.exit_code) == ("Failed", "Error", code)
    assert term.message == "verifier failed"


def test_outcome_evict(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(namespace, cluster.fake_pod("evicted", outcome="evict"))
    pod = cluster.wait_pod(namespace, "evicted", lambda p: p.status.phase == "Failed", what="Failed")
    assert pod.status.reason == "Evicted"
    assert "low on resource" in pod.status.message
    conds = {c.type: c for c in pod.status.conditions or []}
    assert conds["DisruptionTarget"].status == "True"
    assert conds["DisruptionTarget"].reason == "TerminationByKubelet"
    assert _container_state(pod).terminated.exit_code == 137
    assert any(e.reason == "Evicted" for e in cluster.events_for(namespace, "evicted"))


def test_outcome_imagepull(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(
        namespace, cluster.fake_pod("nopull", outcome="imagepull", image="registry.example/missing:1")
    )

    def backoff(p: Any) -> bool:
        st = _container_state(p)
        return st is not None and st.waiting is not None and st.waiting.reason == "ImagePullBackOff"

    pod = cluster.wait_pod(namespace, "nopull", backoff, what="ImagePullBackOff")
    assert pod.status.phase == "Pending"
    assert "registry.example/missing:1" in _container_state(pod).waiting.message
    time.sleep(2)  # and it stays there
    pod = cluster.core.read_namespaced_pod("nopull", namespace)
    assert pod.status.phase == "Pending" and backoff(pod)


def test_outcome_after_delays_the_end(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(
        namespace, cluster.fake_pod("slow", outcome="oom", annotations={"headroom.test/outcome-after": "4s"})
    )
    t0 = time.monotonic()
    cluster.wait_pod(namespace, "slow", lambda p: p.status.phase == "Running", what="Running")
    cluster.wait_pod(namespace, "slow", _terminated, what="terminated")
    assert time.monotonic() - t0 >= 3.0


def test_controller_manager_runs_jobs(cluster: Cluster, namespace: str) -> None:
    batch = client.BatchV1Api(cluster.api_client)
    pod_template = cluster.fake_pod("unused")
    batch.create_namespaced_job(
        namespace,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "job"},
            "spec": {"backoffLimit": 0, "template": {"spec": pod_template["spec"]}},
        },
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = batch.read_namespaced_job("job", namespace)
        if job.status.succeeded:
            break
        time.sleep(0.5)
    assert job.status.succeeded == 1, job.status


# ---- helm -----------------------------------------------------------------------------


def test_helm_template(cluster: Cluster) -> None:
    r = cluster.helm("template", "smoke", str(CHART), "--set", "message=templated")
    assert r.returncode == 0, r.stderr
    assert "kind: Deployment" in r.stdout and "name: smoke-app" in r.stdout
    assert "templated" in r.stdout


def test_helm_install(cluster: Cluster, namespace: str) -> None:
    r = cluster.helm("install", "smoke", str(CHART), "--namespace", namespace, "--wait", "--timeout", "90s")
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    dep = cluster.apps.read_namespaced_deployment("smoke-app", namespace)
    assert dep.status.available_replicas == 1
    cm = cluster.core.read_namespaced_config_map("smoke-config", namespace)
    assert cm.data["message"] == "hello from headroom"
    r = cluster.helm("list", "--namespace", namespace, "--short")
    assert r.stdout.split() == ["smoke"]
    r = cluster.helm("uninstall", "smoke", "--namespace", namespace, "--wait")
    assert r.returncode == 0, r.stderr
