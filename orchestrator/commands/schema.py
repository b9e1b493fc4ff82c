"""``headroom schema``: the JSON Schema of what headroom reads and stores."""

from __future__ import annotations

import json

import click


@click.command()
@click.argument("what", type=click.Choice(["experiment", "task", "evidence"]))
def schema(what: str) -> None:
    """Print the JSON Schema of an experiment spec, a task.toml, or a try's stored evidence (versioned)."""
    if what == "evidence":
        from orchestrator.spec.facts import evidence_schema

        click.echo(json.dumps(evidence_schema(), indent=2))
        return
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.task import TaskSpec

    model = Experiment if what == "experiment" else TaskSpec
    click.echo(json.dumps(model.model_json_schema(), indent=2))
