"""The Kubernetes backend on the real test control plane (kwok nodes run no containers).

The API server, scheduler, controller-manager, admission, quota, watches, finalizers
and the eviction API are real. The containers are not: how a pod ends comes from the
``headroom.test/outcome`` annotation, and a "succeeding" pod carries, in
``headroom.test/message``, the termination message the in-pod runner would write
(``simulate.py``); that message is parsed by the same code as on a real node. The
runner itself is tested for real in tests/kubernetes/test_runner.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.backends.kubernetes import message, runlease
from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.engine import sweep
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.launch import Launch
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli

from .plane import (
    OUTCOME_AFTER_ANNOTATION,
    OUTCOME_ANNOTATION,
    OUTCOME_CONTAINER_ANNOTATION,
    OUTCOME_MESSAGE_ANNOTATION,
    Cluster,
    wait_for,
)
from .simulate import Sim, hook, kwok_options, report

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"


def make_backend(cluster: Cluster, namespace: str, decide: Any = None, **opts: Any) -> KubernetesBackend:
    options = kwok_options(namespace, kubeconfig=str(cluster.kubeconfig), **opts)
    return KubernetesBackend(options=options, pod_hook=hook(decide) if decide else None)


def run_sweep(
    backend: KubernetesBackend,
    *,
    tasks: list[str],
    configs: list[str],
    attempts: int,
    concurrency: int = 8,
    tmp: Path,
    stop: threading.Event | None = None,
) -> tuple[Store, str]:
    exp = Experiment(
        tasks_dir=str(TASKS),
        tasks=tasks,
        configurations=configs,
        attempts=attempts,
        backend="kubernetes",
        concurrency=concurrency,
        kubernetes=backend.options,
    )
    task_list = sweep.prepare(exp)
    store = Store(tmp / "h.db")
    run_id, task_map = sweep.start(exp, task_list, store, backend)
    sweep.run(store, run_id, exp, task_map, backend, stop=stop)
    return store, run_id


def finals(store: Store, run_id: str) -> dict[str, tuple[str | None, str | None]]:
    out = {}
    for tid, rows in store.tries(run_id).items():
        fin = [r for r in rows if r.final and r.status == "finished"]
        assert len(fin) == 1, (tid, rows)
        out[tid] = (fin[0].outcome, fin[0].reason)
    return out


# ---- every failure class, through the outcome annotation --------------------------------------


def _classes(launch: Launch) -> Sim:
    return {
        0: Sim("succeed", report("1")),
        1: Sim("succeed", report("0")),
        2: Sim("oom"),
        3: Sim("exit:3"),  # the runner died without a report (issue 19: the agent killed it)
        4: Sim("evict"),
        5: Sim("imagepull"),
        6: Sim("succeed", report(agent_timeout=True)),
        7: Sim("succeed", report(agent_oom=1)),
        8: Sim("succeed", report("1")),  # made unschedulable below
        9: Sim("succeed", report(None, verifier_exit=2)),
        10: Sim("succeed", report("not-a-number")),
    }[launch.attempt]


def _classes_hook(launch: Launch) -> Sim:
    return _classes(launch)


def test_every_failure_class_is_classified_with_its_reason(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    decide = _classes_hook

    def with_unschedulable(launch: Launch, body: dict[str, Any]) -> dict[str, Any]:
        body = hook(decide)(launch, body)
        if launch.attempt == 8:
            body["spec"]["containers"][0]["resources"] = {
                "requests": {"cpu": "1000", "memory": "1Ti"},
                "limits": {"cpu": "1000", "memory": "1Ti"},
            }
        return body

    backend = KubernetesBackend(
        options=kwok_options(namespace, kubeconfig=str(cluster.kubeconfig), pull_deadline_s=3, pending_deadline_s=3),
        pod_hook=with_unschedulable,
    )
    try:
        store, run_id = run_sweep(
            backend, tasks=["csv-report"], configs=["1x-strict"], attempts=11, concurrency=11, tmp=tmp_path
        )
        got = {tid.rsplit(":", 1)[1]: v for tid, v in finals(store, run_id).items()}
        assert got == {
            "0": ("passed", None),
            "1": ("failed", None),
            "2": ("infra_error", "oom_killed"),
            "3": (
                "failed",
                "unjudged_state",
            ),  # the runner stopped mid-try: only the agent could, its report is not believed
            "4": ("infra_error", "evicted"),
            "5": ("infra_error", "image_pull"),
            "6": ("timeout", None),
            "7": ("infra_error", "oom_killed"),
            "8": ("infra_error", "unschedulable"),
            "9": ("harness_error", "verifier_crashed"),
            "10": ("harness_error", "reward_malformed"),
        }
        evicted = store.evidence(run_id, "csv-report:1x-strict:4")[0]["extra"]
        assert evicted["pod_status"]["reason"] == "Evicted" and evicted["node"].startswith("kwok-node-")
        assert any(e["reason"] == "Evicted" for e in evicted["events"])  # the Event, as evidence
        assert "log_tail" in evicted  # asked for (kwok has no kubelet logs: the answer says so)
    finally:
        backend.close()
    assert not cluster.core.list_namespaced_pod(namespace).items  # harvested pods are deleted


def test_outside_deletion_and_api_eviction_are_classified(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    backend = make_backend(cluster, namespace, lambda launch: Sim("none"))  # keeps running until acted on
    result: dict[str, Any] = {}
    th = threading.Thread(
        target=lambda: result.update(
            zip(
                ("_store", "run"),
                run_sweep(
                    backend, tasks=["csv-report"], configs=["1x-strict"], attempts=2, concurrency=2, tmp=tmp_path
                ),
            )
        )
    )
    th.start()
    try:

        def running() -> list[Any]:
            return [p for p in cluster.core.list_namespaced_pod(namespace).items if p.status.phase == "Running"]

        wait_for(lambda: len(running()) == 2, 60, "two running trial pods")
        by_attempt = {p.metadata.labels["headroom.dev/attempt"]: p.metadata.name for p in running()}
        cluster.core.delete_namespaced_pod(by_attempt["0"], namespace)
        cluster.core.create_namespaced_pod_eviction(
            by_attempt["1"],
            namespace,
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": by_attempt["1"], "namespace": namespace},
            },
        )
        th.join(90)
        assert not th.is_alive()
        got = {tid.rsplit(":", 1)[1]: v for tid, v in finals(Store(tmp_path / "h.db"), result["run"]).items()}
        assert got == {"0": ("infra_error", "pod_deleted"), "1": ("infra_error", "api_eviction")}
    finally:
        backend.close()
    wait_for(lambda: not cluster.core.list_namespaced_pod(namespace).items, 30, "pods gone once harvested")


# ---- a sweep over the bundled tasks --------------------------------------------------------------

MEMORY_HUNGRY = {"bundle-digest", "bundle-digest-xl", "word-index", "dep-resolve", "dedup-index", "crash-triage"}


def _bundled(launch: Launch) -> Sim:
    """A fixed, simplified version of the bundled tasks' behaviour (tasks/README.md)."""
    strict = launch.config_label == "1x-strict"
    if launch.task_id in MEMORY_HUNGRY and strict:
        return Sim("oom")
    if launch.task_id == "hash-chain" and strict:
        return Sim("succeed", report(agent_timeout=True))
    if launch.task_id == "unit-convert":
        return Sim("succeed", report("0", agent_result='{"tokens_in": 900, "tokens_out": 120, "cost_usd": 0.01}'))
    return Sim("succeed", report("1"))


def test_sweep_over_the_bundled_tasks_has_the_right_counts(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    backend = make_backend(cluster, namespace, _bundled)
    attempts = 2
    try:
        store, run_id = run_sweep(
            backend,
            tasks=["*"],
            configs=["1x-strict", "3x", "unbounded"],
            attempts=attempts,
            concurrency=24,
            tmp=tmp_path,
        )
        counts = Counter((tid.split(":")[1], *v) for tid, v in finals(store, run_id).items())
        n = attempts
        assert counts == Counter(
            {
                ("1x-strict", "infra_error", "oom_killed"): 6 * n,
                ("1x-strict", "timeout", None): n,
                ("1x-strict", "failed", None): n,
                ("1x-strict", "passed", None): 2 * n,
                ("1x/3x", "passed", None): 9 * n,
                ("1x/3x", "failed", None): n,
                ("unbounded", "passed", None): 9 * n,
                ("unbounded", "failed", None): n,
            }
        )
        per_trial = backend.request_report()["per_trial"]
        assert per_trial is not None and per_trial < 4  # create + release, the LISTs and WATCHes shared
        recorded = store.provenance(run_id).to_stored()["backend"]
        kube = recorded["kubernetes"]
        assert kube["server_version"]["git_version"].startswith("v1.")
        assert {n["name"] for n in kube["nodes"]} >= set(cluster.nodes)
        assert all(n["kubelet_version"] and "allocatable" in n for n in kube["nodes"])
        assert recorded["abilities"]["isolation"] == "pod" and kube["pod_security"]["profile"] == "restricted"
    finally:
        backend.close()


# ---- resume after kill -9 -----------------------------------------------------------------------


def test_kill_9_then_resume_adopts_live_pods(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    fields = message.render(report("1"))
    exp = {
        "tasks_dir": str(TASKS),
        "tasks": ["csv-report", "prime-count"],
        "configurations": ["1x-strict", "3x"],
        "attempts": 4,
        "concurrency": 16,
        "backend": "kubernetes",
        "kubernetes": {
            **kwok_options(namespace, kubeconfig=str(cluster.kubeconfig)).model_dump(mode="json"),
            "pod_annotations": {
                OUTCOME_ANNOTATION: "succeed",
                OUTCOME_CONTAINER_ANNOTATION: "task",
                OUTCOME_MESSAGE_ANNOTATION: fields,
                OUTCOME_AFTER_ANNOTATION: "6s",
            },
        },
    }
    spec = tmp_path / "exp.yaml"
    spec.write_text(yaml.safe_dump(exp))
    store_path = tmp_path / "h.db"
    # --no-canary: kwok pods cannot be OOM-killed, so the enforcement canary has nothing to prove here
    cmd = [
        sys.executable,
        "-m",
        "orchestrator",
        "sweep",
        "--experiment",
        str(spec),
        "--store",
        str(store_path),
        "--format",
        "none",
        "--no-canary",
    ]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    wait_for(lambda: len(cluster.core.list_namespaced_pod(namespace).items) >= 16, 60, "16 pods in flight")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    live = {p.metadata.name for p in cluster.core.list_namespaced_pod(namespace).items}
    assert len(live) >= 16
    second = run_cli("resume", "--store", str(store_path), "--format", "json", cwd=REPO, timeout=240)
    assert second.returncode == 0, second.stderr
    store = Store(store_path)
    run_id = store.run(None).run_id
    tries = store.tries(run_id)
    assert len(tries) == 16
    for tid, rows in tries.items():
        done = [r for r in rows if r.status == "finished"]
        assert len(done) == 1 and done[0].outcome == "passed", (tid, rows)
        # a pod that outlived the CLI was adopted, not run again: its try is the one that finished
        assert not [r for r in rows if r.status == "abandoned"], (tid, rows)
    wait_for(lambda: not cluster.core.list_namespaced_pod(namespace).items, 30, "pods gone once harvested")


# ---- API server restart and a forced 410 --------------------------------------------------------


def test_apiserver_restart_and_a_forced_410_mid_run(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    if cluster.plane is None:
        pytest.skip("restarting the API server needs the local plane")
    backend = make_backend(cluster, namespace, lambda launch: Sim("succeed", report("1"), after="3s"))
    result: dict[str, Any] = {}
    th = threading.Thread(
        target=lambda: result.update(
            zip(
                ("_store", "run"),
                run_sweep(
                    backend,
                    tasks=["csv-report", "prime-count"],
                    configs=["1x-strict", "unbounded"],
                    attempts=8,
                    concurrency=12,
                    tmp=tmp_path,
                ),
            )
        )
    )
    th.start()
    try:
        wait_for(lambda: backend.stats.harvested >= 4, 90, "a few trials harvested")
        apiserver = next(c for c in cluster.plane.components if c.name == "kube-apiserver")
        apiserver.stop(grace=5)
        time.sleep(3)
        apiserver.start()
        wait_for(lambda: backend.stats.harvested >= 12, 120, "trials harvested after the restart")
        inf = next(iter(backend._informers.values()))
        relists_before = inf.pod_stream.relists
        inf.pod_stream.force_resource_version("1")  # long compacted out of the watch cache: 410 Gone
        th.join(240)
        assert not th.is_alive()
        got = finals(Store(tmp_path / "h.db"), result["run"])
        assert len(got) == 32 and set(got.values()) == {("passed", None)}
        assert inf.pod_stream.relists > relists_before
        assert inf.pod_stream.reconnects >= 1
    finally:
        backend.close()


# ---- quota and finalizers (Kueue's gate: tests/cluster/test_kueue.py) ----------------------------------------------------


def test_a_full_resource_quota_waits_and_never_fails_a_trial(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    cluster.core.create_namespaced_resource_quota(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "three-pods"},
            "spec": {"hard": {"pods": "3"}},
        },
    )

    # Admission counts only what a quota's status names: one the quota controller has not filled in yet (a second
    # was not always enough under CI's load) lets every pod through.
    def filled_in() -> bool:
        status = cluster.core.read_namespaced_resource_quota("three-pods", namespace).status
        return (status.hard or {}).get("pods") == "3" and "pods" in (status.used or {})

    wait_for(filled_in, 60, "the quota controller to fill in the quota's status")
    backend = make_backend(cluster, namespace, lambda launch: Sim("succeed", report("1"), after="2s"))
    try:
        store, run_id = run_sweep(
            backend, tasks=["csv-report"], configs=["1x-strict"], attempts=9, concurrency=9, tmp=tmp_path
        )
        assert set(finals(store, run_id).values()) == {("passed", None)}
        assert backend.stats.quota_waits > 0
        assert any(
            q["name"] == "three-pods"
            for q in store.provenance(run_id).to_stored()["backend"]["kubernetes"]["resource_quotas"]
        )
    finally:
        backend.close()


FOREIGN_FINALIZER = "example.com/another-controller"


def test_release_removes_only_headroom_s_finalizer(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    """Another controller's finalizer (Kueue puts one on every pod it queues) survives the release."""

    def foreign(launch: Launch, body: dict[str, Any]) -> dict[str, Any]:
        body = hook(lambda _l: Sim("succeed", report("1")))(launch, body)
        body["metadata"]["finalizers"] = [FOREIGN_FINALIZER, *body["metadata"]["finalizers"], "example.com/third"]
        return body

    backend = KubernetesBackend(options=kwok_options(namespace, kubeconfig=str(cluster.kubeconfig)), pod_hook=foreign)
    try:
        store, run_id = run_sweep(
            backend, tasks=["csv-report"], configs=["1x-strict"], attempts=3, concurrency=3, tmp=tmp_path
        )
        assert set(finals(store, run_id).values()) == {("passed", None)}
        backend.close()  # the releases finish, then the collection delete: the pods stay, held by the others' finalizers
        wait_for(
            lambda: all(p.metadata.deletion_timestamp for p in cluster.core.list_namespaced_pod(namespace).items),
            30,
            "the harvested pods marked for deletion",
        )
        pods = cluster.core.list_namespaced_pod(namespace).items
        assert len(pods) == 3
        assert all(p.metadata.finalizers == [FOREIGN_FINALIZER, "example.com/third"] for p in pods), [
            p.metadata.finalizers for p in pods
        ]
    finally:
        backend.close()
        for p in cluster.core.list_namespaced_pod(namespace).items:  # the other controller lets go
            cluster.core.patch_namespaced_pod(
                p.metadata.name, namespace, [{"op": "replace", "path": "/metadata/finalizers", "value": []}]
            )


def test_cleanup_removes_what_a_crash_left(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    backend = make_backend(cluster, namespace, lambda launch: Sim("none"))
    stop = threading.Event()
    th = threading.Thread(
        target=lambda: run_sweep(
            backend, tasks=["csv-report"], configs=["1x-strict"], attempts=3, concurrency=3, tmp=tmp_path, stop=stop
        )
    )
    th.start()
    wait_for(lambda: len(cluster.core.list_namespaced_pod(namespace).items) == 3, 60, "three pods")
    # a crash: the process is gone, the pods (with our finalizer) are not, and its run Lease is renewed no more
    for inf in list(backend._informers.values()):
        inf.stop()
    backend._leases._stop.set()
    other = make_backend(cluster, namespace)
    assert other.cleanup(None).removed == []  # until the Lease expires the run counts as live
    wait_for(
        lambda: not runlease.live_runs(cluster.core.api_client, namespace, time.time())[0],
        runlease.DURATION_S * 3,
        "the crashed run's Lease to expire",
    )
    try:
        report_ = other.cleanup(None)
        assert sum(r.startswith("pod/") for r in report_.removed) == 3
        assert any(r.startswith("configmap/") for r in report_.removed)
        wait_for(lambda: not cluster.core.list_namespaced_pod(namespace).items, 30, "pods removed")
    finally:
        stop.set()
        th.join(30)
        other.close()
        backend.close()
