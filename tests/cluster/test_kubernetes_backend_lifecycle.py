"""The Kubernetes backend's edges on the real test control plane: closing, cleanup of live and
dead runs (run Leases), requests no node can hold, and pod specs the API server refuses.

Like test_kubernetes_backend.py, kwok stands in for kubelets (no containers run); the API
server, scheduler, RBAC, Leases and admission are real.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from orchestrator.backends.base import Handle, recorded
from orchestrator.backends.kubernetes import message, runlease
from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.backends.kubernetes.run_cache import RunCache
from orchestrator.engine import sweep
from orchestrator.engine.launch import build_launch
from orchestrator.errors import UserError
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.trial import Trial
from orchestrator.store.sqlite import Store

from .plane import OUTCOME_ANNOTATION, OUTCOME_CONTAINER_ANNOTATION, OUTCOME_MESSAGE_ANNOTATION, Cluster, wait_for
from .simulate import Sim, hook, kwok_options, report
from .test_kubernetes_backend import TASKS, finals, make_backend, run_sweep

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, cluster: Cluster, **kw: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
        **kw,
    )


def _experiment(
    tmp: Path,
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    annotations: dict[str, str],
    attempts: int = 2,
    tasks_dir: Path = TASKS,
    tasks: list[str] | None = None,
) -> Path:
    exp = {
        "name": name,
        "tasks_dir": str(tasks_dir),
        "tasks": tasks or ["csv-report"],
        "configurations": ["1x-strict"],
        "attempts": attempts,
        "concurrency": attempts,
        "backend": "kubernetes",
        "kubernetes": {
            **kwok_options(namespace, kubeconfig=str(cluster.kubeconfig)).model_dump(mode="json"),
            "pod_annotations": annotations,
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


SUCCEED = {
    OUTCOME_ANNOTATION: "succeed",
    OUTCOME_CONTAINER_ANNOTATION: "task",
    OUTCOME_MESSAGE_ANNOTATION: message.render(report("1")),
}


# ---- 1. close() ends the watches now --------------------------------------------------------------


def test_close_leaves_no_watch_or_lease_thread_running(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    backend = make_backend(cluster, namespace, lambda launch: Sim("succeed", report("1")))
    try:
        store, run_id = run_sweep(backend, tasks=["csv-report"], configs=["1x-strict"], attempts=2, tmp=tmp_path)
        assert set(finals(store, run_id).values()) == {("passed", None)}
        threads = backend.threads()
        names = {t.name for t in threads if t.is_alive()}
        # the watches are blocked in a read of a quiet stream right now (the server holds them open)
        assert {"informer-pods", "informer-events", "k8s-run-lease", "informer-nodes", "informer-node-pods"} <= names, (
            names
        )
    finally:
        backend.close()
    assert [t.name for t in threads if t.is_alive()] == []
    # and the run's Lease went with it: the run no longer executes anywhere
    live, stale = runlease.live_runs(cluster.core.api_client, namespace, time.time())
    assert live == {} and stale == []


def test_stop_while_a_watch_request_is_on_its_way_ends_the_watch(cluster: Cluster, namespace: str) -> None:
    """The race behind a CLI that waited out the server's watch timeout: stop() came while the
    WATCH request was in flight, so there was no response to shut down yet."""
    informer: RunCache | None = None
    in_flight = threading.Event()

    class Core:  # the real API calls, with the pod WATCH held back until stop() has run
        api_client = cluster.core.api_client

        def list_namespaced_pod(self, *args: Any, **kw: Any) -> Any:
            if kw.get("watch"):
                in_flight.set()
                assert informer is not None
                informer.stop_event.wait()
                time.sleep(0.2)  # stop() has looked for a response to interrupt by now
            return cluster.core.list_namespaced_pod(*args, **kw)

        def list_namespaced_event(self, *args: Any, **kw: Any) -> Any:
            return cluster.core.list_namespaced_event(*args, **kw)

    informer = RunCache(Core(), namespace, "app.kubernetes.io/managed-by=headroom", lambda: None)
    informer.start()
    assert in_flight.wait(30)
    informer.stop()
    assert [t.name for t in informer.threads() if t.is_alive()] == []
    # the watch's connection went back to the shared pool closed, not with a live stream on it
    for _ in range(3):
        cluster.core.list_namespaced_pod(namespace)


def test_a_cli_sweep_exits_after_its_last_trial(
    cluster: Cluster, namespace: str, tmp_path: Path, record_property: Any
) -> None:
    spec = _experiment(tmp_path, cluster, namespace, "quick", annotations=SUCCEED)
    started = time.monotonic()
    proc = _cli(
        "sweep",
        "--experiment",
        str(spec),
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
        "--no-canary",
        cluster=cluster,
    )
    out, err = proc.communicate(timeout=900)  # a hang guard only; the wall time is recorded, not judged
    wall = time.monotonic() - started
    record_property("cli_sweep_wall_s", round(wall, 2))
    print(f"CLI sweep of 2 trials: wall time {wall:.1f}s (exit {proc.returncode})")
    assert proc.returncode == 0, err
    store = Store(tmp_path / "h.db")
    assert set(finals(store, store.run(None).run_id).values()) == {("passed", None)}


def test_a_harvested_pod_is_kept_until_its_result_is_recorded(cluster: Cluster, namespace: str) -> None:
    """The class behind a controller's lost try: the pod went while the status write was still to come.

    A process that harvests a try and dies before it records the result must leave the pod for
    the next process to adopt and harvest again; only ``recorded`` lets it go.
    """
    exp = Experiment(
        tasks_dir=str(TASKS),
        tasks=["csv-report"],
        configurations=["1x-strict"],
        attempts=1,
        backend="kubernetes",
        kubernetes=kwok_options(namespace, kubeconfig=str(cluster.kubeconfig)),
    )
    task = sweep.prepare(exp)[0]
    trial = Trial(
        trial_id="csv-report:1x-strict:0",
        task_id=task.id,
        config=ResourceConfig.parse("1x-strict"),
        attempt=0,
        seed=1,
        order=0,
    )
    launch = build_launch("held-run", trial, 0, task, exp)

    def harvest(backend: KubernetesBackend, handle: Handle) -> TrialFacts:
        deadline = time.monotonic() + 60
        while (facts := backend.observe(handle)) is None:
            assert time.monotonic() < deadline, "the try never ended"
            backend.wait([handle], 1.0)
        return facts

    first = make_backend(cluster, namespace, lambda launch: Sim("succeed", report("1")))
    try:
        got = harvest(first, first.submit(launch))
        assert got.reward == 1.0
        time.sleep(1.5)  # a release on a worker would have landed by now
    finally:
        first.close()  # the process ends before its write: no recorded()
    pod = cluster.core.read_namespaced_pod(launch.name, namespace)
    assert pod.metadata.deletion_timestamp is None and pod.metadata.finalizers, "the pod was let go unrecorded"

    second = make_backend(cluster, namespace, lambda launch: Sim("succeed", report("1")))
    try:
        handle = second.adopt(launch)
        assert handle is not None  # the next process finds the try, not an abandoned one
        again = harvest(second, handle)
        assert (again.reward, again.extra.pod) == (got.reward, launch.name)
        recorded(second, handle)
    finally:
        second.close()
    wait_for(lambda: not cluster.core.list_namespaced_pod(namespace).items, 30, "the pod gone once recorded")


# ---- 2. cleanup leaves a live run alone ----------------------------------------------------------------


def _lease_of(cluster: Cluster, namespace: str, run_label: str) -> dict[str, Any] | None:
    api = client.CoordinationV1Api(cluster.core.api_client)
    for lease in api.list_namespaced_lease(namespace, label_selector=f"{runlease.RUN_LABEL}={run_label}").items:
        return cluster.core.api_client.sanitize_for_serialization(lease)
    return None


def _run_pods(cluster: Cluster, namespace: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in cluster.core.list_namespaced_pod(namespace).items:
        out.setdefault(p.metadata.labels["headroom.dev/run"], set()).add(p.metadata.name)
    return out


def test_cleanup_skips_a_live_run_and_removes_a_dead_one(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    # pods without an outcome annotation keep running: each run stays in flight until acted on
    dead_spec = _experiment(tmp_path, cluster, namespace, "dead", annotations={})
    live_spec = _experiment(tmp_path, cluster, namespace, "live", annotations={})
    dead = _cli(
        "sweep",
        "--experiment",
        str(dead_spec),
        "--store",
        str(tmp_path / "dead.db"),
        "--format",
        "none",
        "--no-canary",
        cluster=cluster,
    )
    live: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: sum(len(v) for v in _run_pods(cluster, namespace).values()) == 2, 90, "the dead run's pods")
        (dead_run,) = _run_pods(cluster, namespace)
        assert _lease_of(cluster, namespace, dead_run) is not None
        dead.send_signal(signal.SIGKILL)
        dead.communicate(timeout=30)
        live = _cli(
            "sweep",
            "--experiment",
            str(live_spec),
            "--store",
            str(tmp_path / "live.db"),
            "--format",
            "none",
            "--no-canary",
            cluster=cluster,
        )
        wait_for(
            lambda: len(_run_pods(cluster, namespace)) == 2
            and all(len(v) == 2 for v in _run_pods(cluster, namespace).values()),
            90,
            "the live run's pods",
        )
        (live_run,) = set(_run_pods(cluster, namespace)) - {dead_run}
        # the dead process renews nothing: wait until its Lease has expired on its own terms
        wait_for(
            lambda: not runlease.is_fresh(_lease_of(cluster, namespace, dead_run) or {}, time.time()),
            runlease.DURATION_S * 3,
            "the dead run's Lease to expire",
        )
        assert runlease.is_fresh(_lease_of(cluster, namespace, live_run) or {}, time.time())
        pods_before = _run_pods(cluster, namespace)

        r = _cli("runs", "cleanup", "--backend", "kubernetes", "--namespace", namespace, cluster=cluster)
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err
        print(out, err)
        removed = set(re.findall(r"^removed (\S+)", out, re.M))
        assert {f"pod/{n}" for n in pods_before[dead_run]} <= removed
        assert not any(f"pod/{n}" in removed for n in pods_before[live_run])
        dead_lease = runlease.lease_name(Store(tmp_path / "dead.db").run(None).run_id)
        assert f"lease/{dead_lease}" in removed
        assert re.search(
            rf"^kept +run {re.escape(live_run)}: still executing \(its Lease is renewed by \S+/\d+\)", out, re.M
        ), out
        assert not any(r_.startswith("configmap/") for r_ in removed)  # the live run still mounts its task
        wait_for(lambda: set(_run_pods(cluster, namespace)) == {live_run}, 60, "only the live run's pods left")
        assert live.poll() is None  # the live sweep is unaffected

        # --force overrides the Lease: the live run's pods go, and its sweep sees them deleted and ends
        r = _cli("runs", "cleanup", "--backend", "kubernetes", "--namespace", namespace, "--force", cluster=cluster)
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err
        assert {f"pod/{n}" for n in pods_before[live_run]} <= set(re.findall(r"^removed (\S+)", out, re.M))
        live.communicate(timeout=300)
        assert live.returncode == 0
        got = finals(Store(tmp_path / "live.db"), Store(tmp_path / "live.db").run(None).run_id)
        assert set(got.values()) == {("infra_error", "pod_deleted")}
        assert _lease_of(cluster, namespace, live_run) is None  # a run that ended releases its Lease
    finally:
        for p in (dead, live):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=30)


def test_cleanup_without_lease_access_removes_nothing(cluster: Cluster, namespace: str) -> None:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    api.set_default_header("Impersonate-User", "headroom-test-nobody")  # no RBAC at all: Leases are forbidden
    backend = KubernetesBackend(options=kwok_options(namespace), api_client=api)
    try:
        rep = backend.cleanup(None)
    finally:
        backend.close()
    assert rep.removed == [] and len(rep.kept) == 1 and "Leases are not readable (403" in rep.kept[0]


# ---- 3. a request no node can hold is refused before the run ---------------------------------------


def _oversized_tasks(tmp: Path, memory_mb: int) -> Path:
    root = tmp / "tasks"
    shutil.copytree(TASKS / "csv-report", root / "csv-report")
    toml = root / "csv-report" / "task.toml"
    toml.write_text(re.sub(r"(?m)^memory_mb = \d+$", f"memory_mb = {memory_mb}", toml.read_text()))
    return root


def test_an_oversized_request_is_refused_before_the_run(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    allocatable = {
        n.metadata.name: n.status.allocatable["memory"]
        for n in cluster.core.list_node(label_selector="type=kwok").items
    }
    assert set(allocatable.values()) == {"16Gi"}, allocatable  # the plane's kwok nodes (plane.default_node_specs)
    tasks_dir = _oversized_tasks(tmp_path, 64 * 1024)  # 64 GiB against 16 GiB kwok nodes
    spec = _experiment(tmp_path, cluster, namespace, "big", annotations=SUCCEED, tasks_dir=tasks_dir)
    proc = _cli(
        "sweep",
        "--experiment",
        str(spec),
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
        "--no-canary",
        cluster=cluster,
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    lines = [ln for ln in err.splitlines() if "csv-report" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "memory request of 64.0 GiB" in lines[0] and "largest candidate node (kwok-node-" in lines[0], lines[0]
    assert "16.0 GiB allocatable" in lines[0], lines[0]
    assert not cluster.core.list_namespaced_pod(namespace).items  # nothing ran
    assert not (tmp_path / "h.db").exists() or Store(tmp_path / "h.db").runs() == []


def test_a_fitting_request_is_checked_and_recorded(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    backend = make_backend(cluster, namespace, lambda launch: Sim("succeed", report("1")))
    try:
        store, run_id = run_sweep(backend, tasks=["csv-report"], configs=["1x-strict"], attempts=1, tmp=tmp_path)
        fit = store.provenance(run_id).to_stored()["backend"]["kubernetes"]["fit_check"]
        assert fit["checked"] is True and fit["candidate_nodes"] == len(cluster.nodes)
        assert fit["node_selector"] == "type=kwok"
    finally:
        backend.close()


def test_the_fit_check_is_skipped_when_nodes_are_forbidden(
    cluster: Cluster, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    api.set_default_header("Impersonate-User", "headroom-test-nobody")  # may not list nodes
    backend = KubernetesBackend(options=kwok_options(namespace), api_client=api)
    exp = Experiment(
        tasks_dir=str(_oversized_tasks(tmp_path, 64 * 1024)),
        configurations=["1x-strict"],
        attempts=1,
        backend="kubernetes",
        kubernetes=backend.options,
    )
    tasks = sweep.prepare(exp)
    from orchestrator.engine.plan import plan

    try:
        with caplog.at_level(logging.WARNING):
            sweep.check_fit(backend, tasks, plan(exp, tasks))  # would refuse if it could see the nodes
        assert backend._fit_check["checked"] is False and "cannot list nodes (403" in backend._fit_check["why"]
        assert any("cannot list nodes (403" in r.getMessage() for r in caplog.records)
    finally:
        backend.close()


def test_oversized_is_judged_against_the_selected_nodes_only(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    # a selector that matches no node means "no candidate yet" (an autoscaler may add one): no refusal;
    # the same request against the selector that matches the 16 GiB kwok nodes is refused
    backend = KubernetesBackend(
        options=kwok_options(namespace, kubeconfig=str(cluster.kubeconfig)).model_copy(
            update={"node_selector": {"type": "no-such-pool"}}
        )
    )
    exp = Experiment(
        tasks_dir=str(_oversized_tasks(tmp_path, 64 * 1024)),
        configurations=["1x-strict"],
        attempts=1,
        backend="kubernetes",
        kubernetes=backend.options,
    )
    tasks = sweep.prepare(exp)
    from orchestrator.engine.plan import plan

    try:
        sweep.check_fit(backend, tasks, plan(exp, tasks))
        assert backend._fit_check == {
            "checked": False,
            "why": "no node matching type=no-such-pool yet (an autoscaler may add one)",
        }
        backend.options = kwok_options(namespace, kubeconfig=str(cluster.kubeconfig))
        with pytest.raises(UserError, match="task csv-report .*64.0 GiB"):
            sweep.check_fit(backend, tasks, plan(exp, tasks))
    finally:
        backend.close()


# ---- 4. a pod spec the API server refuses ---------------------------------------------------------


def _invalid_name(body: dict[str, Any]) -> None:
    body["spec"]["containers"][0]["name"] = "Not_A_Valid_Name"  # the API server answers 422 Invalid


def _unknown_field(body: dict[str, Any]) -> None:
    body["spec"]["tolerations"][0]["operatr"] = "Exists"  # a misspelt key: the server's strict validation refuses it


@pytest.mark.parametrize(
    ("edit", "needle", "statuses"),
    [(_invalid_name, "Not_A_Valid_Name", {422}), (_unknown_field, "operatr", {400, 422})],
    ids=["invalid", "unknown-field"],
)
def test_a_refused_pod_spec_is_a_classified_infra_outcome(
    cluster: Cluster, namespace: str, tmp_path: Path, edit: Any, needle: str, statuses: set[int]
) -> None:
    """A pod the API server refuses is ``infra_error(spawn_failed)`` with the server's words as evidence. Pods are
    created under strict field validation: by default the server drops a field it does not know with only a
    warning, and the pod would run without what was asked (a misspelt toleration: a pod that never schedules,
    and a pending deadline that reads as a capacity problem)."""

    def refused(launch: Launch, body: dict[str, Any]) -> dict[str, Any]:
        body = hook(lambda _l: Sim("succeed", report("1")))(launch, body)
        edit(body)
        return body

    backend = KubernetesBackend(options=kwok_options(namespace, kubeconfig=str(cluster.kubeconfig)), pod_hook=refused)
    try:
        store, run_id = run_sweep(backend, tasks=["csv-report"], configs=["1x-strict"], attempts=2, tmp=tmp_path)
        assert set(finals(store, run_id).values()) == {("infra_error", "spawn_failed")}
        ev = store.evidence(run_id, "csv-report:1x-strict:0")[0]
        assert ev["infra_detail"].startswith("the API server refused the pod: ")
        assert needle in ev["infra_detail"]
        assert ev["extra"]["api_refusal"]["status"] in statuses
    finally:
        backend.close()
    assert not cluster.core.list_namespaced_pod(namespace).items
