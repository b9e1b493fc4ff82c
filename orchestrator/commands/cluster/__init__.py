"""``headroom cluster``: headroom in a Kubernetes cluster. The group, and each of its commands from its own module.

They talk to the Kubernetes API with the user's kubeconfig; the client is imported only when one of them runs.
"""

from __future__ import annotations

import click

from orchestrator.commands.cluster import experiments, nodes
from orchestrator.controller.main import controller as controller_command


@click.group("cluster", short_help="in a Kubernetes cluster: submit, status, export, controller ...")
def cluster() -> None:
    """headroom in a Kubernetes cluster: submit an Experiment, follow it, export its Trials to a store; run the
    controller; advertise nodes for limit-aware placement (docs/kubernetes.md)."""


# controller: orchestrator/controller/main.py (python -m orchestrator.controller parses the same command)
for _command in (experiments.submit, experiments.status, experiments.export, controller_command, nodes.nodes):
    cluster.add_command(_command)
