"""Terminal-Bench 2 layout tasks, unmodified, on the Pod backend's real node; and one sweep on three backends.

The fixture tasks of tests/fixtures/tb2 (the ones tests/docker runs with ``--backend docker``)
are built by the session's private dockerd, exported (``docker save``) and imported into the
real node's containerd (``RealNode.import_image``): what a registry push and pull would do,
with no registry. A task that names a ``docker_image`` gets its image under that name (as an
offline Terminal-Bench 2 run builds it); one that names none runs on the Pod backend under
the tag its ``environment/Dockerfile`` builds to (``orchestrator/tasks/environment_image.py``).

Then ``headroom sweep --backend kubernetes`` runs them with the oracle as real Pods: the
outcomes must be those of the Docker backend, and the memory-spiking task's OOM kill must
come from the kernel (the container cgroup's oom_kill counter), not from an exit code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.backends.docker.images import ImageResolver
from orchestrator.spec.launch import TaskSource
from orchestrator.tasks.loader import load_tasks
from tests.docker.fixtures import FIXTURES, DockerEnv
from tests.docker.helpers import evidence, headroom, outcomes

from .conftest import RealNodeHandle, bundled_tasks_at
from .plane import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.docker, pytest.mark.slow]

TB2_TASKS = ["hello-world-app", "memory-spike", "tests-hidden"]
BASELINE = {"pod-security.kubernetes.io/enforce": "baseline"}


@pytest.fixture(scope="module")
def tb2_images(docker_env: DockerEnv, real_node: RealNodeHandle) -> Iterator[dict[str, str]]:
    """task id -> the image reference its trial pods run, present in the real node's containerd."""
    if real_node.node is None:
        pytest.skip("an existing cluster's real node: push the fixture images to its registry instead")
    resolver = ImageResolver(docker_env.client, build=False, build_network=None, pull=False, build_timeout_s=600)
    refs: dict[str, str] = {}
    for task in load_tasks(FIXTURES):
        if task.id not in TB2_TASKS:
            continue
        built = resolver.resolve(
            TaskSource(
                task_id=task.id, path=str(task.path), digest=task.digest, docker_image=None, include_solution=False
            )
        )
        named = task.spec.environment.docker_image
        if named:  # built locally under the name the task asks for, as offline TB2 runs do
            docker_env.client.images.get(built.ref).tag(named)
        refs[task.id] = named or built.ref
    imported = real_node.node.import_image(*sorted(set(refs.values())), docker_host=docker_env.host)
    assert set(refs.values()) <= set(imported)
    yield refs
    # the daemon is the session's (tests/docker share it): take back the names given here, so a
    # test there that expects a task's docker_image to be missing still finds it missing
    for ref in refs.values():
        if not ref.startswith("headroom.local/task-"):
            docker_env.client.images.remove(ref)


def kubernetes_experiment(tmp_path: Path, cluster: Cluster, real_node: RealNodeHandle, **extra: Any) -> Path:
    ns = cluster.create_namespace(prefix="tb2", labels=BASELINE)
    path = tmp_path / "k8s-experiment.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                **extra,
                # Terminal-Bench 2 images run as root (Harbor's containers do): Pod Security baseline
                "kubernetes": real_node.kubernetes_options(cluster, ns, run_as_root=True),
            }
        )
    )
    return path


def test_tb2_tasks_run_unmodified_on_the_real_node(
    cluster: Cluster, real_node: RealNodeHandle, tb2_images: dict[str, str], tmp_path: Path
) -> None:
    store = tmp_path / "k8s.db"
    experiment = kubernetes_experiment(tmp_path, cluster, real_node)
    res = headroom(
        "sweep",
        str(FIXTURES),
        "--backend",
        "kubernetes",
        "--experiment",
        str(experiment),
        *[a for t in TB2_TASKS for a in ("--task", t)],
        "--multipliers",
        "1x-strict,unbounded",
        "--attempts",
        "1",
        "--agent",
        "oracle",
        "--concurrency",
        "2",
        "--store",
        str(store),
        "--format",
        "none",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = outcomes(store)
    print("\n" + "\n".join(f"{t:<16} {c:<10} {o}" for (t, c, _), o in sorted(got.items())))
    assert got == {
        ("hello-world-app", "1x-strict", 0): "passed",
        ("hello-world-app", "unbounded", 0): "passed",
        ("tests-hidden", "1x-strict", 0): "passed",
        ("tests-hidden", "unbounded", 0): "passed",
        ("memory-spike", "1x-strict", 0): "infra_error(oom_killed)",
        ("memory-spike", "unbounded", 0): "passed",
    }
    evs = evidence(store)
    assert len(evs) == 6
    for ev in evs:
        assert ev["extra"]["node"] == real_node.name  # a real Pod on the real kubelet, not a kwok node
        images = json.dumps(ev["extra"].get("images", ""))
        assert any(ref in images for ref in tb2_images.values()), images
    # the kernel's verdict: the container memory cgroup's oom_kill counter went up in the agent step
    spikes = [ev for ev in evs if (ev.get("agent") or {}).get("oom_kills")]
    assert len(spikes) == 1
    assert "container memory cgroup oom_kill" in spikes[0]["agent"]["oom_evidence"]
    # hello-world-app's test.sh writes reward 1 only if every check of test_outputs.py passed: WORKDIR
    # /app for both steps, each env table in its own step, /solution for the oracle, and no /tests
    # while the oracle ran (its oracle wrote down what it saw). No /tests mount in the agent's container.
    hello = [ev for ev in evs if "hello-world-app" in ev["extra"]["pod"]]
    assert len(hello) == 2 and all(ev["reward"] == 1.0 for ev in hello)
    for ev in hello:
        status = ev["extra"]["pod_status"]
        agent = next(c for c in status["initContainerStatuses"] if c["name"] == "agent")
        assert "/tests" not in [m["mountPath"] for m in agent.get("volumeMounts") or []]
        task = next(c for c in status["containerStatuses"] if c["name"] == "task")
        assert "workdir=/app" in task["state"]["terminated"]["message"]  # the image's WORKDIR


# -- one sweep, three backends ---------------------------------------------------------------

#: Bundled tasks whose memory use depends on the seed (some seeds overrun 1x, none overrun
#: unbounded) and one that never does: the same seeds must give the same outcome everywhere.
MEMORY_TASKS = ["bundle-digest", "dedup-index", "csv-report"]
SIDE_CONFIGS = ["1x-strict", "unbounded"]
SIDE_ATTEMPTS = 2


def side_sweep(
    tmp_path: Path, tasks: Path, backend: str, extra: dict[str, Any], env: dict[str, str]
) -> dict[tuple[str, str, int], str]:
    spec = {
        "name": f"three-backends-{backend}",
        "tasks_dir": str(tasks),
        "tasks": MEMORY_TASKS,
        "configurations": SIDE_CONFIGS,
        "attempts": SIDE_ATTEMPTS,
        "seed": 7,
        "agent": {"kind": "oracle"},
        "backend": backend,
        "concurrency": 3,
        # a runtime's own failure (a loaded dockerd that lost a step's output: infra_error(api_error)) is retried as
        # a user would; what must agree is each trial's verdict, and OOM kills, the measurement, are never retried
        "retry": {"max_retries": 2},
        **extra,
    }
    exp = tmp_path / f"{backend}.yaml"
    exp.write_text(yaml.safe_dump(spec))
    store = tmp_path / f"{backend}.db"
    res = headroom("sweep", "--experiment", str(exp), "--store", str(store), "--format", "none", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    return outcomes(store)


def test_memory_tasks_agree_on_local_docker_and_the_real_node(
    cluster: Cluster, real_node: RealNodeHandle, docker_env: DockerEnv, docker_host: str, tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="three", labels={"pod-security.kubernetes.io/enforce": "restricted"})
    sweeps: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
        "local": ({}, {}),
        "docker": (
            {"image": docker_env.base_image, "docker": {"default_image": docker_env.base_image}},
            {"DOCKER_HOST": docker_host},
        ),
        # the base image sets no WORKDIR and / is not writable for the agent's uid
        "kubernetes": (
            {"image": real_node.image, "kubernetes": real_node.kubernetes_options(cluster, ns, workdir="/tmp")},
            {},
        ),
    }
    # the bundled tasks at half a CPU, on all three backends: three trial pods fit on the node at once
    tasks = bundled_tasks_at(tmp_path / "tasks")
    # the three sweeps at once (each its own process and store): the outcomes depend on the seeds, not the timing
    with ThreadPoolExecutor(len(sweeps)) as pool:
        futures = {b: pool.submit(side_sweep, tmp_path, tasks, b, extra, env) for b, (extra, env) in sweeps.items()}
        runs = {b: f.result() for b, f in futures.items()}
    keys = sorted(runs["local"])
    assert len(keys) == len(MEMORY_TASKS) * len(SIDE_CONFIGS) * SIDE_ATTEMPTS
    lines = [
        f"{'task':<14} {'config':<10} {'attempt':>7}   {'local':<24} {'docker':<24} {'kubernetes (real node)':<24}"
    ]
    lines += [
        f"{t:<14} {c:<10} {a:>7}   " + " ".join(f"{runs[b].get((t, c, a), '-'):<24}" for b in runs) for t, c, a in keys
    ]
    for label in SIDE_CONFIGS:
        rates = []
        for b in runs:
            row = [o for (_, c, _), o in runs[b].items() if c == label]
            rates.append(f"{sum(o.startswith('infra_error') for o in row)}/{len(row)}")
        lines.append(f"{'infra errors':<14} {label:<10} {'':>7}   " + " ".join(f"{r:<24}" for r in rates))
    print("\n" + "\n".join(lines))
    (tmp_path / "three-backends.txt").write_text("\n".join(lines) + "\n")

    # the same seeds, the same outcome on every backend, trial for trial
    assert runs["docker"] == runs["local"]
    assert runs["kubernetes"] == runs["local"]
    # and the comparison says something: some trials OOM-killed at 1x-strict, none unbounded
    assert any(o == "infra_error(oom_killed)" for (_, c, _), o in runs["local"].items() if c == "1x-strict")
    assert not any(o.startswith("infra_error") for (_, c, _), o in runs["local"].items() if c == "unbounded")
