"""What the Pod backend cannot run faithfully is refused before anything runs, from the CLI's sweep and from the
in-cluster controller alike, on the real kube-apiserver test plane (issue 30, item 1).

CPU architecture: the nodes are read from the API server. A pool of two kwok nodes of its own: one arm64 node
(Ready), one s390x node that is cordoned, so no trial pod could land on it. A task built for s390x (its
Dockerfile's ``FROM --platform``) is refused; one built for arm64 runs, its pod pinned to arm64 nodes; when the
s390x node is uncordoned the s390x task is no longer refused (the nodes are read when asked, not once).

The controller: Experiments created straight through the API (as kubectl would, past `headroom cluster submit`'s
own check) naming tasks a pod cannot run faithfully (another CPU, a GPU, verifier outputs, the internet not
allowed, a second container) are each refused by the real reconciler with one line in their Planned condition
and one Warning event, and no Trial or pod is created.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.controller import tasksets
from orchestrator.controller.resources import API_VERSION, EXPERIMENT_PLURAL, GROUP, TRIAL_PLURAL, VERSION
from orchestrator.engine import faithful, sweep
from orchestrator.errors import NotFaithful
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.store.sqlite import Store

from .controller_support import crds, reconciler  # noqa: F401  (crds: the fixture)
from .plane import FAKE_NODE_ANNOTATION, FAKE_NODE_TAINT, FAKE_NODE_TOLERATION, FAKE_NODE_VALUE, Cluster, wait_for
from .simulate import Sim, hook, report

pytestmark = [pytest.mark.cluster]
POOL_LABEL = "headroom.test/pool"
IMAGE = "python:3.11-slim"  # never pulled: kwok runs no containers
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "faithful"
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _node(cluster: Cluster, name: str, pool: str, arch: str, cordoned: bool) -> None:
    capacity = {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "200Gi"}
    cluster.core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE},
                "labels": {
                    POOL_LABEL: pool,
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": arch,
                },
            },
            "spec": {"taints": [FAKE_NODE_TAINT], "unschedulable": cordoned},
            "status": {"capacity": capacity, "allocatable": capacity},
        }
    )


@pytest.fixture(scope="module")
def pool(cluster: Cluster) -> Iterator[dict[str, str]]:
    """{arch: node name}: an arm64 node Ready and a cordoned s390x node, in a pool of their own."""
    name = f"arch-{uuid.uuid4().hex[:6]}"
    nodes = {"arm64": f"{name}-arm", "s390x": f"{name}-s390x"}
    for arch, node in nodes.items():
        _node(cluster, node, name, arch, cordoned=arch == "s390x")
    try:

        def ready() -> bool:
            n = cluster.core.read_node(nodes["arm64"])
            return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) and not any(
                t.key in NOT_READY_TAINTS for t in n.spec.taints or []
            )

        wait_for(ready, 90, f"node {nodes['arm64']} Ready and untainted")
        yield {"pool": name, **nodes}
    finally:
        for node in nodes.values():
            cluster.core.delete_node(node)


def _tasks(root: Path) -> Path:
    """The faithful fixtures, plus a task for each architecture and one whose verifier needs another folder."""
    shutil.copytree(FIX, root, ignore=shutil.ignore_patterns("conftest.py", "__pycache__"))
    for arch, platform in (("s390x", "linux/s390x"), ("arm64", "linux/arm64/v8")):
        task = root / f"for-{arch}"
        shutil.copytree(FIX / "needs-image", task)
        (task / "environment").mkdir()
        (task / "environment" / "Dockerfile").write_text(f"FROM --platform={platform} {IMAGE}\nWORKDIR /app\n")
        toml = task / "task.toml"
        toml.write_text(toml.read_text().replace("headroom.local/tb2-fix-git:20251031", IMAGE))
    outputs = root / "carries-outputs"
    shutil.copytree(FIX / "needs-image", outputs)
    toml = (outputs / "task.toml").read_text()
    (outputs / "task.toml").write_text(
        toml.replace("[verifier]\ntimeout_sec = 900.0\n", '[verifier]\ntimeout_sec = 900.0\noutputs = ["/srv/out"]\n')
    )
    return root


def _options(cluster: Cluster, namespace: str, pool: str) -> KubernetesOptions:
    return KubernetesOptions(
        namespace=namespace,
        kubeconfig=str(cluster.kubeconfig),
        node_selector={POOL_LABEL: pool},
        tolerations=[dict(FAKE_NODE_TOLERATION)],
    )


def test_a_task_for_a_cpu_no_schedulable_node_has_is_refused_and_one_a_node_has_is_pinned_to_it(
    cluster: Cluster, namespace: str, pool: dict[str, str], tmp_path: Path
) -> None:
    root = _tasks(tmp_path / "tasks")
    opts = _options(cluster, namespace, pool["pool"])
    bodies: list[dict[str, Any]] = []
    simulate = hook(lambda launch: Sim("succeed", report("1"), after="1s"))

    def capture(launch: Any, body: dict[str, Any]) -> dict[str, Any]:
        bodies.append(body)
        return simulate(launch, body)

    backend = KubernetesBackend(options=opts, pod_hook=capture)
    store = Store(tmp_path / "h.db")

    def experiment(*tasks: str) -> Experiment:
        return Experiment(
            tasks_dir=str(root),
            tasks=list(tasks),
            configurations=["unbounded"],
            attempts=1,
            backend="kubernetes",
            kubernetes=opts,
        )  # type: ignore[arg-type]

    try:
        both = experiment("for-s390x", "for-arm64")
        with pytest.raises(NotFaithful) as refused:
            sweep.start(both, sweep.prepare(both), store, backend)
        (line,) = refused.value.lines
        assert line.startswith("CPU architecture: 1 task needs s390x CPUs and no schedulable node has them")
        assert "(the nodes a trial pod could land on run arm64)" in line
        assert "for-s390x (environment/Dockerfile: FROM --platform=linux/s390x)" in line and "for-arm64" not in line
        assert store.runs() == [] and bodies == []  # refused before the run was written or a pod made

        arm = experiment("for-arm64")
        run_id, task_map = sweep.start(arm, sweep.prepare(arm), store, backend)
        sweep.run(store, run_id, arm, task_map, backend)
        (body,) = bodies
        assert body["spec"]["nodeSelector"] == {POOL_LABEL: pool["pool"], "kubernetes.io/arch": "arm64"}
        outcomes = store.db.execute("SELECT outcome FROM executions WHERE run_id=? AND final=1", (run_id,)).fetchall()
        assert [tuple(r) for r in outcomes] == [("passed",)]
        prov = store.provenance(run_id)
        assert prov.faithful is not None and prov.faithful.architectures == ["arm64"]
        assert prov.backend is not None and prov.backend.abilities is not None
        assert prov.backend.abilities.architectures == ["arm64"]

        # uncordoned, the s390x node can take a pod: the nodes are read again when asked
        cluster.core.patch_node(pool["s390x"], {"spec": {"unschedulable": False}})
        wait_for(lambda: backend.node_architectures() == ["arm64", "s390x"], 60, "the s390x node schedulable")
        assert faithful.check(both, sweep.prepare(both), backend).architectures == ["arm64", "s390x"]
    finally:
        cluster.core.patch_node(pool["s390x"], {"spec": {"unschedulable": True}})
        backend.close()


#: Experiment name -> (its tasks, what its one-line refusal says)
REFUSED = {
    "arch": (["for-s390x"], "CPU architecture: 1 task needs s390x CPUs and no schedulable node has them"),
    "gpu": (["needs-gpu"], "GPUs: 1 task needs GPUs, which the kubernetes backend cannot give"),
    "outputs": (["carries-outputs"], "verifier outputs: 1 task declares folders besides the work dir"),
    "internet": (["needs-internet"], "network: 1 task needs the internet, which this sweep does not allow"),
    "compose": (["multi-container"], "multi-container: 1 task needs services beside their own container"),
}


def _no_backend(name: str, spec: Any) -> Any:
    raise AssertionError(f"{name}: a refused Experiment must never get a backend (pods)")


def test_the_controller_refuses_what_a_pod_cannot_run_faithfully_in_one_line_and_creates_no_trial(
    cluster: Cluster, crds: None, pool: dict[str, str], tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="faithful")
    pushed = tasksets.push(cluster.core, ns, _tasks(tmp_path / "tasks"))
    custom = client.CustomObjectsApi(cluster.api_client)
    kube = {"node_selector": {POOL_LABEL: pool["pool"]}, "tolerations": [dict(FAKE_NODE_TOLERATION)]}
    for name, (tasks, _) in {**REFUSED, "runs": (["for-arm64", "needs-image"], "")}.items():
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            EXPERIMENT_PLURAL,
            {
                "apiVersion": API_VERSION,
                "kind": "Experiment",
                "metadata": {"name": name},
                "spec": {
                    "name": name,
                    "task_source": {"bundle": pushed.name},
                    "tasks": tasks,
                    "image": IMAGE,
                    "kubernetes": kube,
                },
            },
        )
    with reconciler(cluster, ns, _no_backend, scratch=tmp_path / "scratch") as rec:
        for name in REFUSED:
            assert rec.reconcile(name) is None  # terminal: no requeue
            assert rec.reconcile(name) is None  # and a second look changes nothing
        for name, (tasks, words) in REFUSED.items():
            exp = custom.get_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, name)
            assert exp["status"]["phase"] == "Failed", (name, exp["status"])
            (cond,) = [c for c in exp["status"]["conditions"] if c["type"] == "Planned"]
            assert cond["status"] == "False" and cond["reason"] == "SpecInvalid"
            message = cond["message"]
            assert message.startswith("not faithful on the kubernetes backend: " + words), (name, message)
            assert "\n" not in message and " | " not in message and tasks[0] in message  # one class, one line
            events = [
                e
                for e in cluster.core.list_namespaced_event(ns).items
                if e.involved_object.name == name and e.reason == "SpecInvalid"
            ]
            assert len(events) == 1 and events[0].type == "Warning" and words in events[0].message, name
        assert custom.list_namespaced_custom_object(GROUP, VERSION, ns, TRIAL_PLURAL)["items"] == []
        assert cluster.core.list_namespaced_pod(ns).items == []
        # tasks a pod runs faithfully are planned (the arm64 one is for the pool's schedulable node)
        runs = custom.get_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, "runs")
        planned = rec._plan(runs)
        assert sorted(planned.tasks) == ["for-arm64", "needs-image"] and len(planned.trials) > 0


def test_cluster_submit_refuses_another_cpu_before_pushing_anything(
    cluster: Cluster, crds: None, pool: dict[str, str], tmp_path: Path
) -> None:
    """`headroom cluster submit` reads the same nodes the controller would, and refuses before any ConfigMap."""
    import yaml

    from .controller_support import headroom

    ns = cluster.create_namespace(prefix="submit")
    root = _tasks(tmp_path / "tasks")
    exp = tmp_path / "exp.yaml"
    kube = {"node_selector": {POOL_LABEL: pool["pool"]}, "tolerations": [dict(FAKE_NODE_TOLERATION)]}
    exp.write_text(yaml.safe_dump({"name": "arch", "tasks_dir": str(root), "tasks": ["for-s390x"], "kubernetes": kube}))
    r = headroom(cluster, "cluster", "submit", str(exp), "-n", ns)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "CPU architecture: 1 task needs s390x CPUs and no schedulable node has them" in r.stderr
    pushed = [c.metadata.name for c in cluster.core.list_namespaced_config_map(ns).items]
    assert [n for n in pushed if n != "kube-root-ca.crt"] == []
    custom = client.CustomObjectsApi(cluster.api_client)
    assert custom.list_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL)["items"] == []
    # the arm64 task is submitted: pushed, then created
    exp.write_text(yaml.safe_dump({"name": "arm", "tasks_dir": str(root), "tasks": ["for-arm64"], "kubernetes": kube}))
    ok = headroom(cluster, "cluster", "submit", str(exp), "-n", ns)
    assert ok.returncode == 0, ok.stderr
    assert [
        e["metadata"]["name"]
        for e in custom.list_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL)["items"]
    ] == ["arm"]
