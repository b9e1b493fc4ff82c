"""Trial pods handed to a real Kueue (``--queue``): admitted, held within quota, and left with Kueue's finalizer.

Kueue's controller manager, CRDs and webhooks are the real ones (tests/cluster/kueue.py, built
from the Go module proxy by scripts/k8s/kueue.sh). The containers are kwok's, as in the other
backend tests: how a pod ends comes from its outcome annotation.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from orchestrator.backends.kubernetes import pod as pod_mod
from orchestrator.kube.watch import ListWatch, stop_all
from orchestrator.store.sqlite import Store

from .controller_support import ControllerProcess, crds  # noqa: F401
from .kueue import NAMESPACE_LABEL, Kueue, KueueMissing, find_kueue
from .plane import Cluster, wait_for
from .simulate import Sim, report
from .test_controller_sweep import experiment, headroom, setup, trials, wait_complete
from .test_kubernetes_backend import finals, make_backend, run_sweep

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
KUEUE = "kueue.x-k8s.io"
KUEUE_FINALIZER = f"{KUEUE}/managed"
ADMISSION_GATE = f"{KUEUE}/admission"
QUEUE = "team-a"
POD_QUOTA = 2


@pytest.fixture(scope="session")
def kueue(cluster: Cluster) -> Iterator[Kueue]:
    if cluster.plane is None:
        pytest.skip("HEADROOM_TEST_KUBECONFIG: the Kueue tests start their own Kueue on the local plane only")
    try:
        root = find_kueue()
    except KueueMissing as exc:
        pytest.fail(str(exc))
    k = Kueue(cluster, root)
    try:
        k.start()
        yield k
    finally:
        k.stop()


def _queues(cluster: Cluster, namespace: str, tag: str) -> None:
    """A ResourceFlavor, a ClusterQueue admitting POD_QUOTA pods at a time, and the namespace's LocalQueue."""
    custom = client.CustomObjectsApi(cluster.api_client)
    flavor, cq = f"flavor-{tag}", f"cq-{tag}"
    custom.create_cluster_custom_object(
        KUEUE,
        "v1beta2",
        "resourceflavors",
        {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
    )
    custom.create_cluster_custom_object(
        KUEUE,
        "v1beta2",
        "clusterqueues",
        {
            "apiVersion": f"{KUEUE}/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        # every resource a trial pod requests (ephemeral-storage too), else Kueue never admits it
                        "coveredResources": ["cpu", "memory", "ephemeral-storage", "pods"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "64"},
                                    {"name": "memory", "nominalQuota": "256Gi"},
                                    {"name": "ephemeral-storage", "nominalQuota": "1Ti"},
                                    {"name": "pods", "nominalQuota": POD_QUOTA},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    )
    custom.create_namespaced_custom_object(
        KUEUE,
        "v1beta2",
        namespace,
        "localqueues",
        {
            "apiVersion": f"{KUEUE}/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    )

    def active() -> bool:
        st = custom.get_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", cq).get("status") or {}
        return any(c["type"] == "Active" and c["status"] == "True" for c in st.get("conditions") or [])

    wait_for(active, 60, f"ClusterQueue {cq} to be active")


class PodHistory:
    """Every version of the namespace's pods, as a watch delivers them (to check who removed what)."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.versions: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()
        self.stream = ListWatch(
            "history",
            cluster.core.list_namespaced_pod,
            {"namespace": namespace},
            on_list=lambda items: [self._add("ADDED", p) for p in items],
            on_event=self._add,
        )
        self.stream.start()
        assert self.stream.synced.wait(30)

    def _add(self, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            self.versions[obj["metadata"]["name"]].append(obj)

    def stop(self) -> None:
        stop_all([self.stream])

    def max_ungated_alive(self) -> int:
        """The most pods past Kueue's gate and not yet ended at any one resourceVersion."""
        with self._lock:
            changes = sorted(
                (int(v["metadata"]["resourceVersion"]), name, v) for name, vs in self.versions.items() for v in vs
            )
        state: dict[str, bool] = {}
        most = 0
        for _, name, v in changes:
            gated = any(g["name"] == ADMISSION_GATE for g in v["spec"].get("schedulingGates") or [])
            ended = (v.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            state[name] = not gated and not ended
            most = max(most, sum(state.values()))
        return most

    def admitted(self) -> int:
        """Pods created with Kueue's admission gate (its webhook) and later seen without it (its admission)."""
        with self._lock:
            items = {k: list(v) for k, v in self.versions.items()}

        def gated(v: dict[str, Any]) -> bool:
            return any(g["name"] == ADMISSION_GATE for g in v["spec"].get("schedulingGates") or [])

        return sum(1 for vs in items.values() if vs and gated(vs[0]) and not gated(vs[-1]))

    def check_releases(self) -> int:
        """Where headroom's finalizer went, nothing else went with it; returns how many releases were seen."""
        seen = 0
        with self._lock:
            items = {k: list(v) for k, v in self.versions.items()}
        for name, vs in items.items():
            assert any(KUEUE_FINALIZER in (v["metadata"].get("finalizers") or []) for v in vs), (
                f"{name}: Kueue's webhook never put its finalizer on the pod"
            )
            for before, after in zip(vs, vs[1:]):
                was, now = before["metadata"].get("finalizers") or [], after["metadata"].get("finalizers") or []
                if pod_mod.FINALIZER in was and pod_mod.FINALIZER not in now:
                    seen += 1
                    assert [f for f in was if f != pod_mod.FINALIZER] == now, (name, was, now)
                    assert after["metadata"]["labels"].get(pod_mod.HARVESTED_LABEL) == "true"  # headroom's patch
        return seen


def test_trial_pods_are_admitted_by_kueue_within_quota(kueue: Kueue, cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace(prefix="kueue", labels={NAMESPACE_LABEL: "true"})
    _queues(cluster, ns, ns)
    history = PodHistory(cluster, ns)
    # pending_deadline_s=1: the pods Kueue holds wait well past it, and must not fail for it
    backend = make_backend(
        cluster, ns, lambda launch: Sim("succeed", report("1"), after="3s"), queue=QUEUE, pending_deadline_s=1
    )
    result: dict[str, Any] = {}
    th = threading.Thread(
        target=lambda: result.update(
            zip(
                ("store", "run"),
                run_sweep(
                    backend, tasks=["csv-report"], configs=["1x-strict"], attempts=6, concurrency=6, tmp=tmp_path
                ),
            )
        ),
        daemon=True,
    )
    th.start()
    try:
        wait_for(lambda: history.admitted() >= 1, 90, "Kueue to admit a first trial pod")
        th.join(180)
        assert not th.is_alive(), "the sweep did not end within 180 s of the first admission"
        store, run_id = Store(tmp_path / "h.db"), result["run"]  # the sweep thread's connection stays there
        # every trial passed: a wait in the queue is neither an infrastructure error nor a timeout
        assert set(finals(store, run_id).values()) == {("passed", None)}
        backend.sweep_harvested(force=True)
        wait_for(lambda: history.check_releases() == 6, 30, "six releases on the watch")
    finally:
        backend.close()
        history.stop()
    assert history.max_ungated_alive() <= POD_QUOTA  # Kueue held the rest at its gate
    queue = [
        e["extra"]["queue"] for tid in finals(store, run_id) for e in Store(tmp_path / "h.db").evidence(run_id, tid)
    ]
    assert len(queue) == 6 and all(q["name"] == QUEUE and q["gated"] for q in queue), queue
    waits = sorted(q["gated_s"] for q in queue)
    # the pods beyond the quota waited for the first ones to end (each "runs" 3 s): that is queue time
    assert waits[-1] > waits[0] and sum(w > 2.0 for w in waits) >= 6 - POD_QUOTA, waits
    assert history.admitted() == 6  # Kueue gated each trial pod at creation and lifted the gate itself


def test_the_controller_s_experiment_completes_through_kueue(
    kueue: Kueue,
    cluster: Cluster,
    crds: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    import yaml

    from .plane import FAKE_NODE_TOLERATION, REPO

    ns, kc = setup(cluster, tmp_path, "kueuectl")
    cluster.core.patch_namespace(ns, {"metadata": {"labels": {NAMESPACE_LABEL: "true"}}})
    _queues(cluster, ns, ns)
    spec = tmp_path / "queued.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "queued",
                "tasks_dir": str(REPO / "tasks"),
                "tasks": ["csv-report", "prime-count"],
                "configurations": ["1x-strict"],
                "attempts": 2,
                "concurrency": 4,
                "agent": {"kind": "oracle"},
                "kubernetes": {
                    "node_selector": {"type": "kwok"},
                    "tolerations": [dict(FAKE_NODE_TOLERATION)],
                    "queue": QUEUE,
                },
            }
        )
    )
    r = headroom(cluster, "cluster", "submit", str(spec), "-n", ns)
    assert r.returncode == 0, r.stderr
    history = PodHistory(cluster, ns)
    ctl = ControllerProcess(kc, ns, tmp_path / "controller.log", "--resync-seconds", "5", simulated=True).start()
    try:
        wait_complete(cluster, ns, "queued", ctl, 240)
        items = trials(cluster, ns, "queued")
        assert len(items) == 4 and {t["status"]["outcome"] for t in items} == {"passed"}, [
            (t["spec"]["task"], t["status"].get("outcome"), t["status"].get("reason")) for t in items
        ]
        assert experiment(cluster, ns, "queued")["status"]["phase"] == "Complete"
        assert history.admitted() == 4  # every trial pod went through Kueue
    finally:
        ctl.stop()
        history.stop()
