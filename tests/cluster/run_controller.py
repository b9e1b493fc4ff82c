"""`headroom controller` for the kwok test plane: the real controller process, with the plane's
simulated trial ends added to each pod body (kwok runs no containers: the outcome annotation
of docs/kubernetes-test-plane.md picks how the task container ends, and the termination
message carries what the in-pod runner would have reported; see simulate.py).

    python -m tests.cluster.run_controller [the options of `headroom controller`]

How a try ends is decided from the try alone, so a controller restarted after kill -9
decides the same way:

* memory-spike tasks under 1x-strict are OOM-killed;
* dedup-index under 1x/3x, attempt 0, is evicted on its first try (and passes on the retry);
* prime-count under unbounded, attempt 0, asks for 1000 CPUs, so the real scheduler cannot
  place it: unschedulable once the experiment's pending deadline passes;
* crash-triage fails (reward 0); everything else passes (reward 1).

With ``HEADROOM_TEST_CRASH_BEFORE_CREATE=<marker file>`` (and no such file yet) the process
dies like a kill -9 at the worst point of a submit: the Trial's status already names the
pod, and the pod's create has not been sent.
"""

from __future__ import annotations

import os
import sys
import time
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from orchestrator.spec.launch import Launch

from .simulate import Sim, hook, report

RUN_FOR = "2s"
TASK_CONTAINER = "task"


@cache
def category(task_path: str) -> str:
    meta = tomllib.loads((Path(task_path) / "task.toml").read_text()).get("metadata", {})
    return str(meta.get("category", ""))


def decide(launch: Launch) -> Sim:
    if category(launch.task.path) == "memory-spike" and launch.config_label == "1x-strict":
        return Sim("oom", report(agent_oom=1), after=RUN_FOR)
    if (
        launch.task_id == "dedup-index"
        and launch.config_label == "1x/3x"
        and launch.attempt == 0
        and launch.try_index == 0
    ):
        return Sim("evict", after=RUN_FOR)
    if launch.task_id == "crash-triage":
        return Sim("succeed", report("0"), after=RUN_FOR)
    return Sim("succeed", report("1"), after=RUN_FOR)


def unschedulable(launch: Launch) -> bool:
    return launch.task_id == "prime-count" and launch.config_label == "unbounded" and launch.attempt == 0


def pod_hook(launch: Launch, body: dict[str, Any]) -> dict[str, Any]:
    body = hook(decide)(launch, body)
    if unschedulable(launch):  # unbounded: the task container has no limit, so this request is valid
        for c in body["spec"]["containers"]:
            if c["name"] == TASK_CONTAINER:
                c.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "1000"
    return body


def crash_before_first_create(marker: Path) -> None:
    """Die (no cleanup, like kill -9) once a Trial's status names a pod whose create is about to be sent."""
    from kubernetes import client

    from orchestrator.backends.kubernetes.backend import KubernetesBackend
    from orchestrator.controller.resources import GROUP, TRIAL_PLURAL, VERSION

    real_create = KubernetesBackend._try_create

    def create(self: KubernetesBackend, t: Any) -> None:
        if marker.exists():
            return real_create(self, t)
        marker.write_text(t.launch.name)
        custom = client.CustomObjectsApi(self.api_client)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            trial = custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, TRIAL_PLURAL, t.launch.name)
            if (trial.get("status") or {}).get("pod") == t.launch.name:
                os._exit(137)
            time.sleep(0.05)
        raise AssertionError("the Trial's status never named its pod")

    KubernetesBackend._try_create = create  # type: ignore[method-assign]


def main() -> None:
    import orchestrator.controller.backend as backend_mod
    from orchestrator.controller.main import controller_main

    if marker := os.environ.get("HEADROOM_TEST_CRASH_BEFORE_CREATE"):
        crash_before_first_create(Path(marker))
    real = backend_mod.backend_factory
    backend_mod.backend_factory = lambda extra_hook=None: real(extra_hook=pod_hook)  # type: ignore[assignment]
    controller_main(sys.argv[1:])


if __name__ == "__main__":
    main()
