"""Pure parts of the pre-run fit check and of the run Lease's freshness (no cluster needed)."""

from __future__ import annotations

from orchestrator.backends.kubernetes import fit, runlease
from orchestrator.spec.resources import MIB, ResourceAmounts

GIB = 1024 * MIB


def _need(task: str, cpus: float, mem_bytes: int) -> fit.Need:
    return fit.Need(
        task,
        "3x",
        ResourceAmounts(request_cpus=cpus, request_memory_bytes=mem_bytes, limit_cpus=None, limit_memory_bytes=None),
    )


NODES = [
    fit.node_room({"metadata": {"name": "small"}, "status": {"allocatable": {"cpu": "8", "memory": "4Gi"}}}),
    fit.node_room({"metadata": {"name": "big"}, "status": {"allocatable": {"cpu": "3500m", "memory": "16Gi"}}}),
]


def test_node_room_parses_quantities() -> None:
    assert NODES[1] == fit.NodeRoom("big", 3.5, 16 * GIB)


def test_requests_that_fit_some_node_are_not_refused() -> None:
    assert fit.refusal([_need("a", 7.9, 1 * GIB), _need("b", 3, 15 * GIB)], NODES, "node") is None


def test_memory_beyond_every_node_names_task_amount_and_largest_node() -> None:
    msg = fit.refusal([_need("a", 1, GIB), _need("hog", 1, 40 * GIB)], NODES, "node matching pool=x")
    assert msg is not None and "\n" not in msg
    assert msg.startswith("task hog (3x) needs a memory request of 40.0 GiB")
    assert "largest candidate node (big) has 16.0 GiB allocatable" in msg and "node matching pool=x" in msg


def test_the_warden_counts_toward_the_pod() -> None:
    # exactly the node's memory for the task container: the warden's 16Mi does not fit beside it
    msg = fit.refusal([_need("edge", 1, 16 * GIB)], NODES, "node")
    assert msg is not None and "memory request of 16.0 GiB" in msg


def test_cpu_beyond_every_node_and_no_node_with_both() -> None:
    assert "a cpu request of 9.01" in (fit.refusal([_need("spin", 9, GIB)], NODES, "node") or "")
    both = fit.refusal([_need("both", 6, 8 * GIB), _need("other", 20, GIB)], NODES, "node") or ""
    assert both.startswith("task both (3x) needs 6.01 cpu and 8.0 GiB memory requested but no candidate node has both")
    assert "(and 1 more)" in both


def test_no_candidate_nodes_is_not_a_refusal() -> None:
    assert fit.refusal([_need("a", 100, 100 * GIB)], [], "node") is None


def test_lease_freshness_uses_its_own_duration() -> None:
    lease = {"spec": {"renewTime": "2026-11-30T20:00:00.000000Z", "leaseDurationSeconds": 20}}
    renewed = 1_796_068_800.0  # 2026-11-30T20:00:00Z
    assert runlease.is_fresh(lease, renewed + 19)
    assert not runlease.is_fresh(lease, renewed + 21)
    assert not runlease.is_fresh({"spec": {}}, renewed)  # never renewed: nobody holds it


def test_lease_names_are_dns_labels() -> None:
    name = runlease.lease_name("20261130T195533Z-540f43")
    assert name == name.lower() and len(name) <= 63 and name.startswith("headroom-run-")
