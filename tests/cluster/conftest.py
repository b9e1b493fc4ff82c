"""Session fixture ``cluster``: a real Kubernetes control plane (or an existing cluster).

* default: start etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok
  on 127.0.0.1 from the binaries built by ``scripts/k8s/build.sh``; fail (not skip)
  with instructions if they are missing.
* ``HEADROOM_TEST_KUBECONFIG=<path>``: use that cluster instead (kind, GKE, ...). It
  must run kwok managing nodes annotated ``kwok.x-k8s.io/node=fake`` with the Stages
  of ``manifests/kwok`` applied.
* ``HEADROOM_SKIP_CLUSTER=1``: skip every test that uses the fixture.

Node capacity: ``HEADROOM_TEST_NODES`` (2), ``HEADROOM_TEST_NODE_CPU`` (4),
``HEADROOM_TEST_NODE_MEMORY`` (16Gi), ``HEADROOM_TEST_NODE_PODS`` (110).
``HEADROOM_KEEP_PLANE=1`` keeps the plane's temp folder (logs, kubeconfig).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .plane import Cluster, LocalPlane, default_node_specs, find_bin_dir

_active: list[Cluster] = []


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
