"""`headroom tasks push`, `submit` and `status` against the real API server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from orchestrator.controller import tasksets
from orchestrator.controller.resources import EXPERIMENT_PLURAL, GROUP, VERSION
from orchestrator.tasks.loader import load_tasks

from .controller_support import (  # noqa: F401  (crds: the fixture)
    crds,
    headroom,
    helm_install,
    service_account_kubeconfig,
)
from .plane import REPO, Cluster

pytestmark = [pytest.mark.cluster]


def test_tasks_push_is_content_addressed_and_loads_back(cluster: Cluster, crds: None, tmp_path: Path) -> None:
    ns = cluster.create_namespace(prefix="push")
    first = headroom(cluster, "tasks", "push", "tasks", "-n", ns)
    assert first.returncode == 0, first.stderr
    local = load_tasks(REPO / "tasks")
    name = tasksets.set_name(tasksets.set_digest(local))
    assert first.stdout.strip() == name
    assert f"{len(local)} tasks -> {len(local) + 1} ConfigMaps created, 0 already there" in first.stderr
    again = headroom(cluster, "tasks", "push", "tasks", "-n", ns)
    assert again.returncode == 0 and f"0 ConfigMaps created, {len(local) + 1} already there" in again.stderr
    cms = cluster.core.list_namespaced_config_map(ns, label_selector="headroom.dev/task-bundle").items
    assert len(cms) == len(local) and all(cm.immutable for cm in cms)
    # What the controller reads, with its own (ServiceAccount) credentials: identical tasks, same digests.
    r = helm_install(cluster, ns, "--set", "replicaCount=1", "--skip-crds", wait=False)
    assert r.returncode == 0, r.stderr
    from kubernetes import config

    sa_api = config.new_client_from_config(
        config_file=str(service_account_kubeconfig(cluster, ns, "headroom", tmp_path / "sa.kubeconfig"))
    )
    loaded = tasksets.load_set(client.CoreV1Api(sa_api), ns, name, tmp_path / "scratch")
    assert {t.id: t.digest for t in loaded} == {t.id: t.digest for t in local}
    assert {t.id: t.spec for t in loaded} == {t.id: t.spec for t in local}
    sub = tasksets.load_set(client.CoreV1Api(sa_api), ns, name, tmp_path / "scratch", ["word-*"])
    assert [t.id for t in sub] == ["word-index"]


def test_a_task_too_big_for_a_configmap_is_one_line(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace(prefix="big")
    root = tmp_path / "tasks"
    shutil.copytree(REPO / "tasks" / "word-index", root / "word-index")
    (root / "word-index" / "environment").mkdir(exist_ok=True)
    (root / "word-index" / "environment" / "blob.bin").write_bytes(bytes(range(256)) * 6000)  # 1.5 MB
    r = headroom(cluster, "tasks", "push", str(root), "-n", ns)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "ConfigMap, which holds at most" in r.stderr and "Traceback" not in r.stderr
    assert cluster.core.list_namespaced_config_map(ns, label_selector="headroom.dev/task-bundle").items == []


def test_submit_pushes_and_creates_and_status_reads(cluster: Cluster, crds: None) -> None:
    ns = cluster.create_namespace(prefix="sub")
    r = headroom(cluster, "cluster", "submit", "manifests/examples/experiment.yaml", "-n", ns)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "bundled-demo"
    exp = client.CustomObjectsApi(cluster.api_client).get_namespaced_custom_object(
        GROUP, VERSION, ns, EXPERIMENT_PLURAL, "bundled-demo"
    )
    rendered = yaml.safe_load((REPO / "manifests/examples/experiment-resource.yaml").read_text())
    assert exp["spec"] == rendered["spec"]  # the API server kept every field (nothing pruned or defaulted away)
    twice = headroom(cluster, "cluster", "submit", "manifests/examples/experiment.yaml", "-n", ns)
    assert twice.returncode == 2 and "already exists" in twice.stderr and "Traceback" not in twice.stderr
    listing = headroom(cluster, "cluster", "status", "-n", ns)
    assert listing.returncode == 0 and "bundled-demo" in listing.stdout
    one = headroom(cluster, "cluster", "status", "bundled-demo", "-n", ns)
    assert one.returncode == 0 and "bundled-demo" in one.stdout
    missing = headroom(cluster, "cluster", "status", "nope", "-n", ns)
    assert missing.returncode == 2 and "not found" in missing.stderr and "Traceback" not in missing.stderr


def test_submit_bad_spec_is_one_line(cluster: Cluster, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntasks_dir: " + str(REPO / "tasks") + "\nattempts: 0\n")
    r = headroom(cluster, "cluster", "submit", str(bad), "--dry-run")
    assert r.returncode == 2 and "attempts" in r.stderr and "Traceback" not in r.stderr
