"""The example Experiment and its rendered resource stay in step with the code."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.controller.resources import ExperimentResourceSpec
from orchestrator.controller.tasksets import bundle_body, bundles, index_body, set_digest, set_name
from orchestrator.spec.experiment import Experiment
from orchestrator.tasks.loader import load_tasks

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests" / "examples" / "experiment.yaml"
RENDERED = REPO / "manifests" / "examples" / "experiment-resource.yaml"


def test_rendered_example_matches_submit_dry_run() -> None:
    result = CliRunner().invoke(
        cli,
        ["cluster", "submit", str(EXAMPLE.relative_to(REPO)), "--dry-run", "-n", "headroom"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    committed = [line for line in RENDERED.read_text().splitlines() if not line.startswith("#")]
    assert committed == result.output.splitlines(), (
        "manifests/examples/experiment-resource.yaml is stale: re-render it with "
        "headroom cluster submit manifests/examples/experiment.yaml --dry-run -n headroom"
    )


def test_example_runs_locally_and_names_the_bundled_task_set() -> None:
    fields = yaml.safe_load(EXAMPLE.read_text())
    local = Experiment.model_validate({**fields, "tasks_dir": str((EXAMPLE.parent / fields["tasks_dir"]).resolve())})
    assert [c.label for c in local.configurations] == ["1x-strict", "1x/3x", "unbounded"]
    resource = yaml.safe_load(RENDERED.read_text())
    spec = ExperimentResourceSpec.model_validate(resource["spec"])
    tasks = load_tasks(REPO / "tasks")
    assert spec.task_source.bundle == set_name(set_digest(tasks))  # content-addressed: names the bundled set
    assert spec.configurations == local.configurations


def test_pushed_bundles_are_the_pod_backends_configmaps() -> None:
    from orchestrator.tasks.files import bundle

    tasks = load_tasks(REPO / "tasks")
    made = bundles(tasks)
    for t, b in zip(tasks, made):
        body = bundle_body(b)
        assert body["immutable"] is True and body["metadata"]["name"] == bundle(t.id, t.path, t.digest).name
        assert body["data"] == bundle(t.id, t.path, t.digest).configmap({})["data"]  # what trial pods mount
    index = index_body(tasks, made)
    assert index["metadata"]["name"] == set_name(set_digest(tasks))
