"""The one Kubernetes layer's pure parts: kubeconfig merging, request naming, finalizer patches.

Their behaviour against a real API server is covered by tests/cluster (every backend and
controller test goes through this layer; the foreign-finalizer test checks the release).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from orchestrator.errors import KubeConfigError
from orchestrator.kube import finalizers
from orchestrator.kube.client import configuration, current_namespace, kubeconfig_files
from orchestrator.kube.errors import Failure, classify
from orchestrator.kube.requests import describe


def _kubeconfig(
    path: Path, *, clusters: dict[str, str], contexts: dict[str, tuple[str, str]], current: str | None = None
) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in clusters.items()],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": n, "context": {"cluster": c, "user": "u", "namespace": ns}} for n, (c, ns) in contexts.items()
        ],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def test_every_kubeconfig_entry_is_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The current context is named in the first file, its cluster and context live in the second:
    # reading only the first file (split(":")[0]) cannot reach it.
    first = _kubeconfig(tmp_path / "a", clusters={}, contexts={}, current="team")
    second = _kubeconfig(tmp_path / "b", clusters={"c2": "https://127.0.0.1:6443"}, contexts={"team": ("c2", "ns-b")})
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    assert configuration().host == "https://127.0.0.1:6443"
    assert current_namespace() == "ns-b"
    # the same list given as --kubeconfig
    monkeypatch.delenv("KUBECONFIG")
    assert configuration(f"{first}:{second}").host == "https://127.0.0.1:6443"


def test_a_kubeconfig_that_names_nothing_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    with pytest.raises(KubeConfigError, match="kubeconfig not found"):
        configuration()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG")
    assert kubeconfig_files() is None  # then in-cluster, and outside a pod that fails in one line
    with pytest.raises(KubeConfigError, match="not in a pod"):
        configuration()


@pytest.mark.parametrize(
    ("method", "url", "want"),
    [
        ("GET", "https://h/api/v1/namespaces/ns/pods?watch=True&labelSelector=a", ("watch", "pods")),
        ("GET", "https://h/api/v1/namespaces/ns/pods?labelSelector=a", ("list", "pods")),
        ("GET", "https://h/api/v1/nodes", ("list", "nodes")),
        ("PATCH", "https://h/api/v1/namespaces/ns/pods/p1", ("patch", "pods")),
        ("GET", "https://h/api/v1/namespaces/ns/pods/p1/log", ("get", "pods/log")),
        ("DELETE", "https://h/api/v1/namespaces/ns/pods?labelSelector=x", ("deletecollection", "pods")),
        ("PUT", "https://h/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", ("update", "leases")),
        ("POST", "https://h/apis/headroom.dev/v1alpha1/namespaces/ns/trials", ("create", "trials")),
        ("GET", "https://h/version", ("get", "version")),
    ],
)
def test_requests_are_named_as_the_api_server_names_them(method: str, url: str, want: tuple[str, str]) -> None:
    assert describe(method, url) == want


def test_the_removal_patch_tests_the_position_it_removes() -> None:
    ours = "headroom.dev/harvest"
    assert finalizers.removal(["kueue.x-k8s.io/managed", ours], ours) == [
        {"op": "test", "path": "/metadata/finalizers/1", "value": ours},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    assert finalizers.removal(["kueue.x-k8s.io/managed"], ours) == []
    assert finalizers.removal(None, ours) == []


def test_a_stale_cache_rereads_and_removes_the_right_entry() -> None:
    ours = "headroom.dev/harvest"
    server = {"metadata": {"finalizers": ["kueue.x-k8s.io/managed", ours]}}  # another controller added one
    stale = {"metadata": {"finalizers": [ours]}}
    sent: list[list[dict[str, Any]]] = []

    def patch(ops: list[dict[str, Any]]) -> None:  # applies a JSON patch as the API server does
        sent.append(ops)
        fins = server["metadata"]["finalizers"]
        for op in ops:
            i = int(op["path"].rsplit("/", 1)[1])
            if op["op"] == "test" and (i >= len(fins) or fins[i] != op["value"]):
                raise ApiException(status=422, reason="Unprocessable Entity")
        for op in ops:
            if op["op"] == "remove":
                del fins[int(op["path"].rsplit("/", 1)[1])]

    assert finalizers.release(
        ours, lambda: {"metadata": {"finalizers": list(server["metadata"]["finalizers"])}}, patch, known=stale
    )
    assert server["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert len(sent) == 2  # the stale position was refused, then the re-read one applied


def test_error_mapping() -> None:
    assert classify(ApiException(status=429)) is Failure.THROTTLED
    quota = ApiException(status=403)
    quota.body = '{"message": "pods \\"x\\" is forbidden: exceeded quota: q"}'
    assert classify(quota) is Failure.THROTTLED
    uncounted = ApiException(status=403)
    uncounted.body = '{"message": "pods \\"x\\" is forbidden: status unknown for quota: q, resources: pods"}'
    assert classify(uncounted) is Failure.UNREACHABLE  # retried for api_retry_s, not refused at once
    assert classify(ApiException(status=403)) is Failure.REFUSED
    assert classify(ApiException(status=422)) is Failure.REFUSED
    assert classify(ApiException(status=409)) is Failure.CONFLICT
    assert classify(ApiException(status=503)) is Failure.UNREACHABLE
    assert classify(ConnectionRefusedError()) is Failure.UNREACHABLE
