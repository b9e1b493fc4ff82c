"""A try's full record and an installed agent (its directory and install phase), on the real node (containerd + runc + kubelet).

`headroom sweep --backend kubernetes` runs a command agent in a real Pod; its complete stdout (far past
the 4 KiB termination message), its logs dir (trajectory.json, a nested file) and the verifier's output
come back through the pod log (the runner's checked tar) into the run's store as artifacts, the same
names as on local and Docker. The agent's directory (agent.path) is a read-only ConfigMap at /agent;
its install phase is recorded apart; a failing one is
infra_error(agent_setup_failed) and the agent does not run.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.artifacts import reader
from tests.cli_run import headroom as run_cli
from tests.evidence_check import assert_fits_schema

from .conftest import RealNodeHandle
from .plane import REPO, Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.slow]

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
AGENT = (
    'i=0; while [ $i -lt 2000 ]; do echo "line $i of the agent"; i=$((i+1)); done; '
    'printf \'{"schema_version": "ATIF-v1.2", "steps": []}\' > "$HEADROOM_LOGS_DIR/trajectory.json"; '
    'mkdir -p "$HEADROOM_LOGS_DIR/sub" && echo deep > "$HEADROOM_LOGS_DIR/sub/notes.txt"'
)


def _sweep(
    tmp: Path, name: str, cluster: Cluster, node: RealNodeHandle, ns: str, agent: dict[str, Any]
) -> tuple[Path, list[dict[str, Any]]]:
    exp = tmp / f"{name}.yaml"
    exp.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "tasks_dir": str(REPO / "tasks"),
                "tasks": ["prime-count"],
                "configurations": ["unbounded"],
                "attempts": 1,
                "backend": "kubernetes",
                "image": node.image,
                "agent": agent,
                "kubernetes": node.kubernetes_options(cluster, ns, workdir="/tmp"),
            }
        )
    )
    store = tmp / f"{name}.db"
    proc = run_cli(
        "sweep",
        "--experiment",
        str(exp),
        "--store",
        str(store),
        "--format",
        "json",
        "--no-canary",
        timeout=600,
        cwd=tmp,
    )
    assert store.is_file() and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    db = sqlite3.connect(store)
    try:
        rows = [json.loads(r[0]) for r in db.execute("SELECT json FROM evidence")]
    finally:
        db.close()
    for row in rows:
        assert_fits_schema(row)  # a real Pod's evidence, in the one schema
    return store, [r.get("extra", r) for r in rows]


def _artifacts(store: Path) -> dict[str, tuple[reader.ArtifactInfo, bytes]]:
    db = sqlite3.connect(store)
    try:
        ((run_id, trial_id),) = db.execute("SELECT run_id, trial_id FROM trials").fetchall()
        return {
            a.name: (a, reader.read(db, a.sha256) if a.sha256 else b"")
            for a in reader.list_artifacts(db, run_id, trial_id)
        }
    finally:
        db.close()


def test_the_full_record_and_the_install_phase_on_the_real_node(
    cluster: Cluster, real_node: RealNodeHandle, tmp_path: Path
) -> None:
    ns = cluster.create_namespace(prefix="records", labels=RESTRICTED)
    d = tmp_path / "my-agent"
    d.mkdir()
    (d / "run.sh").write_text(AGENT + "\n")
    (d / "install.sh").write_text(
        "echo installing; touch /agent/x 2>/dev/null && echo writable || echo read-only; echo warn >&2\n"
    )
    agent = {
        "kind": "command",
        "command": 'bash "$HEADROOM_AGENT_DIR/run.sh"',
        "path": str(d),
        "install": {"command": "bash /agent/install.sh", "timeout_s": 60, "network": False},
    }
    store, (evidence,) = _sweep(tmp_path, "rec", cluster, real_node, ns, agent)
    assert evidence["records"]["status"] == "kept", evidence.get("records")
    arts = _artifacts(store)
    out = arts["agent/stdout"][1].decode()
    assert out.count("\n") == 2000 and out.startswith("line 0 of") and len(out) > 4096
    assert arts["logs/trajectory.json"][1].startswith(b'{"schema_version": "ATIF-v1.2"')
    assert arts["logs/sub/notes.txt"][1] == b"deep\n"
    assert "verifier/stdout" in arts or "verifier/stderr" in arts
    # the agent's directory reached the pod at /agent, read-only, for the install and the agent alike
    assert arts["agent_setup/stdout"][1] == b"installing\nread-only\n" and arts["agent_setup/stderr"][1] == b"warn\n"

    bad = {
        "kind": "command",
        "command": "echo ran",
        "install": {"command": "echo broken; exit 3", "timeout_s": 60, "network": False},
    }
    store, (evidence,) = _sweep(tmp_path, "bad", cluster, real_node, ns, bad)
    db = sqlite3.connect(store)
    try:
        ((outcome, reason),) = db.execute("SELECT outcome, reason FROM executions WHERE final = 1").fetchall()
    finally:
        db.close()
    assert (outcome, reason) == ("infra_error", "agent_setup_failed")
    arts = _artifacts(store)
    assert arts["agent_setup/stdout"][1] == b"broken\n" and "agent/stdout" not in arts
