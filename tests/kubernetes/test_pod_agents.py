"""Agents a trial pod cannot run (external ones, a host agent.path) are refused in one line before anything starts:
by `headroom sweep --backend kubernetes`, by `headroom submit`, and in the Experiment resource the controller reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from orchestrator.controller.resources import ExperimentResourceSpec
from orchestrator.errors import first_validation_error

REPO = Path(__file__).resolve().parents[2]


def _spec(agent: dict[str, object]) -> dict[str, object]:
    return {"name": "x", "task_source": {"bundle": "b"}, "agent": agent}


@pytest.mark.parametrize(("agent", "words"), [
    ({"kind": "external", "command": "python3 my_agent.py"}, "external agent"),
    ({"kind": "command", "command": "bash /agent/run.sh", "path": "/home/me/agent"}, "agent.path '/home/me/agent'"),
])
def test_an_agent_that_needs_the_host_is_refused_on_its_field(agent: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError) as err:
        ExperimentResourceSpec.model_validate(_spec(agent))
    field, msg = first_validation_error(err.value)
    assert field == "agent" and words in msg


def test_agents_a_pod_runs_are_kept() -> None:
    install = {"kind": "command", "command": "run-it", "install": {"command": "pip install --user x"}}
    assert ExperimentResourceSpec.model_validate(_spec(install)).agent.install is not None
    assert ExperimentResourceSpec.model_validate(_spec({"kind": "oracle"})).agent.kind == "oracle"


def test_submit_refuses_an_external_agent_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "exp.yaml"
    f.write_text(yaml.safe_dump({**_spec({"kind": "external", "command": "python3 my_agent.py"})}))
    r = subprocess.run([sys.executable, "-m", "orchestrator", "submit", str(f), "--dry-run"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "external agent" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def _sweep(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No cluster here and no kubeconfig: the refusal must come before any connection is tried.
    return subprocess.run([sys.executable, "-m", "orchestrator", "sweep", str(REPO / "tasks"), "--backend", "kubernetes",
                           "--store", str(tmp / "s.db"), *args], capture_output=True, text=True, cwd=tmp, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "KUBECONFIG": str(tmp / "none")})


def test_cli_refuses_an_external_agent_on_pods_in_one_line(tmp_path: Path) -> None:
    r = _sweep(tmp_path, "--agent", "external", "--agent-command", "python3 my_agent.py")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("error: agent: external agents need an exec channel, which the kubernetes backend "
                                "does not give yet (local and docker do)")
    assert not (tmp_path / "s.db").exists()


def test_cli_refuses_an_agent_directory_on_pods_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"name": "x", "backend": "kubernetes", "tasks_dir": str(REPO / "tasks"),
                                   "agent": {"kind": "command", "command": "bash /agent/run.sh",
                                             "path": str(tmp_path / "agent")}}))
    r = subprocess.run([sys.executable, "-m", "orchestrator", "sweep", "--experiment", str(exp), "--store",
                        str(tmp_path / "s.db")], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")})
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "does not carry an agent directory into the pod yet" in r.stderr
    assert "Traceback" not in r.stderr
