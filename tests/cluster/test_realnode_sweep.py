"""A sweep of the bundled tasks on the real node, beside the same sweep on the local backend.

``headroom sweep --backend kubernetes`` at 1x-strict, 3x and unbounded runs every trial as
a Pod on the real kubelet + containerd node; the kernel OOM-kills the memory spikes, the
kubelet reports it, and the engine classifies it ``oom_killed``. The local backend runs
the same tasks under its own cgroups in the same test; the two infra-error rates are
printed side by side and must agree within their 95 % intervals.
"""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_run import headroom as run_cli

from .conftest import RealNodeHandle, bundled_tasks_at
from .plane import REPO, Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]

CONFIGS = "1x-strict,1x/3x,unbounded"
ATTEMPTS = 1
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def sweep(tmp_path: Path, tasks: Path, backend: str, *extra: str) -> dict[str, Any]:
    store = tmp_path / f"{backend}.db"
    proc = run_cli(
        "sweep",
        str(tasks),
        "--backend",
        backend,
        "--multipliers",
        CONFIGS,
        "--attempts",
        str(ATTEMPTS),
        "--concurrency",
        "3",
        "--store",
        str(store),
        "--format",
        "json",
        *extra,
        timeout=1500,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def by_label(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["label"]: c for c in report["configurations"]}


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["low"] <= b["high"] and b["low"] <= a["high"]


def test_bundled_sweep_on_the_real_node_against_the_local_backend(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="sweep", labels=RESTRICTED)
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "image": real_node.image,
                # the base image has no WORKDIR; / is not writable for uid 1000
                "kubernetes": real_node.kubernetes_options(cluster, ns, workdir="/tmp"),
            }
        )
    )
    # The bundled tasks at half a CPU each, on both backends: three trial pods fit on the node at once (at their
    # own 1 CPU, one did); what this test is about, their memory and its limits, is the bundled tasks'.
    tasks = bundled_tasks_at(tmp_path / "tasks")
    # both sweeps at once (each its own process and store): the local one runs while the node's pods do
    with ThreadPoolExecutor(2) as pool:
        k8s_run = pool.submit(sweep, tmp_path, tasks, "kubernetes", "--experiment", str(experiment))
        local_run = pool.submit(sweep, tmp_path, tasks, "local")
        k8s, local = k8s_run.result(), local_run.result()
    kc, lc = by_label(k8s), by_label(local)

    rows = [f"{'config':<10} {'kubernetes infra rate':>28} {'local infra rate':>28}   oom_killed k8s/local"]
    for label in kc:
        k, lo = kc[label]["infra_error_rate"], lc[label]["infra_error_rate"]
        rows.append(
            f"{label:<10} {k['k']:>3}/{k['n']:<3} {k['estimate']:6.1%} [{k['low']:.2f},{k['high']:.2f}]"
            f" {lo['k']:>3}/{lo['n']:<3} {lo['estimate']:6.1%} [{lo['low']:.2f},{lo['high']:.2f}]"
            f"   {kc[label]['infra_reasons'].get('oom_killed', 0)}/{lc[label]['infra_reasons'].get('oom_killed', 0)}"
        )
    print("\n".join(rows))

    strict, roomy = kc["1x-strict"], kc["1x/3x"]
    # the kernel's OOM kills, reported by the kubelet, classified oom_killed
    assert strict["infra_reasons"].get("oom_killed", 0) > 0
    assert strict["infra_error_rate"]["k"] > roomy["infra_error_rate"]["k"]
    assert kc["unbounded"]["infra_reasons"].get("oom_killed", 0) == 0
    # every try ran on the real node, and its peak memory came from the container's cgroup
    # (the in-pod runner reads memory.max_usage_in_bytes / memory.peak)
    with sqlite3.connect(tmp_path / "kubernetes.db") as db:
        rows_db = db.execute(
            "SELECT e.peak_memory_bytes, v.json FROM executions e JOIN evidence v USING (run_id, trial_id, try)"
        ).fetchall()
    assert len(rows_db) == 3 * ATTEMPTS * len(list((REPO / "tasks").glob("*/task.toml")))
    assert {json.loads(ev)["extra"]["node"] for _, ev in rows_db} == {real_node.name}
    assert all(peak and peak > 0 for peak, _ in rows_db)
    # the two backends agree within noise
    for label in kc:
        assert overlap(kc[label]["infra_error_rate"], lc[label]["infra_error_rate"]), label
