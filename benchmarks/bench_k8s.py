"""Trials as pods: headroom's Kubernetes backend against two baselines, on kwok nodes, in one run.

    python benchmarks/bench_k8s.py [--trials 2000] [--in-flight 200] [--nodes 50] [--duration 10]

Needs the test control plane (scripts/k8s/build.sh). Every pod "runs" --duration
seconds on a kwok node and ends with the termination message the in-pod runner
would write (kwok runs no containers). Measured, each in its own namespace:

* headroom  the whole engine: plan, SQLite store, KubernetesBackend (one LIST+WATCH
            per run on pods and on Events, finalizer harvest, collection delete),
            classification, evidence; the cap on pods in flight is the concurrency;
* (a) bare  a script that creates the same pods (same bodies, no finalizer) with the
            same cap and waits on one watch; finished pods are deleted once, at the end;
* (b) poll  the same creates, then a GET of every pod in flight once a second until
            it ends, then a DELETE.

Requests are counted at the client (every call through ``ApiClient.call_api``). For (b)
two counts are printed:

* managed: the requests the polling loop really sent. On a loaded machine one Python
  loop cannot send 200 GETs a second, so it polls less often than its design says and
  this count flatters polling;
* owed: the creates and deletes it sent, plus the GETs a 1 s polling design issues: one
  per pod per started second between the pod's creation and the end of its container
  (``metadata.creationTimestamp`` to ``terminated.finishedAt``, both from the API
  server, so the loop's own lag does not inflate it), at least one per pod.

Printed: wall time, trials per second and API requests per trial for each, the ratios
headroom/(a) for throughput and (b)/headroom for requests (managed and owed), headroom's own
CPU per trial (this process's user + system time during its run: the engine, its watches and
its API calls, not the plane's processes; steadier than wall time on a shared machine), and the
load average before and after. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from orchestrator.backends.kubernetes import message, scripts  # noqa: E402
from orchestrator.backends.kubernetes import pod as pod_mod  # noqa: E402
from orchestrator.backends.kubernetes.backend import KubernetesBackend  # noqa: E402
from orchestrator.engine.launch import build_launch  # noqa: E402
from orchestrator.engine.plan import plan  # noqa: E402
from orchestrator.engine.sweep import prepare, run, start  # noqa: E402
from orchestrator.kube.client import connect  # noqa: E402
from orchestrator.kube.requests import RequestCounter  # noqa: E402
from orchestrator.spec.experiment import Experiment  # noqa: E402
from orchestrator.spec.kubernetes import KubernetesOptions  # noqa: E402
from orchestrator.spec.resources import ResourceConfig  # noqa: E402
from orchestrator.store.sqlite import Store  # noqa: E402
from orchestrator.tasks.files import bundle  # noqa: E402
from tests.cluster.plane import (  # noqa: E402
    FAKE_NODE_TOLERATION,
    OUTCOME_AFTER_ANNOTATION,
    OUTCOME_ANNOTATION,
    OUTCOME_CONTAINER_ANNOTATION,
    OUTCOME_MESSAGE_ANNOTATION,
    Cluster,
    LocalPlane,
    NodeSpec,
    find_bin_dir,
)

TASK = "csv-report"
PASS = message.render(
    {
        "agent_exit": 0,
        "agent_cs": 100,
        "agent_timeout": 0,
        "agent_oom0": 0,
        "agent_oom1": 0,
        "agent_peak": 1,
        "verifier_exit": 0,
        "verifier_cs": 10,
        "verifier_timeout": 0,
        "verifier_oom0": 0,
        "verifier_oom1": 0,
        "verifier_peak": 1,
        "reward_file": "reward.txt",
        "reward_size": 2,
        "reward": "1",
    }
)


def options(namespace: str, kubeconfig: Path, duration: float) -> KubernetesOptions:
    return KubernetesOptions(
        namespace=namespace,
        kubeconfig=str(kubeconfig),
        node_selector={"type": "kwok"},
        tolerations=[dict(FAKE_NODE_TOLERATION)],
        pod_annotations={
            OUTCOME_ANNOTATION: "succeed",
            OUTCOME_CONTAINER_ANNOTATION: "task",
            OUTCOME_MESSAGE_ANNOTATION: PASS,
            OUTCOME_AFTER_ANNOTATION: f"{duration:g}s",
        },
    )


def experiment(opts: KubernetesOptions, trials: int, in_flight: int) -> Experiment:
    return Experiment(
        tasks_dir=str(REPO / "tasks"),
        tasks=[TASK],
        configurations=[ResourceConfig.parse("1x-strict")],
        attempts=trials,
        backend="kubernetes",
        concurrency=in_flight,
        kubernetes=opts,
    )


def pod_bodies(
    opts: KubernetesOptions, trials: int, in_flight: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pods headroom would create for the same experiment, without the finalizer (nobody harvests), and the
    ConfigMaps they mount (the task's files, the runner and the warden)."""
    exp = experiment(opts, trials, in_flight)
    tasks = prepare(exp)
    b = bundle(TASK, tasks[0].path, tasks[0].digest)
    bodies = []
    for trial in plan(exp, tasks):
        launch = build_launch("bench-baseline", trial, 0, tasks[0], exp)
        body = pod_mod.build(launch, opts, b, tasks[0].spec.environment.docker_image or "bench:1")
        body["metadata"].pop("finalizers")
        bodies.append(body)
    return bodies, [b.configmap(dict(pod_mod.MANAGED_BY)), scripts.configmap(dict(pod_mod.MANAGED_BY))]


def api(kubeconfig: Path) -> tuple[Any, client.CoreV1Api, RequestCounter]:
    ac = connect(kubeconfig)
    return ac, client.CoreV1Api(ac), ac.requests


def create(core: client.CoreV1Api, ns: str, body: dict[str, Any]) -> None:
    while True:
        try:
            core.create_namespaced_pod(ns, body)  # type: ignore[arg-type]  # the client serialises a plain dict body
            return
        except ApiException as exc:
            if exc.status not in (429, 500, 503):
                raise
            time.sleep(0.5)


def bare(kubeconfig: Path, ns: str, opts: KubernetesOptions, trials: int, in_flight: int) -> tuple[float, int]:
    bodies, cms = pod_bodies(opts, trials, in_flight)
    ac, core, counter = api(kubeconfig)
    for cm in cms:
        core.create_namespaced_config_map(ns, cm)  # type: ignore[arg-type]  # the client serialises a plain dict body
    t0 = time.monotonic()
    done: set[str] = set()
    cond = threading.Condition()
    started = threading.Event()

    def watch() -> None:
        from kubernetes.watch.watch import iter_resp_lines

        resp = core.list_namespaced_pod(
            ns,
            watch=True,
            allow_watch_bookmarks=True,
            timeout_seconds=3600,
            _preload_content=False,
            _request_timeout=(10, 3700),
        )
        started.set()
        for line in iter_resp_lines(resp):
            ev = json.loads(line)
            obj = ev["object"]
            if ev["type"] in ("ADDED", "MODIFIED") and (obj.get("status") or {}).get("phase") in (
                "Succeeded",
                "Failed",
            ):
                with cond:
                    done.add(obj["metadata"]["name"])
                    cond.notify_all()
                    if len(done) >= trials:
                        return

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    started.wait(30)
    for i, body in enumerate(bodies):
        with cond:
            while i - len(done) >= in_flight:
                cond.wait(1)
        create(core, ns, body)
    with cond:
        while len(done) < trials:
            cond.wait(1)
    wall = time.monotonic() - t0
    requests = counter.total
    for _ in range(5):  # after the measurement; deleting 2,000 pods can outlast the server's request timeout
        try:
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0, _request_timeout=120)
            break
        except ApiException as exc:
            if exc.status not in (429, 500, 503, 504):
                raise
            time.sleep(5)
    ac.close()
    return wall, requests


def _finished_after_s(pod: Any) -> float | None:
    """Seconds from the pod's creation to its container's end, by the API server's timestamps."""
    ends = [
        cs.state.terminated.finished_at
        for cs in pod.status.container_statuses or []
        if cs.state and cs.state.terminated and cs.state.terminated.finished_at
    ]
    if not ends or pod.metadata.creation_timestamp is None:
        return None
    return (max(ends) - pod.metadata.creation_timestamp).total_seconds()


def poll(kubeconfig: Path, ns: str, opts: KubernetesOptions, trials: int, in_flight: int) -> tuple[float, int, int]:
    """(wall, requests sent, requests owed by a 1 s polling design): see the module doc."""
    bodies, cms = pod_bodies(opts, trials, in_flight)
    ac, core, counter = api(kubeconfig)
    for cm in cms:
        core.create_namespaced_config_map(ns, cm)  # type: ignore[arg-type]  # the client serialises a plain dict body
    t0 = time.monotonic()
    queue = list(bodies)
    flying: dict[str, tuple[float, float]] = {}  # name -> (next poll, created at, local clock)
    finished = 0
    gets_sent = gets_owed = 0
    while finished < trials:
        while queue and len(flying) < in_flight:
            body = queue.pop(0)
            create(core, ns, body)
            now = time.monotonic()
            flying[body["metadata"]["name"]] = (now + 1.0, now)
        now = time.monotonic()
        due = [n for n, (at, _c) in flying.items() if at <= now]
        for name in due:
            p = core.read_namespaced_pod(name, ns)
            gets_sent += 1
            assert p.status is not None  # a pod read back from the server has a status
            if p.status.phase in ("Succeeded", "Failed"):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
                lived = _finished_after_s(p)
                if lived is None:  # no container end on record: the time it was in flight here
                    lived = time.monotonic() - flying[name][1]
                gets_owed += max(1, math.ceil(lived))
                del flying[name]
                finished += 1
            else:
                flying[name] = (time.monotonic() + 1.0, flying[name][1])
        if not due:
            time.sleep(max(0.0, min((at for at, _c in flying.values()), default=now + 0.05) - time.monotonic()))
    wall = time.monotonic() - t0
    requests = counter.total
    ac.close()
    return wall, requests, requests - gets_sent + gets_owed


def _own_cpu_s() -> float:
    """This process's CPU (user + system, all its threads), without the plane's processes: the engine's own work."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def headroom(
    kubeconfig: Path, ns: str, opts: KubernetesOptions, trials: int, in_flight: int, scratch: Path
) -> tuple[float, int, dict[str, Any]]:
    exp = experiment(opts, trials, in_flight)
    backend = KubernetesBackend(options=opts)
    store = Store(scratch / f"{ns}.db")
    tasks = prepare(exp)
    run_id, task_map = start(exp, tasks, store, backend)
    before = backend.requests.total  # provenance: server version, nodes, quota, limit ranges
    t0, cpu0 = time.monotonic(), _own_cpu_s()
    result = run(store, run_id, exp, task_map, backend)
    backend.sweep_harvested(force=True)
    wall = time.monotonic() - t0
    cpu = _own_cpu_s() - cpu0
    requests = backend.requests.total - before
    report = backend.request_report()
    report["cpu_s"] = cpu
    backend.close()
    outcomes = result.summary.outcomes
    if outcomes.get("passed") != trials:
        raise SystemExit(f"headroom: expected {trials} passed trials, got {outcomes}")
    return wall, requests, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--in-flight", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds each pod 'runs'")
    ap.add_argument("--no-poll", action="store_true", help="skip (b): measure headroom against (a) only")
    args = ap.parse_args()
    plane = LocalPlane(find_bin_dir())
    plane.start()
    try:
        cluster = Cluster(plane.kubeconfig, plane, None)
        names = [f"bench-node-{i}" for i in range(args.nodes)]
        for n in names:
            cluster.add_node(NodeSpec(n, cpu="64", memory="256Gi", pods="110"))
        cluster.wait_nodes_ready(names, timeout=120)
        scratch = Path(tempfile.mkdtemp(prefix="bench-k8s-"))
        load_before = os.getloadavg()
        print(
            f"{args.trials} trials, {args.in_flight} in flight, {args.nodes} kwok nodes, each pod runs "
            f"{args.duration:g}s (control plane: etcd, kube-apiserver, scheduler, controller-manager, kwok)"
        )
        print(
            f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} "
            f"on {os.cpu_count()} cpus"
        )
        rows = {}
        ns = cluster.create_namespace("bench-bare")
        rows["(a) bare create + one watch"] = bare(
            plane.kubeconfig, ns, options(ns, plane.kubeconfig, args.duration), args.trials, args.in_flight
        )
        ns = cluster.create_namespace("bench-headroom")
        wall, req, report = headroom(
            plane.kubeconfig, ns, options(ns, plane.kubeconfig, args.duration), args.trials, args.in_flight, scratch
        )
        rows["headroom KubernetesBackend"] = (wall, req)
        if not args.no_poll:
            ns = cluster.create_namespace("bench-poll")
            poll_wall, poll_sent, poll_owed = poll(
                plane.kubeconfig, ns, options(ns, plane.kubeconfig, args.duration), args.trials, args.in_flight
            )
            rows["(b) 1 s polling, sent"] = (poll_wall, poll_sent)
            rows["(b) 1 s polling, owed"] = (poll_wall, poll_owed)
        print(f"{'approach':32} {'wall s':>8} {'trials/s':>9} {'requests':>9} {'req/trial':>9}")
        for name, (wall, req) in rows.items():
            print(f"{name:32} {wall:8.1f} {args.trials / wall:9.2f} {req:9d} {req / args.trials:9.2f}")
        h = rows["headroom KubernetesBackend"]
        a = rows["(a) bare create + one watch"]
        print(
            f"throughput headroom / (a) bare: {a[0] / h[0]:.2f}  (issue 32's target: >= 0.9, at most 2.05 requests a trial)"
        )
        if not args.no_poll:
            print(f"requests per trial (b) poll / headroom, polls sent:  {poll_sent / h[1]:.1f}x  (target >= 5x)")
            print(f"requests per trial (b) poll / headroom, polls owed:  {poll_owed / h[1]:.1f}x  (target >= 5x)")
        print("headroom requests by kind:", json.dumps(report["by_kind"], sort_keys=True))
        print(
            f"headroom's own CPU (this process, user + system): {report['cpu_s']:.1f} s, "
            f"{1000 * report['cpu_s'] / args.trials:.1f} ms a trial"
        )
        load_after = os.getloadavg()
        print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    finally:
        plane.stop()


if __name__ == "__main__":
    main()
