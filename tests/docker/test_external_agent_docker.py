"""The reference agent on the Docker backend: on the host, acting in the try's container through ``exec``,
talking to the scripted model through the gateway; the container stays offline (network ``none``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.test_external_agent import solve_with_the_reference_agent

from .fixtures import BASE_TAG, DockerEnv

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_the_reference_agent_solves_a_bundled_task_in_a_container(docker_env: DockerEnv, tmp_path: Path) -> None:
    solve_with_the_reference_agent(
        tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host}
    )
    assert docker_env.managed_containers() == []


def test_an_installed_agent_is_copied_in_and_its_install_runs_first(docker_env: DockerEnv, tmp_path: Path) -> None:
    import json
    import sqlite3

    from orchestrator.artifacts import reader
    from tests.agents.test_external_agent import sweep
    from tests.taskfactory import write_task

    agent_dir = tmp_path / "my-agent"
    agent_dir.mkdir()
    (agent_dir / "run.sh").write_text('cat /tmp/installed; touch "$HEADROOM_WORKDIR/out"\n')
    write_task(tmp_path / "tasks", "t", solve="true\n")
    res = sweep(
        tmp_path,
        {
            "tasks_dir": str(tmp_path / "tasks"),
            "configurations": ["3"],
            "attempts": 1,
            "backend": "docker",
            "image": BASE_TAG,
            "agent": {
                "kind": "command",
                "command": 'bash "$HEADROOM_AGENT_DIR/run.sh"',
                "path": str(agent_dir),
                "install": {"command": "ls /agent > /tmp/installed; echo set up", "timeout_s": 60, "network": False},
            },
        },
        env={"DOCKER_HOST": docker_env.host},
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    outcome, ev, run_id, trial_id = db.execute(
        "SELECT e.outcome, v.json, e.run_id, e.trial_id FROM executions e JOIN evidence v USING (run_id, trial_id)"
    ).fetchone()
    assert outcome == "passed" and json.loads(ev)["extra"]["agent_setup"]["exit_code"] == 0
    kept = {a.name: reader.read(db, a.sha256) for a in reader.list_artifacts(db, run_id, trial_id, 0) if a.sha256}
    assert kept["agent_setup/stdout"] == b"set up\n" and kept["agent/stdout"] == b"run.sh\n"
    assert docker_env.managed_containers() == []


@pytest.mark.parametrize(
    "install, detail",
    [
        ({"command": "echo 'registry unreachable' >&2; exit 4", "timeout_s": 60}, "registry unreachable"),
        ({"command": "sleep 300", "timeout_s": 2}, None),
    ],
)
def test_an_install_that_fails_in_the_container_is_an_infra_error_and_the_agent_never_runs(
    docker_env: DockerEnv, tmp_path: Path, install: dict, detail: str | None
) -> None:
    import json
    import sqlite3

    from orchestrator.artifacts import reader
    from tests.agents.test_external_agent import sweep
    from tests.taskfactory import write_task

    write_task(tmp_path / "tasks", "t", solve="true\n")
    res = sweep(
        tmp_path,
        {
            "tasks_dir": str(tmp_path / "tasks"),
            "configurations": ["3"],
            "attempts": 1,
            "backend": "docker",
            "image": BASE_TAG,
            "agent": {
                "kind": "command",
                "command": 'touch "$HEADROOM_WORKDIR/agent-ran"; echo ran',
                "install": {**install, "network": False},
            },
        },
        env={"DOCKER_HOST": docker_env.host},
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    outcome, reason, ev, run_id, trial_id = db.execute(
        "SELECT e.outcome, e.reason, v.json, e.run_id, e.trial_id FROM executions e JOIN evidence v "
        "USING (run_id, trial_id)"
    ).fetchone()
    assert (outcome, reason) == ("infra_error", "agent_setup_failed")  # never the model's failure
    facts = json.loads(ev)
    setup = facts["extra"]["agent_setup"]
    if detail is None:
        assert setup["timed_out"] is True
    else:
        assert setup["exit_code"] == 4 and detail in facts["infra_detail"]
    assert not (facts.get("agent") or {}).get("duration_s") and facts.get("verifier") is None  # neither ran
    kept = {a.name: reader.read(db, a.sha256) for a in reader.list_artifacts(db, run_id, trial_id, 0) if a.sha256}
    assert b"ran" not in kept.get("agent/stdout", b"")
    if detail is not None:
        assert kept["agent_setup/stderr"] == b"registry unreachable\n"  # recorded apart from the agent's run
    db.close()
    assert docker_env.managed_containers() == []
