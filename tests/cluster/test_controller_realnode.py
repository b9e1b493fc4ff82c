"""The chart's controller Deployment, from an image built here, running on the real node.

No registry: the controller image is built from helm/Dockerfile by the session's private
dockerd on the local Debian base image (``--build-arg BASE_IMAGE``), with the dependencies
from the cached wheelhouse of scripts/images/wheelhouse.sh, saved under the cache folder by
the digest of its inputs (tests/cluster/controller_image.py: unchanged inputs skip the
build), and imported into the real node's containerd (``RealNode.import_image``). ``helm install`` runs the chart with
that image (pullPolicy Never) on the real node under Pod Security "restricted"; the
controller uses its in-cluster config, the ``kubernetes`` Service's ClusterIP, which
``RealNode.expose_api_service`` routes to the test plane (the plane has no kube-proxy).

The kubelet cannot reach pod IPs from the host's network namespace (the node's pods live
behind containerd's), so the chart's HTTP probes are replaced by exec probes that fetch the
same /healthz from inside the container, and the test scrapes /metrics from inside the
node's network namespace.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from orchestrator.controller.resources import EXPERIMENT_PLURAL, GROUP, TRIAL_PLURAL, VERSION
from tests.docker.fixtures import DockerEnv

from .conftest import RealNodeHandle, bundled_tasks_at
from .controller_image import IMAGE_REPO, IMAGE_TAG, ControllerImage, controller_image
from .controller_support import CHART, RELEASE, crds, headroom  # noqa: F401
from .plane import Cluster, wait_for
from .realnode import REAL_NODE_LABEL, REAL_NODE_TOLERATION, RealNode

# The image build (a pip install of ~190 MB of wheels) and its import take minutes on 2 cores.
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.realnode,
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
]

TASKS = ["bundle-digest", "word-index", "csv-report"]
CONFIGS = ["1x-strict", "unbounded"]
ATTEMPTS = 1  # seed 7: attempt 0 of bundle-digest and word-index overruns 1x
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
EXEC_HEALTHZ = [
    "python",
    "-c",
    "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=3)",
]


def values_file(tmp_path: Path) -> Path:
    # httpGet: null drops the chart's default handler (helm deletes keys set to null)
    exec_probe = {"httpGet": None, "exec": {"command": EXEC_HEALTHZ}, "timeoutSeconds": 5}
    path = tmp_path / "values.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "image": {"repository": IMAGE_REPO, "tag": IMAGE_TAG, "pullPolicy": "Never"},
                "replicaCount": 1,
                "nodeSelector": {REAL_NODE_LABEL: "true"},
                "tolerations": [REAL_NODE_TOLERATION],
                "livenessProbe": {**exec_probe, "initialDelaySeconds": 20, "periodSeconds": 10},
                "readinessProbe": {**exec_probe, "periodSeconds": 5},
                "controller": {"resyncSeconds": 5},
            }
        )
    )
    return path


def experiment_file(tmp_path: Path, image: str) -> Path:
    path = tmp_path / "experiment.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "realnode",
                # the bundled tasks at half a CPU: three trial pods fit beside the controller's (at 1 CPU, one did)
                "tasks_dir": str(bundled_tasks_at(tmp_path / "tasks")),
                "tasks": TASKS,
                "configurations": CONFIGS,
                "attempts": ATTEMPTS,
                "concurrency": 3,
                "seed": 7,
                "agent": {"kind": "oracle"},
                "image": image,
                "kubernetes": {
                    "node_selector": {REAL_NODE_LABEL: "true"},
                    "tolerations": [REAL_NODE_TOLERATION],
                    "image_pull_policy": "Never",
                    "workdir": "/tmp",
                },
            }
        )
    )
    return path


def custom(cluster: Cluster) -> Any:
    return client.CustomObjectsApi(cluster.api_client)


def test_the_chart_runs_the_controller_on_the_real_node(
    cluster: Cluster, real_node: RealNodeHandle, docker_env: DockerEnv, crds: None, tmp_path: Path
) -> None:
    node = real_node.node
    if node is None or cluster.plane is None:
        pytest.skip("needs the local plane's real node (the image is imported into its containerd)")
    t0 = time.monotonic()
    image = controller_image(docker_env)
    t1 = time.monotonic()
    assert image.ref in node.import_image(image.archive)
    import_s = time.monotonic() - t1
    node.expose_api_service(cluster.plane.server)

    ns = cluster.create_namespace(prefix="ctl", labels=RESTRICTED)
    try:
        _install_and_run(cluster, real_node, node, ns, image, import_s, t0, tmp_path)
    finally:
        _release_the_node(cluster, ns)


def _install_and_run(
    cluster: Cluster,
    real_node: RealNodeHandle,
    node: RealNode,
    ns: str,
    image: ControllerImage,
    import_s: float,
    t0: float,
    tmp_path: Path,
) -> None:
    r = cluster.helm(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        ns,
        "--skip-crds",
        "-f",
        str(values_file(tmp_path)),
        "--wait",
        "--timeout",
        "180s",
        timeout=240,
    )
    pods = cluster.core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/name=headroom").items
    assert r.returncode == 0, (
        r.stderr,
        [(p.metadata.name, p.status.phase, p.status.container_statuses) for p in pods],
        _controller_logs(cluster, ns),
    )
    ready_s = time.monotonic() - t0
    apps = client.AppsV1Api(cluster.api_client)
    dep = apps.list_namespaced_deployment(ns).items[0]
    assert dep.status.ready_replicas == 1
    (pod,) = pods
    assert pod.spec.node_name == real_node.name  # the real kubelet runs it, not kwok
    assert pod.status.container_statuses[0].ready
    assert pod.spec.containers[0].security_context.read_only_root_filesystem is True
    metrics_url = f"http://{pod.status.pod_ip}:8080/metrics"
    assert "headroom_" in (node.http_get(metrics_url) or "")

    r = headroom(cluster, "cluster", "submit", str(experiment_file(tmp_path, real_node.image)), "-n", ns, cwd=tmp_path)
    assert r.returncode == 0, r.stderr

    def complete() -> bool:
        exp = custom(cluster).get_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, "realnode")
        return (exp.get("status") or {}).get("phase") == "Complete"

    try:
        wait_for(complete, 420, "Experiment realnode to complete", interval=2)
    except TimeoutError as exc:
        trials = custom(cluster).list_namespaced_custom_object(GROUP, VERSION, ns, TRIAL_PLURAL)["items"]
        raise AssertionError(
            f"{exc}; trials by phase "
            f"{dict(Counter((t.get('status') or {}).get('phase', '-') for t in trials))}\n"
            f"{_pods(cluster, ns)}\n{_controller_logs(cluster, ns)}"
        ) from None
    run_s = time.monotonic() - t0 - ready_s

    trials = custom(cluster).list_namespaced_custom_object(
        GROUP, VERSION, ns, TRIAL_PLURAL, label_selector="headroom.dev/experiment=realnode"
    )["items"]
    finals = [t for t in trials if t["status"].get("final")]
    assert len(finals) == len(TASKS) * len(CONFIGS) * ATTEMPTS
    assert len({t["spec"]["trialId"] for t in finals}) == len(finals)  # one final result per trial
    assert all(t["status"]["node"] == real_node.name for t in trials)
    got = Counter(
        (t["spec"]["configuration"]["label"], t["status"]["outcome"], t["status"].get("reason") or "") for t in finals
    )
    print(
        f"\n{'build' if image.built else 'cached image (same inputs)'} {image.seconds:.0f}s, import {import_s:.0f}s, Ready after {ready_s:.0f}s, Experiment {run_s:.0f}s; "
        f"final outcomes: {dict(sorted(got.items()))}"
    )
    # the kernel's OOM kills at 1x-strict, classified oom_killed; none unbounded
    assert got[("1x-strict", "infra_error", "oom_killed")] >= 1
    assert not any(o == "infra_error" for (label, o, _) in got if label == "unbounded")
    oom = [t for t in finals if t["status"].get("reason") == "oom_killed"]
    assert all("oom_kill" in json.dumps(t["status"]) for t in oom)  # the runner's cgroup evidence
    exp = custom(cluster).get_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, "realnode")
    assert exp["status"]["progress"] == f"{len(finals)}/{len(finals)}"
    by_conf = {c["configuration"]: c for c in exp["status"]["configurations"]}
    for label in CONFIGS:
        assert by_conf[label]["finished"] == len(TASKS) * ATTEMPTS
        assert by_conf[label]["infraError"] == sum(
            n for (lab, o, _), n in got.items() if lab == label and o == "infra_error"
        )
    # /metrics of the controller pod agree with the Trials
    text = node.http_get(metrics_url) or ""
    from prometheus_client.parser import text_string_to_metric_families

    def metric(name: str, **labels: str) -> float | None:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return float(s.value)
        return None

    oom_metric = metric("headroom_trial_oom_kills_total", experiment="realnode", configuration="1x-strict")
    assert oom_metric == got[("1x-strict", "infra_error", "oom_killed")], [
        line for line in text.splitlines() if "oom" in line
    ]
    for (label, outcome, reason), n in got.items():
        assert (
            metric("headroom_trials", experiment="realnode", configuration=label, outcome=outcome, reason=reason) == n
        )


def _controller_logs(cluster: Cluster, ns: str) -> str:
    out = []
    for p in cluster.core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/name=headroom").items:
        try:
            out.append(cluster.core.read_namespaced_pod_log(p.metadata.name, ns, tail_lines=60))
        except client.exceptions.ApiException as exc:
            out.append(f"{p.metadata.name}: no log ({exc.status})")
    return "\n".join(out)


def _pods(cluster: Cluster, ns: str) -> str:
    """Each pod's phase, why it is not scheduled, and its containers' states: a trial that stays Pending
    is usually a pod waiting for room on the node, and this says which pod holds it."""
    out = []
    for p in cluster.core.list_namespaced_pod(ns).items:
        unscheduled = [c.message for c in p.status.conditions or [] if c.type == "PodScheduled" and c.status != "True"]
        states = {
            c.name: next(k for k in ("running", "terminated", "waiting") if getattr(c.state, k))
            for c in p.status.container_statuses or []
        }
        out.append(f"pod {p.metadata.name}: {p.status.phase} {states} {unscheduled[0] if unscheduled else ''}")
    return "\n".join(out)


def _release_the_node(cluster: Cluster, ns: str) -> None:
    """End what this test started on the shared real node, pass or fail: a controller left running keeps
    starting trial pods there, and the next real-node test's pods wait for CPU behind them (a sweep of
    test_realnode_external_agent.py timed out after 300 s that way)."""
    managed = "app.kubernetes.io/managed-by=headroom"
    try:
        custom(cluster).delete_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, "realnode")
    except client.exceptions.ApiException as exc:
        if exc.status != 404:
            raise
    try:  # the controller releases and deletes the pods of a deleted Experiment
        wait_for(
            lambda: not cluster.core.list_namespaced_pod(ns, label_selector=managed).items,
            60,
            "the deleted Experiment's pods to go",
        )
    except TimeoutError:  # the controller could not: its finalizers come off here, and the pods go at once
        for p in cluster.core.list_namespaced_pod(ns, label_selector=managed).items:
            cluster.core.patch_namespaced_pod(p.metadata.name, ns, {"metadata": {"finalizers": None}})
            cluster.core.delete_namespaced_pod(p.metadata.name, ns, grace_period_seconds=0)
    r = cluster.helm("uninstall", RELEASE, "--namespace", ns, "--wait", "--timeout", "60s", timeout=90)
    assert r.returncode == 0 or "not found" in r.stderr, r.stderr
