"""CPU time on Pods, measured on the real node (issue 23, item 4).

The in-pod runner reads the container cgroup's ``cpu.stat`` (usage and the quota's
throttling) around each step, beside the OOM counter; the backend records the sum as the
try's ``cpu_time_s`` and the counters as ``extra.cpu_throttling``, as the local backend does
from its trial cgroup. So ``headroom calibrate`` gives a cluster run a *measured* CPU floor
instead of the spec fallback.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from orchestrator.commands.runs.calibrate import calibration_document
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli

from .conftest import RealNodeHandle, bundled_tasks_at
from .plane import REPO, Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
ATTEMPTS = 5  # calibrate's minimum of CPU-time measurements per task


def test_a_cluster_run_records_cpu_time_and_calibrate_measures_its_cpu_floor(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="cpu", labels=RESTRICTED)
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "image": real_node.image,
                "kubernetes": real_node.kubernetes_options(cluster, ns, workdir="/tmp"),
            }
        )
    )
    store = tmp_path / "k8s.db"
    # prime-count at half a CPU: three of its pods fit on the node at once (at 1 CPU one did); it still computes
    # for real, and its 1x-strict limit is then half a CPU, whose quota the runner counts
    tasks = bundled_tasks_at(tmp_path / "tasks")
    proc = run_cli(
        "sweep",
        str(tasks),
        "--task",
        "prime-count",
        "--backend",
        "kubernetes",
        "--experiment",
        str(experiment),
        "--multipliers",
        "1x-strict,unbounded",
        "--attempts",
        str(ATTEMPTS),
        "--concurrency",
        "3",
        "--store",
        str(store),
        "--format",
        "none",
        timeout=1500,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT t.config_label, e.outcome, e.cpu_time_s, v.json FROM executions e "
            "JOIN trials t USING (run_id, trial_id) JOIN evidence v USING (run_id, trial_id, try) "
            "WHERE e.final = 1"
        ).fetchall()
    assert len(rows) == 2 * ATTEMPTS
    for label, outcome, cpu, ev in rows:
        extra = json.loads(ev)["extra"]
        assert extra["node"] == real_node.name
        # the container cgroup's counter: the task's work is in it (prime-count computes for real)
        assert cpu is not None and cpu > 0, (label, outcome, extra.get("runner"))
        if label == "1x-strict":  # a CPU limit: the quota's periods are counted
            assert extra["cpu_throttling"]["nr_periods"] > 0, extra

    s = Store.open_existing(store)
    try:
        doc = calibration_document(s, s.run().run_id)
    finally:
        s.close()
    (band,) = doc["bands"]
    assert band["cpu"]["n"] >= ATTEMPTS, band["cpu"]
    assert band["cpu_floor_source"].startswith("measured"), band["cpu_floor_source"]
    assert band["cpu"]["enforcement"] == {"kubernetes": band["cpu"]["n"]}
    print("cluster CPU floor:", band["floor_cpus"], band["cpu_floor_source"], band["cpu"])


#: The agent writes a passing runner report where the runner writes its own (the termination log, and
#: its stdout for FallbackToLogsOnError), then kills the runner (its parent: same container, same uid).
FORGE_AND_KILL = (
    "printf 'v=1\\nagent_exit=0\\nagent_cs=10\\nagent_timeout=0\\nagent_oom0=0\\nagent_oom1=0\\n"
    "verifier_exit=0\\nverifier_cs=10\\nverifier_timeout=0\\nverifier_oom0=0\\nverifier_oom1=0\\n"
    "reward_file=reward.txt\\nreward_size=2\\nreward_b64=MQo=\\n' | tee /dev/termination-log /proc/$PPID/fd/1 "
    ">/dev/null 2>&1; kill -KILL $PPID"
)


def test_an_agent_that_forges_the_report_and_kills_the_runner_fails_once(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="forge", labels=RESTRICTED)
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "image": real_node.image,
                "kubernetes": real_node.kubernetes_options(cluster, ns, workdir="/tmp"),
            }
        )
    )
    store = tmp_path / "forge.db"
    proc = run_cli(
        "sweep",
        str(REPO / "tasks"),
        "--task",
        "csv-report",
        "--backend",
        "kubernetes",
        "--experiment",
        str(experiment),
        "--multipliers",
        "unbounded",
        "--attempts",
        "1",
        "--retries",
        "2",
        "--agent-command",
        FORGE_AND_KILL,
        "--store",
        str(store),
        "--format",
        "none",
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT e.outcome, e.reason, e.final, v.json FROM executions e "
            "JOIN evidence v USING (run_id, trial_id, try)"
        ).fetchall()
    assert [(o, r, f) for o, r, f, _ in rows] == [("failed", "unjudged_state", 1)], rows  # one try, not re-rolled
    ev = json.loads(rows[0][3])
    assert "runner was stopped during the try" in ev["agent_fault"], ev
    assert ev["reward"] is None
