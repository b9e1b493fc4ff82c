"""An Experiment resource with a model gateway is refused: the controller runs none for its pods."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from orchestrator.controller.resources import ExperimentResourceSpec
from tests.cli_run import headroom as run_cli

REPO = Path(__file__).resolve().parents[2]

GATEWAY = {"openai": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "OPENAI_API_KEY"}}


def test_a_gateway_in_an_experiment_resource_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match="runs no model gateway"):
        ExperimentResourceSpec.model_validate({"task_source": {"bundle": "b"}, "gateway": GATEWAY})
    # the same spec without a gateway is a valid resource
    assert ExperimentResourceSpec.model_validate({"task_source": {"bundle": "b"}}).gateway is None


def test_submit_refuses_it_in_one_line_before_touching_a_cluster(tmp_path: Path) -> None:
    spec = tmp_path / "e.yaml"
    spec.write_text(
        yaml.safe_dump({"name": "g", "tasks_dir": str(REPO / "tasks"), "tasks": ["csv-report"], "gateway": GATEWAY})
    )
    res = run_cli(
        "cluster", "submit", str(spec), "--dry-run", "-n", "x", timeout=120, env={"KUBECONFIG": "/nonexistent"}
    )
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "runs no model gateway" in lines[0] and "Traceback" not in res.stderr, res.stderr
