"""Harbor's agents on Pods, on the real node: Harbor's oracle, nop and terminus-2, unchanged, run on this host in their
sandbox (Harbor's own interpreter, orchestrator/agents/harbor/adapter.py) and act on the try's pod only over
``pods/exec``; the verdict comes from the in-pod runner. terminus-2 drives a tmux session inside the pod (the node's
test image, scripts/images/debian-base.packages, carries tmux) as the pod's non-root user under Pod Security
``restricted``; its model is tests/agents/fake_model.py, a scripted server on loopback standing in for a provider.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.test_harbor_agent import (
    check_nop_fails,
    check_oracle_passes,
    check_terminus_2_solves,
    requires_harbor,
)
from tests.agents.test_harbor_installed_agent import check_failed_install_is_infra, check_install_is_its_own_phase

from .conftest import RealNodeHandle
from .plane import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow, requires_harbor]

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def _pods(cluster: Cluster, real_node: RealNodeHandle, prefix: str) -> tuple[str, dict]:
    ns = cluster.create_namespace(prefix=prefix, labels=RESTRICTED)
    return ns, {
        "backend": "kubernetes",
        "image": real_node.image,
        "kubernetes": real_node.kubernetes_options(cluster, ns, workdir="/tmp"),
    }


def test_harbors_oracle_passes_on_pods(cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path) -> None:
    ns, extra = _pods(cluster, real_node, "harbororacle")
    check_oracle_passes(tmp_path, extra)
    assert cluster.core.list_namespaced_pod(ns).items == []


def test_harbors_nop_fails_on_pods(cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path) -> None:
    ns, extra = _pods(cluster, real_node, "harbornop")
    check_nop_fails(tmp_path, extra)
    assert cluster.core.list_namespaced_pod(ns).items == []


def test_terminus_2_solves_a_task_with_a_scripted_model_on_pods(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns, extra = _pods(cluster, real_node, "harborterminus")
    check_terminus_2_solves(tmp_path, extra)
    assert cluster.core.list_namespaced_pod(ns).items == []


def test_an_installed_harbor_agents_setup_is_the_agent_setup_phase_on_pods(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns, extra = _pods(cluster, real_node, "harborinstall")
    check_install_is_its_own_phase(tmp_path, extra)
    assert cluster.core.list_namespaced_pod(ns).items == []


def test_a_failed_harbor_install_is_an_infra_error_on_pods(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns, extra = _pods(cluster, real_node, "harborinstallfail")
    check_failed_install_is_infra(tmp_path, extra)
    assert cluster.core.list_namespaced_pod(ns).items == []
