"""``pods/exec`` on the real node: the API server's exec subresource, through the kubelet, into containerd's
CRI streaming server (inside the node's network namespace, reached over tests/cluster/netns_bridge.py's
``--into`` relay), into a running container, and back with its output and exit code.

The client is the kubernetes library's ``kubernetes.stream`` (orchestrator/kube/exec.py), the one the Pod
backend's exec channel uses. Before the relay this failed on this node with "error dialing backend:
connection refused".
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrator.kube.exec import exec_in_pod

from .conftest import RealNodeHandle
from .plane import REPO, Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]


def test_exec_in_a_real_node_pod_returns_output_and_exit_code(cluster: Cluster, real_node: RealNodeHandle,
                                                              namespace: str) -> None:
    body = real_node.pod("exec-me", ["sleep", "300"], limits={"memory": "64Mi", "cpu": "500m"})
    cluster.core.create_namespaced_pod(namespace, body)
    cluster.wait_pod(namespace, "exec-me", lambda p: p.status.phase == "Running", timeout=120, what="Running")

    r = exec_in_pod(cluster.api_client, namespace, "exec-me", ["echo", "hello from the pod"], timeout=60)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "hello from the pod\n", "")

    r = exec_in_pod(cluster.api_client, namespace, "exec-me", ["sh", "-c", "echo out; echo err >&2; exit 7"],
                    timeout=60)
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")

    r = exec_in_pod(cluster.api_client, namespace, "exec-me", ["sh", "-c", "tr a-z A-Z; echo \"$PPID\" >&2"],
                    stdin="shout\n", timeout=60)
    assert r.exit_code == 0 and r.stdout == "SHOUT\n"

    # The command really ran in the pod's container: the pod's own process (sleep, pid 1 there) is visible.
    r = exec_in_pod(cluster.api_client, namespace, "exec-me", ["cat", "/proc/1/cmdline"], timeout=60)
    assert r.exit_code == 0 and r.stdout.split("\0")[0] == "sleep"


def test_the_stream_bridge_refuses_a_non_loopback_address() -> None:
    # The relay into the node's namespace stays on loopback on both sides; it refuses before listening.
    r = subprocess.run([sys.executable, "-m", "tests.cluster.netns_bridge", "--into", "/proc/self/ns/net",
                        "0.0.0.0:1", "127.0.0.1:1"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and "stays on loopback" in r.stderr
