"""Which CPU architectures a cluster offers a trial pod (pure part of node_arch.py): only nodes a pod could land on
count, and a node's architecture is its kubernetes.io/arch label, else its kubelet's nodeInfo.architecture.

The node objects are written here in the API's JSON shape; the same code reads the real API server in
tests/cluster/test_kubernetes_faithful.py.
"""

from __future__ import annotations

from orchestrator.backends.kubernetes.node_arch import node_architecture, of_nodes

from .test_nodes import FAKE, node


def _arch(name: str, label: str | None, info: str | None = None, **kw: object) -> dict[str, object]:
    n = node(name, **kw)  # type: ignore[arg-type]
    if label:
        n["metadata"]["labels"]["kubernetes.io/arch"] = label
    if info:
        n["status"]["nodeInfo"]["architecture"] = info
    return n


def test_the_label_wins_then_the_kubelet_s_report_in_docker_s_names() -> None:
    assert node_architecture(_arch("a", "arm64", "amd64")) == "arm64"
    assert node_architecture(_arch("b", None, "aarch64")) == "arm64"
    assert node_architecture(_arch("c", None, "x86_64")) == "amd64"
    assert node_architecture(_arch("d", None)) is None


def test_only_nodes_a_pod_could_land_on_count() -> None:
    nodes = [
        _arch("ready", "amd64"),
        _arch("cordoned", "arm64", cordoned=True),
        _arch("not-ready", "s390x", ready=False),
        _arch("tainted", "ppc64le", taints=[FAKE]),
    ]
    got = of_nodes(nodes, [])
    assert got.architectures == ("amd64",) and got.schedulable == 1 and got.why is None
    tolerated = of_nodes(nodes, [{"key": FAKE["key"], "operator": "Exists"}])
    assert tolerated.architectures == ("amd64", "ppc64le")


def test_unknown_is_never_a_refusal() -> None:
    assert of_nodes([], []).architectures == () and "no node yet" in (of_nodes([], []).why or "")
    cordoned = of_nodes([_arch("x", "arm64", cordoned=True)], [])
    assert cordoned.architectures == () and cordoned.why == "no schedulable node among 1"
    silent = of_nodes([_arch("y", None)], [])
    assert silent.architectures == () and silent.why == "no schedulable node records its architecture"
