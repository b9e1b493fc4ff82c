"""Limit-aware placement in a cluster, the parts without a cluster: the pod's extended resource, the
pre-flight refusals, the node status patches. On the kwok test plane: tests/cluster/test_kubernetes_placement.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.backends.kubernetes import fit
from orchestrator.backends.kubernetes import limit_resource as lr
from orchestrator.backends.kubernetes.nodes import Nodes
from orchestrator.backends.kubernetes.pod import build
from orchestrator.engine import sweep
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.errors import SpecError
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.resources import MIB, ResourceAmounts
from orchestrator.tasks.files import bundle
from orchestrator.tasks.loader import load_tasks

REPO = Path(__file__).resolve().parents[2]


def _launch(config: str, placement: str):  # type: ignore[no-untyped-def]
    exp = Experiment(
        tasks_dir=str(REPO / "tasks"), tasks=["word-index"], configurations=[config], attempts=1, placement=placement
    )  # type: ignore[arg-type]
    tasks = load_tasks(REPO / "tasks", ["word-index"])
    return build_launch("run-p", plan(exp, tasks)[0], 0, tasks[0], exp), tasks[0]


def test_a_limit_aware_launch_carries_the_placement_and_its_pod_holds_the_pod_limit_in_mib() -> None:
    launch, task = _launch("1x/3x", "limit-aware")
    assert launch.placement == "limit-aware" and _launch("1x/3x", "default")[0].placement == "default"
    mib = lr.pod_limit_mib(launch.amounts.limit_memory_bytes)  # type: ignore[arg-type]
    assert mib == 3 * 96 + 16  # word-index: 96 MiB at 3x, and the warden's 16 MiB
    pod = build(
        launch,
        KubernetesOptions(),
        bundle("word-index", task.path, task.digest),
        "img:1",
        extended={lr.RESOURCE: str(mib)},
    )
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"][lr.RESOURCE] == res["limits"][lr.RESOURCE] == str(mib)  # extended: request == limit
    assert lr.held_mib(pod) == mib
    plain = build(launch, KubernetesOptions(), bundle("word-index", task.path, task.digest), "img:1")
    assert lr.held_mib(plain) is None and lr.RESOURCE not in plain["spec"]["containers"][0]["resources"]["requests"]


def test_an_unbounded_try_holds_the_largest_amount_a_candidate_node_advertises() -> None:
    nodes = Nodes(core=None, options=KubernetesOptions())
    nodes._listed(
        [
            {"metadata": {"name": "a"}, "status": {"allocatable": {"memory": "4Gi", lr.RESOURCE: "4096"}}},
            {"metadata": {"name": "b"}, "status": {"allocatable": {"memory": "8Gi", lr.RESOURCE: "8192"}}},
            {"metadata": {"name": "c"}, "status": {"allocatable": {"memory": "64Gi"}}},
        ]
    )
    assert nodes.largest_advertised() == 8192
    nodes._listed([{"metadata": {"name": "c"}, "status": {"allocatable": {"memory": "64Gi"}}}])
    assert nodes.largest_advertised() is None


def _need(task: str, limit_mib: int | None) -> fit.Need:
    return fit.Need(
        task,
        "cfg",
        ResourceAmounts(
            request_cpus=1,
            request_memory_bytes=64 * MIB,
            limit_cpus=None,
            limit_memory_bytes=None if limit_mib is None else limit_mib * MIB,
        ),
    )


def _room(name: str, advertised: int | None) -> fit.NodeRoom:
    alloc = {"cpu": "4", "memory": "4Gi", **({lr.RESOURCE: str(advertised)} if advertised is not None else {})}
    return fit.node_room({"metadata": {"name": name}, "status": {"allocatable": alloc}})


def test_nothing_advertised_is_refused_naming_the_advertise_command() -> None:
    got = fit.limit_refusal([_need("t", 100)], [_room("a", None)], "node matching pool=x")
    assert got is not None and "\n" not in got
    assert f"no node matching pool=x advertises {lr.RESOURCE}" in got and "headroom cluster nodes advertise" in got


def test_a_limit_beyond_every_advertised_amount_is_refused_an_unbounded_one_is_not() -> None:
    rooms = [_room("a", 1000), _room("b", 2000), _room("c", None)]
    assert fit.limit_refusal([_need("t", 1900), _need("u", None)], rooms, "node") is None
    got = fit.limit_refusal([_need("t", 1985), _need("v", 5000)], rooms, "node")
    assert got is not None and got.startswith("task t (cfg) has a pod memory limit of 2001 MiB")
    assert "(b) is 2000" in got and "(and 1 more)" in got
    assert fit.limit_refusal([_need("t", 1)], [], "node") is None  # no candidate yet: not a refusal


def test_the_status_patches_escape_the_slash_and_remove_only_what_is_there() -> None:
    node = {"metadata": {"name": "a"}, "status": {"capacity": {"memory": "3Gi"}, "allocatable": {"memory": "3Gi"}}}
    assert lr.memory_mib(node) == 3072
    assert lr.advertise_patch(node, 3072) == [
        {"op": "add", "path": "/status/capacity/headroom.dev~1memory-limit-mib", "value": "3072"},
        {"op": "add", "path": "/status/allocatable/headroom.dev~1memory-limit-mib", "value": "3072"},
    ]
    assert lr.remove_patch(node) == []
    node["status"]["capacity"][lr.RESOURCE] = "3072"
    assert lr.remove_patch(node) == [{"op": "remove", "path": "/status/capacity/headroom.dev~1memory-limit-mib"}]


def test_limit_aware_is_placed_by_the_cluster_or_the_engine_and_refused_without_a_capacity() -> None:
    exp = Experiment(tasks_dir=str(REPO / "tasks"), configurations=["1x"], placement="limit-aware")

    from orchestrator.backends import declared_abilities
    from orchestrator.spec.backend import BackendFacts, HostFacts

    class Named:  # only the declared abilities and the facts matter to the choice (the real backends need daemons)
        def __init__(self, name: str, memory_bytes: int | None) -> None:
            self.name, self.memory_bytes = name, memory_bytes
            self.abilities = declared_abilities(name)

        def facts(self) -> BackendFacts:
            return BackendFacts(
                name=self.name, abilities=self.abilities, host=HostFacts(memory_bytes=self.memory_bytes)
            )

    assert sweep.placement_for(exp, Named("kubernetes", None)) is None  # type: ignore[arg-type]  # the backend places
    host = sweep.placement_for(exp, Named("docker", 8 << 30))  # type: ignore[arg-type]  # one daemon, one host
    assert host is not None and (host.capacity, host.mode, host.scope) == (8 << 30, "limit-aware", "host")
    with pytest.raises(SpecError, match="the docker backend reports none"):
        sweep.placement_for(exp, Named("docker", None))  # type: ignore[arg-type]


def test_the_controller_s_launches_carry_the_experiment_s_placement() -> None:
    from orchestrator.controller.engine import launch_for

    exp = Experiment(
        tasks_dir=str(REPO / "tasks"),
        tasks=["word-index"],
        configurations=["1x/3x"],
        attempts=1,
        placement="limit-aware",
        backend="kubernetes",
    )
    tasks = load_tasks(REPO / "tasks", ["word-index"])
    launch = launch_for(exp, tasks[0], plan(exp, tasks)[0], 0, "run-c", "d" * 64, {"headroom.dev/experiment": "e"})
    assert launch.placement == "limit-aware" and launch.labels["headroom.dev/experiment"] == "e"
