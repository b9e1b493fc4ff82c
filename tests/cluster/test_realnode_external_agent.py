"""An external agent on Pods, on the real node: the reference agent (examples/agents/reference_agent.py) runs on
this host, talks to the scripted model (tests/agents/fake_model.py, standing in for a model provider) through
the real gateway, and acts on the try's pod only over ``pods/exec`` (orchestrator/backends/kubernetes/external.py).
It solves the bundled prime-count task; the pod stays offline; the verdict comes from the in-pod runner; the
exec log, the agent's output and its trajectory are kept as the try's artifacts.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.artifacts import execlog, names, reader
from tests.agents.test_external_agent import solve_with_the_reference_agent, sweep

from .conftest import POD_TASK_CPUS, RealNodeHandle
from .plane import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def test_the_reference_agent_solves_a_bundled_task_on_pods(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="extagent", labels=RESTRICTED)
    solve_with_the_reference_agent(
        tmp_path,
        {
            "backend": "kubernetes",
            "image": real_node.image,
            "kubernetes": real_node.kubernetes_options(cluster, ns, workdir="/tmp"),
        },
    )
    db = sqlite3.connect(tmp_path / "h.db")
    try:
        for (ev,) in db.execute("SELECT json FROM evidence"):
            extra = json.loads(ev)["extra"]
            assert extra["external_agent"]["ran_on"] == "host" and extra["external_agent"]["execs"] == 2
            assert extra["runner"]["agent_external"] == "exit"  # the host told the runner the agent ended
    finally:
        db.close()
    assert cluster.core.list_namespaced_pod(ns).items == []


def test_the_exec_channel_on_pods_takes_its_options_and_what_it_leaves_is_swept(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    # The exec log shows every command with its exit code, the cwd asked for and a timeout. The agent leaves a
    # background process behind: the runner's sweep ends it, so the warden hands the tests over and the verifier
    # runs (a process left alive would withhold them).
    ns = cluster.create_namespace(prefix="extexec", labels=RESTRICTED)
    agent = r"""set -u
$HEADROOM_EXEC -- sh -c 'pwd; echo "seed=$HEADROOM_SEED"'
printf 'from-stdin' | $HEADROOM_EXEC -i --cwd / --env GREETING=hi -- sh -c 'cat; echo " $GREETING $(pwd)"'
$HEADROOM_EXEC --timeout 2 -- sleep 30; echo "timeout-rc=$?"
$HEADROOM_EXEC -- sh -c 'exit 7'; echo "exit-rc=$?"
$HEADROOM_EXEC -- sh -c 'env' | grep -c -e OPENAI -e HEADROOM_MODEL -e HR_AGENT_ENV; true
$HEADROOM_EXEC -- sh -c 'cat /proc/self/cgroup | head -1'
echo 42 > "$HEADROOM_LOGS_DIR/host-note.txt"
$HEADROOM_EXEC --cwd / -- sh -c 'echo "contract=$HEADROOM_WORKDIR $HEADROOM_TASK_DIR $HEADROOM_LOGS_DIR"'
$HEADROOM_EXEC -- sh -c 'sleep 300 >/dev/null 2>&1 &'
"""
    res = sweep(
        tmp_path,
        {
            "tasks_dir": str(Path(__file__).resolve().parents[2] / "tasks"),
            "tasks": ["prime-count"],
            "configurations": ["unbounded"],
            "attempts": 1,
            "backend": "kubernetes",
            "image": real_node.image,
            "agent": {"kind": "external", "command": agent},
            "kubernetes": real_node.kubernetes_options(cluster, ns, workdir="/tmp"),
        },
    )
    assert res.returncode == 0, res.stderr[-3000:]
    db = sqlite3.connect(tmp_path / "h.db")
    try:
        run_id, trial_id, outcome = db.execute("SELECT run_id, trial_id, outcome FROM executions").fetchone()
        (ev,) = db.execute("SELECT json FROM evidence").fetchone()
        kept = {a.name: reader.read(db, a.sha256) for a in reader.list_artifacts(db, run_id, trial_id, 0) if a.sha256}
    finally:
        db.close()
    assert outcome == "failed"  # it never wrote primes.json: the runner's verifier says so
    assert "verifier_skipped" not in json.loads(ev)["extra"]["runner"]
    out = kept[names.AGENT_STDOUT].decode()
    lines = out.splitlines()
    assert lines[:2] == ["/tmp", "seed=" + lines[1].split("=", 1)[1]] and lines[1] != "seed="
    assert "from-stdin hi /" in out
    assert "timeout-rc=124" in out and "exit-rc=7" in out
    assert lines[lines.index("exit-rc=7") + 1] == "0"  # no gateway or runner variable in the environment
    assert (
        "kubepods" in lines[lines.index("exit-rc=7") + 2] or "headroom-realnode" in lines[lines.index("exit-rc=7") + 2]
    )
    # The contract's variables reach a command run through pods/exec, as on the local and Docker backends (not the
    # cwd asked for: the environment's work dir).
    assert "contract=/tmp /headroom/task /logs/agent" in lines
    records = [r for r in execlog.parse(kept[names.EXEC_LOG]) if isinstance(r, execlog.ExecRecord)]
    assert [r.exit_code for r in records] == [0, 0, None, 7, 0, 0, 0, 0]
    assert records[2].timed_out and records[1].cwd == "/" and records[0].cwd == "/tmp"
    assert kept[f"{names.LOGS_PREFIX}/host-note.txt"] == b"42\n"


@pytest.mark.docker
def test_host_agent_attacks_fail_on_pods(
    docker_env, cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # The external-agent variant of the hostile harness (tests/hostile/test_external_agents.py) on Pods: the agent
    # runs on this host in its own sandbox whatever the backend, so each class ends `failed` here too.
    from tests.hostile.test_backends_agree import corpus_image
    from tests.hostile.test_external_agents import check_classes, check_key_theft

    if real_node.node is None:
        pytest.skip("an existing cluster's real node: push the corpus image to its registry instead")
    image = corpus_image(docker_env)
    real_node.node.import_image(image, docker_host=docker_env.host)
    ns = cluster.create_namespace(prefix="exthostile", labels={"pod-security.kubernetes.io/enforce": "baseline"})
    extra = {"image": image, "kubernetes": real_node.kubernetes_options(cluster, ns, run_as_root=True)}
    classes, theft = tmp_path / "classes", tmp_path / "theft"
    for d in (classes, theft):
        (d / "tasks").mkdir(parents=True)
    check_classes(
        classes, classes / "tasks", "--backend", "kubernetes", isolation="pod", extra=extra, cpus=POD_TASK_CPUS
    )
    check_key_theft(theft, theft / "tasks", "--backend", "kubernetes", extra=extra, cpus=POD_TASK_CPUS)
