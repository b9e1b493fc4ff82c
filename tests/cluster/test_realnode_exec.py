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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from orchestrator.backends.kubernetes.exec_target import PodExec
from orchestrator.kube.exec import exec_in_pod

from .conftest import RealNodeHandle
from .plane import REPO, Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]


@contextmanager
def running(cluster: Cluster, namespace: str, body: dict[str, Any]) -> Iterator[None]:
    """The pod, Running for the block, then deleted at once: left to its ``sleep 300`` it held its 500m of the
    real node's 2 CPUs for five minutes after the test, and the next test's 1-CPU trial pod could not be
    scheduled (test_realnode_external_agent.py's sweep timed out after 300 s behind two of them)."""
    name = body["metadata"]["name"]
    cluster.core.create_namespaced_pod(namespace, body)
    try:
        cluster.wait_pod(namespace, name, lambda p: p.status.phase == "Running", timeout=120, what="Running")
        yield
    finally:
        cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def test_exec_in_a_real_node_pod_returns_output_and_exit_code(
    cluster: Cluster, real_node: RealNodeHandle, namespace: str
) -> None:
    body = real_node.pod("exec-me", ["sleep", "300"], limits={"memory": "64Mi", "cpu": "500m"})
    with running(cluster, namespace, body):
        _exec_returns_output_and_exit_code(cluster, namespace)


def _exec_returns_output_and_exit_code(cluster: Cluster, namespace: str) -> None:
    r = exec_in_pod(cluster.api_client, namespace, "exec-me", ["echo", "hello from the pod"], timeout=60)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "hello from the pod\n", "")

    r = exec_in_pod(
        cluster.api_client, namespace, "exec-me", ["sh", "-c", "echo out; echo err >&2; exit 7"], timeout=60
    )
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")

    r = exec_in_pod(
        cluster.api_client,
        namespace,
        "exec-me",
        ["sh", "-c", 'tr a-z A-Z; echo "$PPID" >&2'],
        stdin="shout\n",
        timeout=60,
    )
    assert r.exit_code == 0 and r.stdout == "SHOUT\n"

    # The command really ran in the pod's container: the pod's own process (sleep, pid 1 there) is visible.
    r = exec_in_pod(cluster.api_client, namespace, "exec-me", ["cat", "/proc/1/cmdline"], timeout=60)
    assert r.exit_code == 0 and r.stdout.split("\0")[0] == "sleep"


def test_the_stream_bridge_refuses_a_non_loopback_address() -> None:
    # The relay into the node's namespace stays on loopback on both sides; it refuses before listening.
    r = subprocess.run(
        [sys.executable, "-m", "tests.cluster.netns_bridge", "--into", "/proc/self/ns/net", "0.0.0.0:1", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert r.returncode == 2 and "stays on loopback" in r.stderr


def test_the_pod_exec_target_applies_cwd_env_stdin_timeout_and_refuses_after_the_agent_phase(
    cluster: Cluster, real_node: RealNodeHandle, namespace: str
) -> None:
    # A pod laid out as the runner's: /headroom/run, HR_AGENT_ENV holding the contract's variables, an HR_*
    # variable of the runner's own that the agent's commands must not see.
    body = real_node.pod(
        "target",
        ["sh", "-c", "mkdir -p /headroom/run && exec sleep 300"],
        restricted=False,
        limits={"memory": "64Mi", "cpu": "500m"},
    )
    body["spec"]["containers"][0]["env"] = [
        {"name": "HR_AGENT_ENV", "value": "export HEADROOM_SEED=17\n"},
        {"name": "HR_TESTS_MANIFEST", "value": "hidden"},
    ]
    body["spec"]["containers"][0]["workingDir"] = "/tmp"
    with running(cluster, namespace, body):
        _the_target_applies_its_options(cluster, namespace)


def _the_target_applies_its_options(cluster: Cluster, namespace: str) -> None:
    wait_for_dir = PodExec(cluster.api_client, namespace, "target", container="trial")
    assert wait_for_dir.run(["sh", "-c", "until [ -d /headroom/run ]; do sleep 0.2; done"], timeout_s=30).exit_code == 0
    target = PodExec(cluster.api_client, namespace, "target", container="trial", default_cwd="/tmp")

    r = target.run(["sh", "-c", 'pwd; echo "$HEADROOM_SEED ${HR_TESTS_MANIFEST:-unset} ${HR_AGENT_ENV:-unset}"'])
    assert (r.exit_code, r.stdout, r.error) == (0, b"/tmp\n17 unset unset\n", None)
    r = target.run(
        ["sh", "-c", 'cat; echo " $GREETING $(pwd)"'], cwd="/", env={"GREETING": "it's me"}, stdin=b"from-stdin"
    )
    assert (r.exit_code, r.stdout) == (0, b"from-stdin it's me /\n")
    r = target.run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (r.exit_code, r.stdout, r.stderr, r.stdout_bytes) == (7, b"out\n", b"err\n", 4)
    r = target.run(["sleep", "30"], timeout_s=2)
    assert r.timed_out and r.exit_code is None and r.error is None
    assert target.run(["true"], cwd="/no/such/dir").error == "no directory /no/such/dir in the environment"
    assert "container's own user" in (target.run(["true"], user="nobody").error or "")
    assert target.run(["sh", "-c", "pgrep -x sleep | wc -l"]).stdout.strip() == b"1"  # the timed-out one is gone

    # The runner ends the agent phase (runner.sh: end_external): every later exec is refused, not run.
    exec_in_pod(cluster.api_client, namespace, "target", ["mkdir", "/headroom/run/agent.ended"], container="trial")
    r = target.run(["touch", "/tmp/after"])
    assert r.exit_code is None and r.error == "the trial's agent phase has ended"
    assert exec_in_pod(cluster.api_client, namespace, "target", ["ls", "/tmp"], container="trial").stdout == ""
