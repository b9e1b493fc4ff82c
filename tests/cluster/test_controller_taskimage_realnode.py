"""An Experiment that names its task set as an image (`taskSource.image`), run by the real controller
on the real node, with no registry.

The task-set image is built by `headroom tasks image` (two bundled tasks on the project's Debian
base) with the session's private dockerd and imported into the real node's
containerd (``RealNode.import_image``): what a push and a pull would do. The controller runs out
of cluster as the chart's ServiceAccount (so its Role is what allows the catalog pod, its log and
the catalog ConfigMap), and never sees the task folder: it learns the set from the catalog pod's
log, and trial pods copy their files with the init container. A second Experiment over the same
image reads the cached catalog: the catalog pod runs once. One task carries an input too big for
a ConfigMap bundle, which only the image can deliver. An image the node lacks is reported on the
Experiment's Planned condition (TasksUnavailable: ErrImageNeverPull).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from orchestrator.controller import taskimage
from orchestrator.controller.tasksets import bundles
from orchestrator.errors import SpecError
from orchestrator.tasks.loader import load_tasks
from tests.cli_run import headroom as run_cli
from tests.docker.fixtures import DockerEnv

from .conftest import RealNodeHandle
from .controller_support import (  # noqa: F401
    ControllerProcess,
    crds,
    headroom,
    helm_install,
    service_account_kubeconfig,
)
from .plane import REPO, Cluster, wait_for
from .test_controller_sweep import experiment, trials, wait_complete

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

TASKS = ["word-index", "csv-report"]
TASK_SET_IMAGE = "headroom.local/test-task-set:two"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def task_set(tmp: Path) -> Path:
    """Two bundled tasks; word-index carries 1.5 MiB more input, too big for a ConfigMap bundle."""
    src = tmp / "tasks"
    src.mkdir()
    for t in TASKS:
        subprocess.run(["cp", "-a", str(REPO / "tasks" / t), str(src / t)], check=True)
    blob = os.urandom(3 << 19)
    (src / "word-index" / "environment" / "inputs.bin").write_bytes(blob)
    # its verifier fails the trial unless the input reached the pod byte for byte
    test_sh = src / "word-index" / "tests" / "test.sh"
    lines = test_sh.read_text().splitlines(keepends=True)
    lines.insert(
        2,
        f'echo "{hashlib.sha256(blob).hexdigest()}  $HEADROOM_TASK_DIR/environment/inputs.bin" '
        '| sha256sum -c - || { echo 0 > "$HEADROOM_LOGS_DIR/reward.txt"; exit 1; }\n',
    )
    test_sh.write_text("".join(lines))
    return src


def build_task_set_image(docker_env: DockerEnv, src: Path) -> str:
    r = run_cli(
        "tasks",
        "image",
        str(src),
        "--tag",
        TASK_SET_IMAGE,
        "--base",
        docker_env.base_image,
        env={"DOCKER_HOST": docker_env.host},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == TASK_SET_IMAGE
    return TASK_SET_IMAGE


def test_an_experiment_over_a_task_set_image_runs_on_the_real_node(
    cluster: Cluster, real_node: RealNodeHandle, docker_env: DockerEnv, crds: None, tmp_path: Path
) -> None:
    node = real_node.node
    if node is None:
        pytest.skip("needs the local plane's real node (the image is imported into its containerd)")
    src = task_set(tmp_path)
    with pytest.raises(SpecError, match="ConfigMap"):
        bundles(load_tasks(src))  # `headroom tasks push` cannot deliver this set
    ref = build_task_set_image(docker_env, src)
    assert ref in node.import_image(ref, docker_host=docker_env.host)

    ns = cluster.create_namespace(prefix="timg", labels=RESTRICTED)
    r = helm_install(cluster, ns, "--set", "replicaCount=1", "--skip-crds", wait=False)
    assert r.returncode == 0, r.stderr
    kc = service_account_kubeconfig(cluster, ns, "headroom", tmp_path / "sa.kubeconfig")
    ctl = ControllerProcess(kc, ns, tmp_path / "controller.log", "--resync-seconds", "3").start()
    local = {t.id: t.digest for t in load_tasks(src)}
    try:
        cm_uid = None
        for name in ("timg-a", "timg-b"):
            opts = real_node.kubernetes_options(cluster, ns)
            spec: dict[str, Any] = {
                "name": name,
                "task_source": {"image": ref},
                "configurations": ["unbounded"],
                "attempts": 1,
                "concurrency": 2,
                "seed": 7,
                "agent": {"kind": "oracle"},
                "image": real_node.image,
                "kubernetes": {k: opts[k] for k in ("node_selector", "tolerations", "image_pull_policy")}
                | {"workdir": "/tmp"},
            }
            f = tmp_path / f"{name}.yaml"
            f.write_text(yaml.safe_dump(spec))
            sub = headroom(cluster, "cluster", "submit", str(f), "-n", ns, cwd=tmp_path)
            assert sub.returncode == 0, sub.stderr
            wait_complete(cluster, ns, name, ctl, 420)

            items = trials(cluster, ns, name)
            finals = [t for t in items if t["status"].get("final")]
            got = Counter((t["spec"]["task"], t["status"]["outcome"]) for t in finals)
            assert got == Counter({(t, "passed"): 1 for t in TASKS}), [
                (t["spec"]["task"], t["status"].get("outcome"), t["status"].get("reason"), t["status"].get("message"))
                for t in items
            ]
            assert all(t["status"]["node"] == real_node.name and t["status"]["reward"] == 1.0 for t in finals)
            # the digests the catalog recorded are the ones a local run of the same folders records
            assert {t["spec"]["task"]: t["spec"]["taskDigest"] for t in finals} == local
            assert experiment(cluster, ns, name)["status"]["taskDigests"] == local

            cm = cluster.core.read_namespaced_config_map(taskimage.catalog_name(ref), ns)
            assert cm.immutable and cm.metadata.annotations[taskimage.ANNOTATION_IMAGE] == ref
            assert cm.metadata.annotations[taskimage.ANNOTATION_IMAGE_ID]  # the image the node ran
            if cm_uid is None:
                cm_uid = cm.metadata.uid
                # export reads the cached catalog: the local store gets the run as from a local sweep
                store = tmp_path / "results.db"
                ex = run_cli(
                    "cluster",
                    "export",
                    name,
                    "--store",
                    str(store),
                    "-n",
                    ns,
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                    cwd=tmp_path,
                    timeout=120,
                )
                assert ex.returncode == 0, ex.stderr
                rep = run_cli("report", "--store", str(store), "--format", "json", cwd=tmp_path, timeout=120)
                assert rep.returncode == 0, rep.stderr
                json.loads(rep.stdout)
                db = sqlite3.connect(store)
                assert dict(db.execute("SELECT task_id, digest FROM tasks").fetchall()) == local
                assert sorted(db.execute("SELECT outcome FROM executions WHERE final = 1").fetchall()) == [
                    ("passed",),
                    ("passed",),
                ]
                db.close()
            assert cm.metadata.uid == cm_uid  # the second Experiment reused the cached catalog
        # the catalog pod ran once (for the first Experiment) and is gone; no task ConfigMap was made
        assert ctl.log.read_text().count("task-set catalog read from image") == 1
        assert not [
            p for p in cluster.core.list_namespaced_pod(ns).items if p.metadata.name == taskimage.catalog_name(ref)
        ]
        assert not [
            c for c in cluster.core.list_namespaced_config_map(ns).items if c.metadata.name.startswith("headroom-task-")
        ]

        # an image the node does not have: one line on the Experiment's Planned condition, nothing cached
        missing = "headroom.local/no-such-task-set:1"
        spec = {**spec, "name": "timg-missing", "task_source": {"image": missing}}
        f = tmp_path / "missing.yaml"
        f.write_text(yaml.safe_dump(spec))
        sub = headroom(cluster, "cluster", "submit", str(f), "-n", ns, cwd=tmp_path)
        assert sub.returncode == 0, sub.stderr

        def planned_condition() -> dict[str, Any] | None:
            conds = (experiment(cluster, ns, "timg-missing").get("status") or {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "Planned" and c["status"] == "False"), None)

        wait_for(lambda: planned_condition() is not None, 120, "the missing image's condition")
        cond = planned_condition()
        assert cond is not None and cond["reason"] == "TasksUnavailable", cond
        assert missing in cond["message"] and "ErrImageNeverPull" in cond["message"], cond
        assert [t for t in trials(cluster, ns, "timg-missing")] == []
        with pytest.raises(client.exceptions.ApiException):
            cluster.core.read_namespaced_config_map(taskimage.catalog_name(missing), ns)
    finally:
        ctl.stop()
