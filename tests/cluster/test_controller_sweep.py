"""The controller runs an Experiment over the bundled tasks to completion on the kwok plane.

The controller is a real process out of cluster, authenticated as the chart's
ServiceAccount (so every request passes the chart's RBAC), driving the real Pod backend.
Only the containers are simulated (tests/cluster/run_controller.py decides how each try ends).
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from orchestrator.controller.resources import EXPERIMENT_PLURAL, GROUP, TRIAL_PLURAL, VERSION
from tests.cli_run import headroom as run_cli

from .controller_support import ControllerProcess, crds, helm_install, service_account_kubeconfig  # noqa: F401
from .controller_support import headroom as _cli
from .plane import FAKE_NODE_TOLERATION, REPO, Cluster, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MEMORY_SPIKE = {"bundle-digest", "bundle-digest-xl", "dep-resolve", "word-index"}
CONFIGS = ["1x-strict", "1x/3x", "unbounded"]


def experiment_file(tmp: Path, name: str, attempts: int, concurrency: int) -> Path:
    f = tmp / f"{name}.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "tasks_dir": str(REPO / "tasks"),
                "configurations": ["1x-strict", "3x", "unbounded"],
                "attempts": attempts,
                "concurrency": concurrency,
                "seed": 7,
                "agent": {"kind": "oracle"},
                "retry": {"max_retries": 1},
                "kubernetes": {
                    "node_selector": {"type": "kwok"},
                    "tolerations": [dict(FAKE_NODE_TOLERATION)],
                    "pending_deadline_s": 4,
                },
            }
        )
    )
    return f


def headroom(cluster: Cluster, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    return _cli(cluster, *args, kubeconfig=kubeconfig, timeout=300)  # its commands wait on the controller


def setup(cluster: Cluster, tmp: Path, prefix: str) -> tuple[str, Path]:
    ns = cluster.create_namespace(prefix=prefix, labels={"pod-security.kubernetes.io/enforce": "restricted"})
    r = helm_install(cluster, ns, "--set", "replicaCount=1", "--skip-crds", wait=False)
    assert r.returncode == 0, r.stderr
    return ns, service_account_kubeconfig(cluster, ns, "headroom", tmp / "sa.kubeconfig")


def trials(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    return client.CustomObjectsApi(cluster.api_client).list_namespaced_custom_object(
        GROUP, VERSION, ns, TRIAL_PLURAL, label_selector=f"headroom.dev/experiment={name}"
    )["items"]


def experiment(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(cluster.api_client).get_namespaced_custom_object(
        GROUP, VERSION, ns, EXPERIMENT_PLURAL, name
    )


def expected(task: str, label: str, attempt: int) -> tuple[str, str | None]:
    if task in MEMORY_SPIKE and label == "1x-strict":
        return "infra_error", "oom_killed"
    if task == "prime-count" and label == "unbounded" and attempt == 0:
        return "infra_error", "unschedulable"
    if task == "crash-triage":
        return "failed", None
    return "passed", None


#: What an API server restart can do to a try in flight: hold its pod Pending past the deadline, or
#: keep the backend from creating it for longer than it waits out API errors.
DISRUPTION_REASONS = {"unschedulable", "api_error"}


def _designed_retry(t: dict[str, Any]) -> bool:
    """The evicted try (dedup-index under 1x/3x, attempt 0) or the unschedulable one (prime-count, unbounded, 0)."""
    spec = t["spec"]
    where = (spec["task"], spec["configuration"]["label"], spec["attempt"], spec["try"])
    return where in {("dedup-index", "1x/3x", 0, 0), ("prime-count", "unbounded", 0, 0)}


def wait_complete(cluster: Cluster, ns: str, name: str, ctl: ControllerProcess, timeout: float) -> None:
    def complete() -> bool:
        assert ctl.alive(), ctl.log.read_text()[-4000:]
        return (experiment(cluster, ns, name).get("status") or {}).get("phase") == "Complete"

    try:
        wait_for(complete, timeout, f"Experiment {name} to complete")
    except TimeoutError as exc:
        phases = Counter((t.get("status") or {}).get("phase", "-") for t in trials(cluster, ns, name))
        pods = Counter(p.status.phase for p in cluster.core.list_namespaced_pod(ns).items)
        status = experiment(cluster, ns, name).get("status") or {}
        raise AssertionError(
            f"{exc}; trials by phase {dict(phases)}; pods by phase {dict(pods)}; "
            f"status {json.dumps({k: v for k, v in status.items() if k != 'cluster'})[:1500]}; "
            f"controller log tail:\n{ctl.log.read_text()[-6000:]}"
        ) from None


def check_ledger(items: list[dict[str, Any]], planned: int) -> dict[str, dict[str, Any]]:
    """Exactly one final result per planned trial, every try on record, nothing twice."""
    by_trial: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in items:
        by_trial[t["spec"]["trialId"]].append(t)
    assert len(by_trial) == planned
    finals = {}
    for tid, tries in by_trial.items():
        tries.sort(key=lambda t: t["spec"]["try"])
        assert [t["spec"]["try"] for t in tries] == list(range(len(tries))), tid  # no gap, no duplicate
        assert all(t["status"]["phase"] == "Finished" for t in tries), (
            tid,
            [(t["status"]["phase"], t["status"].get("message")) for t in tries],
        )
        final = [t for t in tries if t["status"].get("final")]
        assert len(final) == 1 and final[0] is tries[-1], tid
        for earlier, later in zip(tries, tries[1:]):
            assert later["spec"]["retryOf"] == earlier["metadata"]["name"]
        finals[tid] = final[0]
    return finals


def test_reconciles_the_bundled_tasks_to_completion(cluster: Cluster, crds: None, tmp_path: Path) -> None:
    ns, kc = setup(cluster, tmp_path, "sweep")
    r = headroom(cluster, "cluster", "submit", str(experiment_file(tmp_path, "demo", 2, 8)), "-n", ns)
    assert r.returncode == 0, r.stderr
    ctl = ControllerProcess(kc, ns, tmp_path / "controller.log", "--resync-seconds", "5", simulated=True).start()
    try:
        wait_complete(cluster, ns, "demo", ctl, 240)
        items = trials(cluster, ns, "demo")
        finals = check_ledger(items, 10 * 3 * 2)
        for tid, t in finals.items():
            task, label, attempt = t["spec"]["task"], t["spec"]["configuration"]["label"], t["spec"]["attempt"]
            assert (t["status"]["outcome"], t["status"].get("reason")) == expected(task, label, attempt), (
                tid,
                t["status"],
            )
        assert len(items) == 62  # one try per trial, plus a retry of the evicted and of the unschedulable one
        evicted = [t for t in items if t["status"].get("reason") == "evicted"]
        assert len(evicted) == 1 and evicted[0]["status"]["final"] is False  # retried ...
        retry = next(t for t in items if t["spec"].get("retryOf") == evicted[0]["metadata"]["name"])
        assert retry["status"]["outcome"] == "passed" and retry["status"]["final"] is True  # ... and passed
        # Where and how each try ran, and its owner chain.
        exp = experiment(cluster, ns, "demo")
        for t in items:
            assert t["metadata"]["ownerReferences"][0]["uid"] == exp["metadata"]["uid"]
            assert t["status"]["qosClass"] in ("Guaranteed", "Burstable")
            assert t["status"]["timings"]["queued"] and t["status"]["timings"]["finished"]
            if t["status"].get("reason") != "unschedulable":
                assert t["status"]["node"].startswith("kwok-node-"), t["status"]
                assert t["status"]["timings"]["scheduled"], t["status"]
        # The Experiment's status is the Trials' count.
        st = exp["status"]
        assert st["progress"] == "60/60" and st["observedGeneration"] == exp["metadata"]["generation"]
        by_conf = {c["configuration"]: c for c in st["configurations"]}
        assert list(by_conf) == CONFIGS
        for label in CONFIGS:
            mine = [t for t in finals.values() if t["spec"]["configuration"]["label"] == label]
            c = by_conf[label]
            assert c["finished"] == len(mine) == 20
            assert c["infraError"] == sum(t["status"]["outcome"] == "infra_error" for t in mine)
            assert c["passed"] == sum(t["status"]["outcome"] == "passed" for t in mine)
        assert by_conf["1x-strict"]["infraError"] == 8 and by_conf["1x-strict"]["infraErrorRate"]["low"] > 0.15
        assert by_conf["1x/3x"]["retried"] == 1 and by_conf["unbounded"]["retried"] == 1
        unsched = sorted(
            (t for t in items if t["status"].get("reason") == "unschedulable"), key=lambda t: t["spec"]["try"]
        )
        assert [(t["spec"]["try"], t["status"]["final"]) for t in unsched] == [(0, False), (1, True)]  # retried once
        conds = {c["type"]: c["status"] for c in st["conditions"]}
        assert conds == {"Planned": "True", "Progressing": "False", "Complete": "True"}
        assert st["cluster"]["kubernetes"]["server_version"]["git_version"].startswith("v1.")
        assert st["cluster"]["kubernetes"]["nodes"].startswith("not readable")  # nodeProvenance is off: no node reads
        # Events on the Experiment.
        reasons = Counter(e.reason for e in cluster.events_for(ns, "demo"))
        assert reasons["Started"] == 1 and reasons["Completed"] == 1 and reasons["TrialInfraError"] >= 10
        # Metrics agree with the Trials.
        counted = Counter(
            (t["spec"]["configuration"]["label"], t["status"]["outcome"], t["status"].get("reason") or "")
            for t in finals.values()
        )
        for (label, outcome, reason), n in counted.items():
            assert (
                ctl.metric("headroom_trials", experiment="demo", configuration=label, outcome=outcome, reason=reason)
                == n
            )
        assert ctl.metric("headroom_trial_oom_kills_total", experiment="demo", configuration="1x-strict") == 8
        assert (
            ctl.metric(
                "headroom_trial_tries_settled_total",
                experiment="demo",
                configuration="1x/3x",
                outcome="infra_error",
                reason="evicted",
                final="false",
            )
            == 1
        )
        assert ctl.metric("headroom_kube_api_request_errors_total", resource="trials") in (None, 0)
        assert (ctl.metric("headroom_reconcile_duration_seconds_count", result="ok") or 0) > 0
        # Pods are gone once their results are in (finalizers released, harvested pods deleted).
        wait_for(
            lambda: not cluster.core.list_namespaced_pod(ns, label_selector="headroom.dev/experiment=demo").items,
            60,
            "trial pods deleted",
        )
        # JSON logs carry the experiment and trial ids.
        lines = [json.loads(line) for line in ctl.log.read_text().splitlines() if line.startswith("{")]
        settled = [x for x in lines if x.get("event") == "trial settled"]
        assert len(settled) == len(items) and all(x.get("experiment") == "demo" and x.get("trial") for x in settled)
        # Export: the same store a local run writes; report works unchanged.
        store = tmp_path / "demo.db"
        r = headroom(cluster, "cluster", "export", "demo", "-n", ns, "--store", str(store))
        assert r.returncode == 0, r.stderr
        rep = run_cli("report", "--store", str(store), "--format", "json", cwd=REPO)
        assert rep.returncode == 0, rep.stderr
        doc = json.loads(rep.stdout)
        text = json.dumps(doc)
        assert "oom_killed" in text and "unschedulable" in text
        import sqlite3

        db = sqlite3.connect(store)
        rows = db.execute("SELECT outcome, reason, COUNT(*) FROM executions WHERE final=1 GROUP BY 1,2").fetchall()
        assert sum(n for _, _, n in rows) == 60
        assert dict(((o, r or ""), n) for o, r, n in rows) == dict(
            Counter((t["status"]["outcome"], t["status"].get("reason") or "") for t in finals.values())
        )
        assert db.execute("SELECT COUNT(*) FROM executions WHERE final=0").fetchone()[0] == 2  # the two retried tries
    finally:
        ctl.stop()


def _restart_apiserver(cluster: Cluster) -> None:
    import ssl

    assert cluster.plane is not None
    api = next(c for c in cluster.plane.components if c.name == "kube-apiserver")
    api.stop()
    api.start()
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE

    def ready() -> bool:
        try:
            cluster.core.list_namespace(limit=1)
            return True
        except Exception:
            return False

    wait_for(ready, 90, "the API server back")


def test_a_crash_between_the_handle_write_and_the_pod_create_reruns_the_try_not_abandons_it(
    cluster: Cluster, crds: None, tmp_path: Path
) -> None:
    """Creates are asynchronous, so a Trial can name a pod that was never created. A controller
    dying right then left a try that never ran, which its successor used to abandon as lost."""
    ns, kc = setup(cluster, tmp_path, "unborn")
    spec = tmp_path / "unborn.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                **yaml.safe_load(experiment_file(tmp_path, "unborn", 1, 1).read_text()),
                "tasks": ["csv-report"],
                "configurations": ["1x-strict"],
            }
        )
    )
    assert headroom(cluster, "cluster", "submit", str(spec), "-n", ns).returncode == 0
    marker, log = tmp_path / "crashed", tmp_path / "controller.log"
    first = ControllerProcess(
        kc, ns, log, "--resync-seconds", "3", simulated=True, env={"HEADROOM_TEST_CRASH_BEFORE_CREATE": str(marker)}
    ).launch()
    wait_for(lambda: not first.alive(), 60, "the controller to die before its first create")
    assert marker.exists(), log.read_text()[-3000:]
    [unborn] = trials(cluster, ns, "unborn")
    assert unborn["status"]["pod"] == marker.read_text()
    assert not cluster.core.list_namespaced_pod(ns, label_selector="headroom.dev/experiment=unborn").items

    ctl = ControllerProcess(kc, ns, log, "--resync-seconds", "3", simulated=True).start()
    try:
        wait_complete(cluster, ns, "unborn", ctl, 120)
        items = trials(cluster, ns, "unborn")
        final = check_ledger(items, 1)  # one try, Finished: not abandoned and run again
        assert len(items) == 1 and final["csv-report:1x-strict:0"]["status"]["outcome"] == "passed", items
        assert "try resubmitted: its pod was never created" in log.read_text()
    finally:
        ctl.stop()


def test_kill_9_ten_times_and_an_apiserver_restart_lose_and_duplicate_nothing(
    cluster: Cluster, crds: None, tmp_path: Path
) -> None:
    if cluster.plane is None:
        pytest.skip("restarting the API server needs the local plane")
    ns, kc = setup(cluster, tmp_path, "crash")
    r = headroom(cluster, "cluster", "submit", str(experiment_file(tmp_path, "crashy", 2, 10)), "-n", ns)
    assert r.returncode == 0, r.stderr
    rng = random.Random(20261130)
    kills = 0
    log = tmp_path / "controller.log"
    ctl = ControllerProcess(kc, ns, log, "--resync-seconds", "3", simulated=True).start()
    try:
        in_flight_at_kill = []
        while kills < 10:
            time.sleep(rng.uniform(0.3, 3.0))
            in_flight_at_kill.append(
                sum(
                    1
                    for p in cluster.core.list_namespaced_pod(ns, label_selector="headroom.dev/experiment=crashy").items
                    if p.status.phase in ("Pending", "Running")
                )
            )
            ctl.kill9()
            kills += 1
            if kills == 5:
                _restart_apiserver(cluster)
            ctl = ControllerProcess(kc, ns, log, "--resync-seconds", "3", simulated=True).start()

        wait_complete(cluster, ns, "crashy", ctl, 300)
        items = trials(cluster, ns, "crashy")
        finals = check_ledger(items, 60)  # nothing lost, no try twice, no abandoned try
        for tid, t in finals.items():
            assert (t["status"]["outcome"], t["status"].get("reason")) == expected(
                t["spec"]["task"], t["spec"]["configuration"]["label"], t["spec"]["attempt"]
            ), (tid, t["status"])
        # Each try ran in exactly one pod: the pod events never name two pods (two uids) for one Trial.
        uids: dict[str, set[str]] = defaultdict(set)
        for e in cluster.core.list_namespaced_event(ns).items:
            if e.involved_object.kind == "Pod" and e.involved_object.name.startswith("crashy-"):  # trial pods only
                uids[e.involved_object.name].add(e.involved_object.uid)
        assert uids and all(len(u) == 1 for u in uids.values()), {k: v for k, v in uids.items() if len(v) > 1}
        assert set(uids) <= {t["metadata"]["name"] for t in items}
        st = experiment(cluster, ns, "crashy")["status"]
        # 60 + the designed retries (the evicted try and the unschedulable one). The API server's restart
        # may add more: a pod created just before it can sit Pending past the 4 s pending deadline while
        # the scheduler reconnects, and is rightly classified unschedulable and retried (this is how the
        # CI run of 2026-11-30 got 64). Any such extra
        # try must be a non-final infrastructure error of that kind, never a second result.
        designed = [
            t
            for t in items
            if t["status"].get("reason") in ("evicted", "unschedulable")
            and not t["status"]["final"]
            and _designed_retry(t)
        ]
        extra = [t for t in items if not t["status"]["final"] and t not in designed]
        assert len(designed) == 2, [t["status"] for t in designed]
        assert all(
            t["status"]["outcome"] == "infra_error" and t["status"].get("reason") in DISRUPTION_REASONS for t in extra
        ), [(t["metadata"]["name"], t["status"]) for t in extra]
        assert st["progress"] == "60/60" and st["tries"] == len(items) == 62 + len(extra)
        assert sum(1 for n in in_flight_at_kill if n) >= 3, in_flight_at_kill  # killed with live pods to adopt
        print(
            f"\n10 kill -9s + 1 API server restart: {len(items)} tries for 60 trials, all final, "
            f"{len(extra)} retried after the restart ({Counter(t['status'].get('reason') for t in extra)}), "
            f"{len(uids)} pods, none twice; live trial pods at each kill: {in_flight_at_kill}"
        )
    finally:
        ctl.stop()
