"""Controller memory and reconcile throughput with many Trials, against a bare list in the same run.

    python benchmarks/bench_controller.py [--trials 10000] [--resync 2] [--seconds 20]

On the test control plane (tests/cluster/plane.py; binaries from scripts/k8s/build.sh) it
creates an Experiment over the bundled tasks with enough attempts for ``--trials`` trials,
and one finished Trial per planned trial (as a long sweep leaves them). Then it measures:

* **bare**: a process that only imports the Kubernetes client and lists the Trials once
  (raw JSON): the floor for time and memory of anything that reads them;
* **controller**: ``python -m orchestrator.controller`` (what the chart runs) as a process: time from start to the Experiment's
  status showing every trial, its peak and settled RSS (target: at most 150 MB), and, over
  ``--seconds`` of periodic resyncs, the reconcile latency from its own histogram, i.e.
  how many Trials a reconcile goes through per second.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402

from orchestrator.controller import tasksets  # noqa: E402
from orchestrator.controller.reconcile import run_id_of  # noqa: E402
from orchestrator.controller.resources import (  # noqa: E402
    API_VERSION,
    EXPERIMENT_PLURAL,
    GROUP,
    LABEL_CONFIGURATION,
    LABEL_EXPERIMENT,
    LABEL_RUN,
    LABEL_TASK,
    TRIAL_PLURAL,
    VERSION,
    ExperimentResourceSpec,
)
from orchestrator.engine.plan import plan  # noqa: E402
from orchestrator.spec.names import label_value, launch_name  # noqa: E402
from orchestrator.tasks.loader import load_tasks  # noqa: E402
from tests.cluster.plane import Cluster, LocalPlane, find_bin_dir, free_port, wait_for  # noqa: E402

TARGET_MB = 150
OUTCOMES = ["passed", "passed", "failed", "infra_error", "passed", "timeout"]
# Its peak is VmHWM, this process's own high-water mark: ru_maxrss carries over the parent's across fork and
# exec, so it read about 105 MB (this bench's own size) whatever the list held.
BARE = """
import json, sys, time
from kubernetes import client, config
t0 = time.perf_counter()
api = config.new_client_from_config(config_file=sys.argv[1])
resp = client.CustomObjectsApi(api).list_namespaced_custom_object("headroom.dev", "v1alpha1", sys.argv[2], "trials",
                                                                  _preload_content=False)
items = json.loads(resp.data)["items"]
seconds = time.perf_counter() - t0
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"n": len(items), "seconds": seconds, "rss_mb": hwm / 1024}))
"""


def crd_bodies() -> list[Any]:  # YAML documents, handed to the client as they are
    return [yaml.safe_load(f.read_text()) for f in sorted((REPO / "helm" / "headroom" / "crds").glob("*.yaml"))]


def _trial_crd_without_status_subresource() -> Any:
    """The chart's Trial CRD without its status subresource: a create then keeps the status it is given."""
    body = next(b for b in crd_bodies() if b["spec"]["names"]["plural"] == TRIAL_PLURAL)
    for v in body["spec"]["versions"]:
        v.pop("subresources", None)
    return body


def install_crds(cluster: Cluster, *, fill: bool) -> None:
    """The chart's CRDs; with ``fill``, the Trial CRD without its status subresource (see ``restore_trial_crd``)."""
    ext = client.ApiextensionsV1Api(cluster.api_client)
    for body in crd_bodies():
        if fill and body["spec"]["names"]["plural"] == TRIAL_PLURAL:
            body = _trial_crd_without_status_subresource()
        try:
            ext.create_custom_resource_definition(body)
        except client.exceptions.ApiException as exc:
            if exc.status != 409:
                raise
        wait_established(ext, body["metadata"]["name"])


def wait_established(ext: client.ApiextensionsV1Api, name: str) -> None:
    wait_for(
        lambda: any(
            c.type == "Established" and c.status == "True"
            for c in (ext.read_custom_resource_definition(name).status.conditions or [])  # type: ignore[union-attr]  # the server fills a CRD's status on create
        ),
        30,
        f"{name} established",
    )


def restore_trial_crd(cluster: Cluster, ns: str, probe: str) -> None:
    """Put the chart's Trial CRD (status subresource on) back before anything reads the Trials.

    A stored object keeps its status across the switch: it is a field of the object, and the
    subresource only decides which endpoint may write it. Waits until the status endpoint
    serves ``probe`` (a Trial that exists), that is until the API server runs the chart's CRD.
    """
    ext = client.ApiextensionsV1Api(cluster.api_client)
    body = next(b for b in crd_bodies() if b["spec"]["names"]["plural"] == TRIAL_PLURAL)
    name = body["metadata"]["name"]
    current = ext.read_custom_resource_definition(name)
    body["metadata"]["resourceVersion"] = current.metadata.resource_version  # type: ignore[union-attr]  # the server's object has metadata
    ext.replace_custom_resource_definition(name, body)
    wait_established(ext, name)
    custom = client.CustomObjectsApi(cluster.api_client)

    def served() -> bool:
        try:
            got = cast(
                "dict[str, Any]", custom.get_namespaced_custom_object_status(GROUP, VERSION, ns, TRIAL_PLURAL, probe)
            )
        except client.exceptions.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        if (got.get("status") or {}).get("phase") != "Finished":
            raise RuntimeError(f"Trial {probe} lost its status across the CRD switch: {got.get('status')}")
        return True

    wait_for(served, 60, "the Trial CRD's status subresource")

    def listed() -> bool:
        # The switch rebuilds the API server's cache of the Trials: until it holds them all again, a list
        # (the bare list's, the controller's) is refused (429, "storage is (re)initializing"). The same
        # list as the bare one, once, so nothing is measured before the cache is back (and none cold).
        try:
            resp: Any = custom.list_namespaced_custom_object(GROUP, VERSION, ns, TRIAL_PLURAL, _preload_content=False)
            resp.release_conn()  # a raw urllib3 response: its body is not read into this process
            return True
        except client.exceptions.ApiException as exc:
            if exc.status == 429:
                return False
            raise

    wait_for(listed, 900, "the API server's cache of the Trials after the CRD switch")


def populate(cluster: Cluster, ns: str, trials: int, procs: int, threads: int) -> tuple[str, int]:
    custom = client.CustomObjectsApi(cluster.api_client)
    bundle = tasksets.push(cluster.core, ns, REPO / "tasks").name
    tasks = load_tasks(REPO / "tasks")
    per_attempt = len(tasks) * 3
    attempts = max(1, math.ceil(trials / per_attempt))
    spec = ExperimentResourceSpec.model_validate(
        {
            "name": "bench",
            "configurations": ["1x-strict", "3x", "unbounded"],
            "attempts": attempts,
            "task_source": {"bundle": bundle},
        }
    )
    # The custom objects API returns the decoded JSON object; its client types that as object.
    exp = cast(
        "dict[str, Any]",
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            EXPERIMENT_PLURAL,
            {
                "apiVersion": API_VERSION,
                "kind": "Experiment",
                "metadata": {"name": "bench"},
                "spec": spec.model_dump(mode="json", exclude={"tasks_dir"}),
            },
        ),
    )
    run_id = run_id_of(exp)
    planned = plan(spec.model_copy(update={"tasks_dir": str(REPO / "tasks")}), tasks)
    rows = [
        (
            i,
            launch_name(run_id, p.trial_id, 0),
            {
                "experiment": "bench",
                "runId": run_id,
                "trialId": p.trial_id,
                "task": p.task_id,
                "taskDigest": "0" * 64,
                "configuration": {
                    "label": p.config.label,
                    "requestMultiplier": p.config.request_multiplier,
                    "limitMultiplier": p.config.limit_multiplier,
                },
                "attempt": p.attempt,
                "try": 0,
                "seed": p.seed,
                "order": p.order,
            },
        )
        for i, p in enumerate(planned)
    ]
    owner = {"apiVersion": API_VERSION, "kind": "Experiment", "name": "bench", "uid": exp["metadata"]["uid"]}
    t0 = time.perf_counter()
    # One request per Trial: the Trial CRD has no status subresource during the fill (install_crds),
    # so a create keeps the finished status it carries; the chart's CRD is back before anything reads
    # them. A client's work per request holds the GIL, so the requests go out from several
    # processes, each with its own connection pool and threads.
    chunks = [rows[k::procs] for k in range(procs)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(procs, mp_context=ctx) as pool:
        done = sum(pool.map(_fill, [(str(cluster.kubeconfig), ns, owner, c, threads) for c in chunks]))
    assert done == len(planned), (done, len(planned))
    restore_trial_crd(cluster, ns, rows[0][1])
    print(
        f"created {len(planned)} finished Trials in {time.perf_counter() - t0:.0f}s "
        f"({procs} processes x {threads} threads, one request each)",
        flush=True,
    )
    return run_id, len(planned)


def _fill(job: tuple[str, str, dict[str, Any], list[tuple[int, str, dict[str, Any]]], int]) -> int:
    """One fill process: create its share of the Trials, each with its finished status, one POST each.

    The body goes out as JSON bytes through the client's own connection pool (its TLS and
    credentials), without the client's per-request model handling.
    """
    from kubernetes import config

    kubeconfig, ns, owner, rows, threads = job
    api = config.new_client_from_config(config_file=kubeconfig)
    url = f"{api.configuration.host}/apis/{GROUP}/{VERSION}/namespaces/{ns}/{TRIAL_PLURAL}"
    pool = api.rest_client.pool_manager

    def one(row: tuple[int, str, dict[str, Any]]) -> None:
        i, name, spec = row
        body = {
            "apiVersion": API_VERSION,
            "kind": "Trial",
            "metadata": {
                "name": name,
                "labels": {
                    LABEL_EXPERIMENT: "bench",
                    LABEL_RUN: label_value(spec["runId"]),
                    LABEL_TASK: label_value(spec["task"]),
                    LABEL_CONFIGURATION: label_value(spec["configuration"]["label"]),
                },
                "ownerReferences": [{**owner, "controller": True}],
            },
            "spec": spec,
            "status": finished_status(i),
        }
        for _ in range(5):
            r = pool.request(
                "POST", url, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, timeout=60
            )
            if r.status in (200, 201, 409):  # 409: an earlier try of this POST landed
                return
            if r.status not in (429, 500, 503, 504):
                raise RuntimeError(f"creating Trial {name}: HTTP {r.status} {r.data[:300]!r}")
            time.sleep(1)
        raise RuntimeError(f"creating Trial {name}: still HTTP {r.status}")

    with ThreadPoolExecutor(threads) as pool_:
        list(pool_.map(one, rows))
    return len(rows)


def finished_status(i: int) -> dict[str, Any]:
    """A settled try's status as the controller writes it, with about 1 KB of evidence."""
    outcome = OUTCOMES[i % len(OUTCOMES)]
    status = {
        "phase": "Finished",
        "outcome": outcome,
        "final": True,
        "reason": "oom_killed" if outcome == "infra_error" else None,
        "reward": 1.0 if outcome == "passed" else 0.0,
        "node": f"kwok-node-{i % 50}",
        "qosClass": "Burstable",
        "enforcement": "kubernetes",
        "requestCpus": 1.0,
        "requestMemoryBytes": 67108864,
        "peakMemoryBytes": 50_000_000,
        "durationSeconds": 3.5,
        "timings": {
            "queued": "2026-11-30T10:00:00Z",
            "scheduled": "2026-11-30T10:00:01Z",
            "started": "2026-11-30T10:00:02Z",
            "finished": "2026-11-30T10:00:06Z",
            "agentSeconds": 2.5,
            "verifierSeconds": 1.0,
        },
        "evidence": {
            "enforcement": "kubernetes",
            "qos_class": "Burstable",
            "extra": {"events": [{"message": "x" * 200}] * 5},
        },
    }
    return {k: v for k, v in status.items() if v is not None}


def bare_list(kubeconfig: Path, ns: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", BARE, str(kubeconfig), ns], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the bare list failed: {proc.stderr[-2000:]}")
    return cast("dict[str, Any]", json.loads(proc.stdout))


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def histogram(text: str, name: str, result: str = "ok") -> tuple[float, float]:
    from prometheus_client.parser import text_string_to_metric_families

    total = count = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.labels.get("result") == result and s.name == f"{name}_sum":
                total = s.value
            if s.labels.get("result") == result and s.name == f"{name}_count":
                count = s.value
    return total, count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--resync", type=float, default=2.0, help="controller resync period during the measurement")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long to measure periodic reconciles")
    ap.add_argument("--repeats", type=int, default=3, help="bare list repeats (median)")
    ap.add_argument("--fill-processes", type=int, default=4, help="processes creating the Trials")
    ap.add_argument("--fill-threads", type=int, default=8, help="threads per fill process")
    args = ap.parse_args()

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    plane = LocalPlane(find_bin_dir())
    plane.start()
    cluster = Cluster(plane.kubeconfig, plane, None)
    ctl: subprocess.Popen[bytes] | None = None
    try:
        install_crds(cluster, fill=True)
        ns = cluster.create_namespace(prefix="bench")
        run_id, n = populate(cluster, ns, args.trials, args.fill_processes, args.fill_threads)

        bare = [bare_list(plane.kubeconfig, ns) for _ in range(args.repeats)]
        assert all(b["n"] == n for b in bare)
        bare_s = statistics.median(b["seconds"] for b in bare)
        bare_mb = statistics.median(b["rss_mb"] for b in bare)

        port = free_port()
        log = Path(tempfile.mkdtemp(prefix="bench-ctl-")) / "controller.log"
        t0 = time.perf_counter()
        with open(log, "wb") as out:
            ctl = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "orchestrator.controller",
                    "--kubeconfig",
                    str(plane.kubeconfig),
                    "--namespace",
                    ns,
                    "--metrics-address",
                    f"127.0.0.1:{port}",
                    "--resync-seconds",
                    str(args.resync),
                    "--workers",
                    "1",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        proc = psutil.Process(ctl.pid)
        peak = [0.0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                try:
                    peak[0] = max(peak[0], proc.memory_info().rss / 2**20)
                except psutil.Error:
                    return
                time.sleep(0.05)

        threading.Thread(target=sample, daemon=True).start()
        custom = client.CustomObjectsApi(cluster.api_client)

        def complete() -> bool:
            exp = cast(
                "dict[str, Any]", custom.get_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, "bench")
            )
            st = exp.get("status") or {}
            if ctl.poll() is not None:
                raise RuntimeError(f"controller exited: {log.read_text()[-2000:]}")
            return st.get("progress") == f"{n}/{n}"

        wait_for(complete, 600, "the Experiment status to count every Trial")
        first_s = time.perf_counter() - t0
        s0, c0 = histogram(scrape(port), "headroom_reconcile_duration_seconds")
        time.sleep(args.seconds)
        s1, c1 = histogram(scrape(port), "headroom_reconcile_duration_seconds")
        settled_mb = proc.memory_info().rss / 2**20
        stop.set()
        errors = histogram(scrape(port), "headroom_reconcile_duration_seconds", "error")[1]
        per = (s1 - s0) / max(1.0, c1 - c0)
        print(f"\n{n} Trials (finished), one Experiment, run {run_id}")
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'':32}{'bare list':>14}{'controller':>14}{'ratio':>9}")
        print(
            f"{'time to read them (s)':32}{bare_s:>14.2f}{first_s:>14.2f}{first_s / bare_s:>9.2f}"
            "   (controller: start -> status counts all)"
        )
        print(
            f"{'RSS peak (MB)':32}{bare_mb:>14.1f}{peak[0]:>14.1f}{peak[0] / bare_mb:>9.2f}"
            f"   target <= {TARGET_MB} MB: {'met' if peak[0] <= TARGET_MB else 'MISSED'}"
        )
        print(f"{f'RSS after {args.seconds:.0f}s of resyncs (MB)':32}{'':>14}{settled_mb:>14.1f}")
        print(
            f"reconcile of the {n}-Trial Experiment: {per * 1000:.1f} ms mean over {c1 - c0:.0f} "
            f"reconciles -> {n / per:,.0f} Trials/s; reconcile errors: {errors:.0f}"
        )
        return 0
    finally:
        if ctl is not None and ctl.poll() is None:
            ctl.kill()
            ctl.wait(10)
        cluster.cleanup()
        plane.stop()


if __name__ == "__main__":
    raise SystemExit(main())
