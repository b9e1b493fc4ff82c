"""Session fixture ``cluster``: a real Kubernetes control plane (or an existing cluster).

* default: start etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok
  on 127.0.0.1 from the binaries built by ``scripts/k8s/build.sh``; fail (not skip)
  with instructions if they are missing.
* ``HEADROOM_TEST_KUBECONFIG=<path>``: use that cluster instead (kind, GKE, ...). It
  must run kwok managing nodes annotated ``kwok.x-k8s.io/node=fake`` with the Stages
  of ``manifests/kwok`` applied.
* ``HEADROOM_SKIP_CLUSTER=1``: skip every test that uses the fixture.

Session fixture ``real_node`` (marker ``realnode``, opt-in: only tests that use it start
it): a real kubelet + containerd node beside the kwok nodes (``realnode.py``). Against
an existing cluster it starts nothing and uses a Ready node labelled
``headroom.test/real-node=true`` instead. ``HEADROOM_SKIP_REALNODE=1`` skips its tests;
otherwise missing parts are an error that says to run ``scripts/node/install.sh``.

Node capacity: ``HEADROOM_TEST_NODES`` (2), ``HEADROOM_TEST_NODE_CPU`` (4),
``HEADROOM_TEST_NODE_MEMORY`` (16Gi), ``HEADROOM_TEST_NODE_PODS`` (110).
``HEADROOM_KEEP_PLANE=1`` keeps the plane's temp folder (logs, kubeconfig).
"""

from __future__ import annotations

import os
import re
import shutil
import tomllib
import warnings
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .plane import REPO, Cluster, LocalPlane, PlaneError, default_node_specs, find_bin_dir
from .realnode import (
    REAL_NODE_LABEL,
    REAL_NODE_TOLERATION,
    RealNode,
    clear_real_node,
    delete_pods_on_node,
    find_node_assets,
    real_pod,
)
from .stale import reap

#: The CPU request of a test's own tasks where CPU is not what it tests. The real node has the host's 2 CPUs and
#: each trial pod adds its warden's 10m, so 1-CPU trials ran one at a time whatever the concurrency (the next pod
#: waited out the scheduler's back-off); at 0.25 seven fit, and the corpus's sweep took 150 s instead of 340 s.
POD_TASK_CPUS = 0.25

#: The CPU request of the bundled tasks where a real-node test sweeps them for something else than CPU: at their
#: own 1 CPU one trial pod ran at a time (see above); at 0.5 three fit beside their wardens.
BUNDLED_TASK_CPUS = 0.5


def bundled_tasks_at(dst: Path, *, cpus: float = BUNDLED_TASK_CPUS) -> Path:
    """A copy of the bundled tasks in ``dst`` whose CPU requests above ``cpus`` are lowered to it (nothing else
    changes: memory, timeouts, solutions and tests are the bundled ones)."""
    shutil.copytree(REPO / "tasks", dst)
    for toml in dst.glob("*/task.toml"):
        text = toml.read_text()
        (line,) = re.findall(r"(?m)^cpus = .*$", text)  # one [environment] request per bundled task
        if float(line.split("=", 1)[1]) > cpus:
            toml.write_text(text.replace(line, f"cpus = {cpus:g}"))
        assert tomllib.loads(toml.read_text())["environment"]["cpus"] <= cpus
    return dst


_active: list[Cluster] = []
_nodes: list[RealNode] = []


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if os.environ.get("HEADROOM_SKIP_CLUSTER") == "1":
        pytest.skip("HEADROOM_SKIP_CLUSTER=1")
    external = os.environ.get("HEADROOM_TEST_KUBECONFIG")
    plane: LocalPlane | None = None
    if external:
        try:
            bin_dir: Path | None = find_bin_dir()
        except Exception:
            bin_dir = None  # helm from PATH then
        c = Cluster(Path(external), None, bin_dir / "helm" if bin_dir else None)
    else:
        bin_dir = find_bin_dir()  # raises with "run scripts/k8s/build.sh"
        for line in reap():  # an aborted earlier session's plane or node: processes, mounts, state dirs
            print(f"stale test state: {line}")
        plane = LocalPlane(bin_dir)
        plane.start()
        try:
            c = Cluster(plane.kubeconfig, plane, bin_dir / "helm")
        except BaseException:
            plane.stop()
            raise
    _active.append(c)
    try:
        specs = default_node_specs()
        for spec in specs:
            c.add_node(spec)
        c.wait_nodes_ready([s.name for s in specs])
        yield c
    finally:
        _active.remove(c)
        try:
            c.cleanup()
        finally:
            if plane is not None:
                plane.stop()


@dataclass
class RealNodeHandle:
    """What a real-node test needs: the node's name, the task image, and (local plane
    only) the running ``RealNode`` for host-side checks such as cgroup files."""

    name: str
    image: str
    node: RealNode | None
    pull_policy: str = "Never"  # images are imported/loaded, not pulled (GKE: IfNotPresent)

    def pod(self, name: str, command: list[str], **kw: Any) -> dict[str, Any]:
        """``real_pod`` with this node's image and pull policy."""
        return real_pod(name, self.image, command, pull_policy=self.pull_policy, **kw)

    def kubernetes_options(self, cluster: Cluster, namespace: str, **extra: Any) -> dict[str, Any]:
        """An experiment's ``kubernetes`` section that puts every trial pod on this node."""
        return {
            "kubeconfig": str(cluster.kubeconfig),
            "namespace": namespace,
            "image_pull_policy": self.pull_policy,
            "node_selector": {REAL_NODE_LABEL: "true"},
            "tolerations": [REAL_NODE_TOLERATION],
            **extra,
        }


def _node_ready(cluster: Cluster, name: str) -> bool:
    n = cluster.core.read_node(name)
    return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])


@pytest.fixture(scope="session")
def real_node(cluster: Cluster) -> Iterator[RealNodeHandle]:
    if os.environ.get("HEADROOM_SKIP_REALNODE") == "1":
        pytest.skip("HEADROOM_SKIP_REALNODE=1")
    if cluster.plane is None:
        nodes = [n.metadata.name for n in cluster.core.list_node(label_selector=f"{REAL_NODE_LABEL}=true").items]
        ready = [n for n in nodes if _node_ready(cluster, n)]
        if not ready:
            pytest.fail(
                f"HEADROOM_TEST_KUBECONFIG: no Ready node labelled {REAL_NODE_LABEL}=true "
                "(see docs/kubernetes-test-plane.md, 'Real clusters')"
            )
        image = os.environ.get("HEADROOM_TEST_IMAGE", "")
        if not image:
            pytest.fail("HEADROOM_TEST_IMAGE=<image> is required against an existing cluster")
        yield RealNodeHandle(ready[0], image, None, os.environ.get("HEADROOM_TEST_IMAGE_PULL_POLICY", "Never"))
        return
    assert cluster.plane.pki is not None
    assets = find_node_assets(cluster.plane.bin)  # raises with "run scripts/node/install.sh"
    node = RealNode(assets, cluster.kubeconfig, cluster.plane.pki.ca_crt)
    _nodes.append(node)
    try:
        node.start()
        node.register(cluster.core)
        yield RealNodeHandle(node.name, os.environ.get("HEADROOM_TEST_IMAGE") or assets.base_image, node)
    finally:
        _nodes.remove(node)
        try:
            delete_pods_on_node(cluster.core, node.name)
        finally:
            node.stop()
            try:
                cluster.core.delete_node(node.name)
            except Exception:
                pass
            left = node.leftovers()
            if left:  # an error in the last test's teardown, not a silent leak
                raise PlaneError("real test node left behind: " + "; ".join(left))


@pytest.fixture(autouse=True)
def _real_node_left_empty(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each real-node test, nothing of it stays on the shared node: a pod left running there (two
    ``sleep 300`` pods, a controller's trial pods) kept every later test's 1-CPU trial pod Pending, and
    the victim failed, not the test that leaked. What is cleared is named in a warning."""
    yield
    if request.node.get_closest_marker("realnode") is None or not _nodes or not _active:
        return  # an existing cluster's node (HEADROOM_TEST_KUBECONFIG) is not ours to clear
    left = clear_real_node(_active[-1].core, _nodes[-1].name)
    if left:
        warnings.warn(f"{request.node.nodeid} left pods on the real node (deleted): {', '.join(left)}", stacklevel=1)


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    """A fresh namespace per test."""
    return cluster.create_namespace(prefix="t")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and _active and item.get_closest_marker("cluster") is not None:
        rep.sections.append(("kubernetes test plane", _active[-1].diagnostics()))
        if _nodes and item.get_closest_marker("realnode") is not None:
            rep.sections.append(("real test node", _nodes[-1].diagnostics()))
