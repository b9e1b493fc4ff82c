"""The controller process's command line: ``headroom cluster controller`` and ``python -m orchestrator.controller``.

One command, registered in the CLI's ``cluster`` group (orchestrator/commands/cluster/) and run on
its own by ``python -m orchestrator.controller`` without importing the rest of the CLI (the report
stack pulls in pandas), so a long-running controller stays small. It lives with the controller, and
the options it shares with the CLI come from orchestrator/clickopts.py, so that no module of the
controller imports the CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from orchestrator.clickopts import keep_pods_option, kubeconfig_option, namespace_option
from orchestrator.errors import UserError

err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


@click.command("controller")
@kubeconfig_option("kubeconfig file (default: in-cluster, else ~/.kube/config)", envvar=None)
@namespace_option("namespace whose Experiments to run (default: the pod's or the context's)")
@click.option(
    "--metrics-address", default="127.0.0.1:8080", show_default=True, help="HOST:PORT for /metrics and /healthz"
)
@click.option("--workers", type=click.IntRange(1, 16), default=2, show_default=True)
@click.option("--resync-seconds", type=click.FloatRange(min=1), default=30.0, show_default=True)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
@click.option("--leader-elect", is_flag=True, help="take a coordination.k8s.io Lease first (run two replicas)")
@click.option("--lease-name", default="headroom-controller", show_default=True)
@click.option("--lease-namespace", help="default: --namespace")
@click.option("--lease-duration", type=click.IntRange(2), default=15, show_default=True)
@click.option("--renew-deadline", type=click.IntRange(2), default=10, show_default=True)
@click.option("--retry-period", type=click.IntRange(1), default=2, show_default=True)
@click.option("--identity", help="leader-election identity (default: $POD_NAME or host-pid)")
@keep_pods_option()
def controller(
    kubeconfig: Path | None,
    namespace: str | None,
    metrics_address: str,
    workers: int,
    resync_seconds: float,
    log_level: str,
    leader_elect: bool,
    lease_name: str,
    lease_namespace: str | None,
    lease_duration: int,
    renew_deadline: int,
    retry_period: int,
    identity: str | None,
    keep_pods: bool,
) -> None:
    """Run the controller: reconcile Experiments into Trials and trial pods (crash-only; all state in the API)."""
    from orchestrator.controller import logs
    from orchestrator.controller.backend import backend_factory
    from orchestrator.controller.manager import Controller, ControllerConfig
    from orchestrator.kube.client import current_namespace

    if leader_elect and not lease_duration > renew_deadline > 1.2 * retry_period:
        raise UserError("need --lease-duration > --renew-deadline > 1.2 x --retry-period", field="--lease-duration")
    logs.configure(log_level)
    cfg = ControllerConfig(
        namespace=namespace or current_namespace(kubeconfig),
        kubeconfig=kubeconfig,
        metrics_address=metrics_address,
        workers=workers,
        resync_seconds=resync_seconds,
        leader_elect=leader_elect,
        lease_name=lease_name,
        lease_namespace=lease_namespace,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
    )
    if identity:
        cfg.identity = identity
    cfg.keep_pods = keep_pods
    Controller(cfg, backend_factory()).run()


def controller_main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m orchestrator.controller``: user mistakes are one line, exit 2."""
    try:
        controller.main(args=argv, prog_name="headroom cluster controller", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except UserError as exc:
        err.print(f"[bold red]error:[/] {exc.one_line()}", soft_wrap=True)
        sys.exit(2)
