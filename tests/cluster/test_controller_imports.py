"""What the controller process loads while it reconciles a finished Experiment: not the typed core API.

The chart's controller must hold 100,000 finished Trials in 150 MB (docs/development.md,
"Controller memory with 100,000 Trials"); a module imported once stays for the process's life.
``kubernetes.client.CoreV1Api`` alone is about 20 MB (its module and the 250 pydantic models it
imports), and the records' and host agent's imports (sqlite3, zstandard, psutil) a few more. A
controller restarted over a finished sweep needs none of them: its own core calls (the task set's
ConfigMaps, the nodes' architectures, the Experiment's pods, its Events) are JSON
(orchestrator/kube/raw.py). This runs the real controller process over an Experiment whose
Trials are all finished, waits for the status and the Completed event, and reads the process's
``sys.modules``: a change that sends one of those calls through the typed API again fails here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from orchestrator.controller import tasksets
from orchestrator.controller.reconcile import run_id_of
from orchestrator.controller.resources import (
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
from orchestrator.engine.plan import plan
from orchestrator.errors import SpecError
from orchestrator.spec.names import label_value, launch_name
from orchestrator.tasks.loader import load_tasks

from .controller_support import ControllerProcess, crds  # noqa: F401
from .plane import REPO, Cluster, wait_for

pytestmark = [pytest.mark.cluster]

#: Never loaded by a controller that only counts finished Trials.
NOT_LOADED = (
    "kubernetes.client.api.core_v1_api",
    "kubernetes.client.models.v1_pod",
    "kubernetes.client.models.v1_config_map",
    "kubernetes.client.models.v1_node_list",
    "kubernetes.client.models.core_v1_event",
    "sqlite3",
    "zstandard",
    "psutil",
)

#: The controller as the chart runs it, plus a thread that keeps its module names in a file.
ENTRY = """
import os, sys, threading, time
out = os.environ["HEADROOM_TEST_MODULES"]
def dump():
    while True:
        with open(out + ".tmp", "w") as f:
            f.write("\\n".join(sorted(sys.modules)))
        os.replace(out + ".tmp", out)
        time.sleep(0.2)
threading.Thread(target=dump, daemon=True).start()
from orchestrator.controller.main import controller_main
controller_main(sys.argv[1:])
"""


def _finished_experiment(cluster: Cluster, ns: str) -> tuple[str, int]:
    """An Experiment over a pushed task set and one finished Trial per planned trial (as a long sweep leaves them)."""
    custom = client.CustomObjectsApi(cluster.api_client)
    bundle = tasksets.push(cluster.core, ns, REPO / "tasks").name
    spec = ExperimentResourceSpec.model_validate(
        {"name": "done", "configurations": ["1x-strict"], "attempts": 1, "task_source": {"bundle": bundle}}
    )
    exp: Any = custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        EXPERIMENT_PLURAL,
        {
            "apiVersion": API_VERSION,
            "kind": "Experiment",
            "metadata": {"name": "done"},
            "spec": spec.model_dump(mode="json", exclude={"tasks_dir"}),
        },
    )
    run_id = run_id_of(exp)
    owner = {"apiVersion": API_VERSION, "kind": "Experiment", "name": "done", "uid": exp["metadata"]["uid"]}
    planned = plan(spec.model_copy(update={"tasks_dir": str(REPO / "tasks")}), load_tasks(REPO / "tasks"))
    for p in planned:
        name = launch_name(run_id, p.trial_id, 0)
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            TRIAL_PLURAL,
            {
                "apiVersion": API_VERSION,
                "kind": "Trial",
                "metadata": {
                    "name": name,
                    "labels": {
                        LABEL_EXPERIMENT: "done",
                        LABEL_RUN: label_value(run_id),
                        LABEL_TASK: label_value(p.task_id),
                        LABEL_CONFIGURATION: label_value(p.config.label),
                    },
                    "ownerReferences": [{**owner, "controller": True}],
                },
                "spec": {
                    "experiment": "done",
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
            },
        )
        trial: Any = custom.get_namespaced_custom_object(GROUP, VERSION, ns, TRIAL_PLURAL, name)
        trial["status"] = {"phase": "Finished", "outcome": "passed", "final": True, "reward": 1.0}
        custom.replace_namespaced_custom_object_status(GROUP, VERSION, ns, TRIAL_PLURAL, name, trial)
    return run_id, len(planned)


def test_a_controller_over_finished_trials_never_loads_the_typed_core_api(
    cluster: Cluster, crds: None, tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="ctlmods")
    _, n = _finished_experiment(cluster, ns)
    modules = tmp_path / "modules.txt"
    ctl = ControllerProcess(
        cluster.kubeconfig, ns, tmp_path / "controller.log", env={"HEADROOM_TEST_MODULES": str(modules)}
    )
    ctl.argv[1:3] = ["-c", ENTRY]  # the same command line, run with the module dump above
    ctl.start()
    try:
        custom = client.CustomObjectsApi(cluster.api_client)

        def complete() -> bool:
            assert ctl.alive(), ctl.log.read_text()[-3000:]
            st: Any = custom.get_namespaced_custom_object(GROUP, VERSION, ns, EXPERIMENT_PLURAL, "done")
            status = st.get("status") or {}
            return status.get("phase") == "Complete" and status.get("progress") == f"{n}/{n}"

        wait_for(complete, 90, "the finished Experiment's status")
        # Every core call of this path was made: the task set read (the status counts the plan),
        # the Completed Event written, and the pods looked for once the Experiment is complete.
        wait_for(lambda: "Completed" in {e.reason for e in cluster.events_for(ns, "done")}, 30, "the Completed event")
        time.sleep(1.0)  # a dump taken after those calls
        loaded = set(modules.read_text().split())
    finally:
        ctl.stop()
    assert "orchestrator.controller.reconcile" in loaded and "kubernetes.client.api.custom_objects_api" in loaded
    models = sorted(m for m in loaded if m.startswith("kubernetes.client.models."))
    assert sorted(m for m in NOT_LOADED if m in loaded) == [], f"{len(models)} client models loaded: {models[:20]}"


def test_a_cached_task_catalog_is_read_as_json_without_the_typed_core_api(cluster: Cluster, tmp_path: Path) -> None:
    """An Experiment over a task-set image, once its catalog is cached, plans without the typed core API."""
    import subprocess

    from orchestrator.controller import taskimage
    from orchestrator.kube.raw import LazyCoreV1Api
    from orchestrator.spec.kubernetes import KubernetesOptions
    from orchestrator.tasks.image import write_context

    src = tmp_path / "src"
    src.mkdir()
    subprocess.run(["cp", "-a", str(REPO / "tasks" / "word-index"), str(src / "word-index")], check=True)
    cat = write_context(src, tmp_path / "context", "headroom.local/debian-base:test")
    image = "headroom.local/tasks:json-read"
    ns = cluster.create_namespace(prefix="ctlcat")
    cluster.core.create_namespaced_config_map(
        ns,
        {  # type: ignore[arg-type]  # the client serialises a plain dict body
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": taskimage.catalog_name(image)},
            "data": {taskimage.CATALOG_KEY: json.dumps(cat, sort_keys=True)},
        },
    )
    core = LazyCoreV1Api(cluster.api_client)
    got = taskimage.read_catalog(core, ns, image, KubernetesOptions())  # type: ignore[arg-type]  # the lazy stand-in
    assert got == taskimage.parse(json.dumps(cat, sort_keys=True), image) and sorted(got["tasks"]) == ["word-index"]
    assert taskimage.cached_catalog(core, ns, image) == got  # type: ignore[arg-type]  # the lazy stand-in
    assert core._api is None  # both reads went out as JSON: no CoreV1Api was made
    with pytest.raises(SpecError, match="no cached task catalog"):
        taskimage.cached_catalog(core, ns, "headroom.local/tasks:absent")  # type: ignore[arg-type]
