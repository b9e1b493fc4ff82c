"""The ``cluster`` group (submit, status, export, controller; ``nodes`` comes from nodes.py) and ``tasks push``.

They talk to the Kubernetes API with the user's kubeconfig (``--kubeconfig``, ``KUBECONFIG``
or ``~/.kube/config``; in a pod, the service account). The Kubernetes client is imported
only when one of these commands runs, so local sweeps never load it.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from rich.table import Table

from orchestrator.commands.console import err, out
from orchestrator.commands.options import (
    json_option,
    kube_context_option,
    kubeconfig_option,
    namespace_option,
    store_option,
)
from orchestrator.controller.main import controller as controller_command
from orchestrator.errors import NotFaithful, SpecError, UserError
from orchestrator.spec.unknown import first_validation_error


@click.group("cluster", short_help="in a Kubernetes cluster: submit, status, export, controller ...")
def cluster() -> None:
    """headroom in a Kubernetes cluster: submit an Experiment, follow it, export its Trials to a store; run the
    controller; advertise nodes for limit-aware placement (docs/kubernetes.md)."""


def kube_options(f: Any) -> Any:
    """--kubeconfig, --kube-context and --namespace; the command gets ``context``."""

    @functools.wraps(f)
    def adapter(*args: Any, kube_context: str | None = None, **kw: Any) -> Any:
        return f(*args, context=kube_context, **kw)

    return kubeconfig_option()(kube_context_option()(namespace_option()(adapter)))


class Kube:
    """API handles for one command."""

    def __init__(self, kubeconfig: Path | None, context: str | None, namespace: str | None) -> None:
        from orchestrator.errors import KubeConfigError
        from orchestrator.kube.api import client
        from orchestrator.kube.client import connect, current_namespace

        try:
            self.api = connect(kubeconfig, context)  # every file a KUBECONFIG list names, merged
        except KubeConfigError as exc:
            raise UserError(str(exc), field="--kubeconfig") from None
        self.namespace = namespace or current_namespace(kubeconfig, context)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """An API call whose failure is a one-line error, not a traceback."""
        from urllib3.exceptions import HTTPError

        from orchestrator.kube.api import ApiException
        from orchestrator.kube.errors import api_message

        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            message = api_message(exc)
            if exc.status == 404 and "could not find the requested resource" in message:
                message = "the headroom CRDs are not installed in this cluster (helm install headroom helm/headroom)"
            raise UserError(f"{what}: {exc.status} {message}") from None
        except (HTTPError, OSError) as exc:
            raise UserError(f"{what}: cannot reach the Kubernetes API ({type(exc).__name__})") from None


def dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    if not name:
        raise UserError(f"cannot make a Kubernetes name from {text!r}; pass --name", field="--name")
    return name


# ---- submit ---------------------------------------------------------------------------------


def experiment_resource(
    fields: dict[str, Any],
    source: str,
    name: str | None,
    namespace: str,
    push_tasks: Any,
    architectures: Any = None,
) -> dict[str, Any]:
    """An Experiment resource from an experiment file (or from a resource manifest).

    ``architectures(options)``: the CPU architectures of the nodes its pods could land on (None: not known, as for
    --dry-run); a task set the controller would refuse is refused here before anything is pushed."""
    from orchestrator.controller.resources import API_VERSION, ExperimentResourceSpec

    meta: dict[str, Any] = {}
    if fields.get("kind") == "Experiment":
        meta = dict(fields.get("metadata") or {})
        fields = dict(fields.get("spec") or {})
    fields = dict(fields)
    folder: Path | None = None
    if "task_source" not in fields:
        tasks_dir = fields.pop("tasks_dir", None)
        if not isinstance(tasks_dir, str):
            raise SpecError("give tasks_dir (pushed as ConfigMaps) or task_source", file=source, field="tasks_dir")
        folder = Path(tasks_dir)
        if not folder.is_absolute():
            folder = (Path(source).parent / folder).resolve()
        fields["task_source"] = {"bundle": "not-pushed-yet"}  # pushed once the checks below pass
    else:
        fields.pop("tasks_dir", None)
    from pydantic import ValidationError

    try:
        spec = ExperimentResourceSpec.model_validate(fields)
    except ValidationError as exc:
        field, msg = first_validation_error(exc, ExperimentResourceSpec)
        raise SpecError(msg, file=source, field=field) from None
    if folder is not None:  # what the controller would refuse (SpecInvalid), said here, in the CLI's words
        from orchestrator.engine import faithful
        from orchestrator.spec.kubernetes import KubernetesOptions
        from orchestrator.tasks.loader import load_tasks

        profile = faithful.Profile.declared("kubernetes")
        if architectures is not None:
            profile = profile.with_architectures(architectures(spec.kubernetes or KubernetesOptions()))
        got = faithful.check_experiment(spec, load_tasks(folder, spec.tasks), profile)
        if got.lines:
            raise NotFaithful("kubernetes", got.lines)
        spec = spec.model_copy(update={"task_source": type(spec.task_source)(bundle=push_tasks(folder))})
    meta["name"] = name or meta.get("name") or dns_name(spec.name)
    meta["namespace"] = namespace
    return {
        "apiVersion": API_VERSION,
        "kind": "Experiment",
        "metadata": meta,
        "spec": spec.model_dump(mode="json", exclude={"tasks_dir"}),
    }


@cluster.command("submit")
@click.argument("experiment_file", type=click.Path(path_type=Path))
@click.option("--name", help="the Experiment's name (default: its spec name)")
@click.option("--dry-run", is_flag=True, help="print the Experiment resource instead of creating it")
@kube_options
def submit(
    experiment_file: Path,
    name: str | None,
    dry_run: bool,
    kubeconfig: Path | None,
    context: str | None,
    namespace: str | None,
) -> None:
    """Create an Experiment in the cluster from EXPERIMENT_FILE (the same YAML as `sweep --experiment`).

    A tasks_dir in the file is pushed first as content-addressed ConfigMaps (see `tasks push`);
    a resource manifest (kind: Experiment) is accepted as well.
    """
    from orchestrator.commands.run import load_experiment_file
    from orchestrator.controller.resources import EXPERIMENT_PLURAL, GROUP, VERSION

    fields = load_experiment_file(experiment_file)
    if dry_run:  # content-addressed: the task set's name is known without pushing it
        from orchestrator.controller import tasksets
        from orchestrator.tasks.loader import load_tasks

        def local_name(folder: Path) -> str:
            return tasksets.set_name(tasksets.set_digest(load_tasks(folder)))

        body = experiment_resource(fields, str(experiment_file), name, namespace or "default", local_name)
        click.echo(yaml.safe_dump(body, sort_keys=False), nl=False)
        return
    kube = Kube(kubeconfig, context, namespace)

    def push(folder: Path) -> str:
        from orchestrator.controller import tasksets

        result = kube.call("push tasks", tasksets.push, kube.core, kube.namespace, folder)
        err.print(
            f"tasks: {result.tasks} from {folder} -> ConfigMap {result.name} "
            f"({result.created} created, {result.existing} already there)"
        )
        return result.name

    def architectures(options: Any) -> tuple[str, ...]:
        from orchestrator.backends.kubernetes import node_arch

        return node_arch.read(kube.core, options).architectures

    body = experiment_resource(fields, str(experiment_file), name, kube.namespace, push, architectures)
    created = kube.call(
        f"create Experiment {body['metadata']['name']}",
        kube.custom.create_namespaced_custom_object,
        GROUP,
        VERSION,
        kube.namespace,
        EXPERIMENT_PLURAL,
        body,
    )
    err.print(
        f"experiment {created['metadata']['name']} created in {kube.namespace}; "
        f"watch it with: headroom cluster status {created['metadata']['name']} -n {kube.namespace}"
    )
    click.echo(created["metadata"]["name"])


# ---- status ---------------------------------------------------------------------------------


def _pct(interval: dict[str, Any]) -> str:
    if interval.get("estimate") is None:
        return "-"
    return f"{interval['estimate']:.0%} [{interval['low']:.0%}, {interval['high']:.0%}]"


@cluster.command("status")
@click.argument("experiment", required=False)
@kube_options
@json_option
def status(
    experiment: str | None, kubeconfig: Path | None, context: str | None, namespace: str | None, as_json: bool
) -> None:
    """Progress of the Experiments in a namespace, or one Experiment per configuration."""
    from orchestrator.controller.resources import EXPERIMENT_PLURAL, GROUP, VERSION

    kube = Kube(kubeconfig, context, namespace)
    if experiment is None:
        items = kube.call(
            "list Experiments",
            kube.custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            kube.namespace,
            EXPERIMENT_PLURAL,
        )["items"]
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "namespace": kube.namespace,
                        "experiments": [
                            {
                                "name": e["metadata"]["name"],
                                "created": e["metadata"].get("creationTimestamp"),
                                "status": e.get("status") or {},
                            }
                            for e in items
                        ],
                    },
                    indent=2,
                    default=str,
                )
            )
            return
        table = Table(title=f"Experiments in {kube.namespace}")
        for col in ("name", "phase", "progress", "in flight", "infra errors", "created"):
            table.add_column(col)
        for e in items:
            st = e.get("status") or {}
            table.add_row(
                e["metadata"]["name"],
                st.get("phase", "Pending"),
                st.get("progress", ""),
                str(st.get("inFlight", 0)),
                st.get("infraErrors", ""),
                e["metadata"]["creationTimestamp"],
            )
        out.print(table if items else f"no Experiments in {kube.namespace}")
        return
    e = kube.call(
        f"get Experiment {experiment}",
        kube.custom.get_namespaced_custom_object,
        GROUP,
        VERSION,
        kube.namespace,
        EXPERIMENT_PLURAL,
        experiment,
    )
    st = e.get("status") or {}
    if as_json:
        click.echo(json.dumps({"namespace": kube.namespace, "name": experiment, "status": st}, indent=2, default=str))
        return
    out.print(
        f"[bold]{experiment}[/]  {st.get('phase', 'Pending')}  {st.get('progress', '0/?')} finished, "
        f"{st.get('inFlight', 0)} in flight, {st.get('tries', 0)} tries  run {st.get('runId', '-')}"
    )
    table = Table()
    for col in (
        "configuration",
        "finished",
        "passed",
        "failed",
        "abstained",
        "timeout",
        "infra",
        "harness",
        "pass rate [95% CI]",
        "infra-error rate [95% CI]",
    ):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for c in st.get("configurations", []):
        table.add_row(
            c["configuration"],
            f"{c['finished']}/{c['planned']}",
            str(c["passed"]),
            str(c["failed"]),
            str(c.get("abstained", 0)),
            str(c["timeout"]),
            str(c["infraError"]),
            str(c["harnessError"]),
            _pct(c["passRate"]),
            _pct(c["infraErrorRate"]),
        )
    out.print(table)
    for c in st.get("conditions", []):
        out.print(f"  {c['type']}={c['status']}  {c['reason']}: {c.get('message', '')}")


# ---- export ---------------------------------------------------------------------------------


@cluster.command("export")
@click.argument("experiment")
@store_option(
    default=None, required=True, help="SQLite store to write (created if missing); `headroom report STORE` reads it"
)
@kube_options
def export(
    experiment: str, store_path: Path, kubeconfig: Path | None, context: str | None, namespace: str | None
) -> None:
    """Copy an Experiment's Trials into a local store, so `report` and `compare` work unchanged."""
    from orchestrator.controller import export as export_mod

    kube = Kube(kubeconfig, context, namespace)
    result = export_mod.export(kube, experiment, store_path, argv=sys.argv)
    err.print(
        f"exported {experiment}: {result.trials} trials, {result.tries} tries "
        f"({result.unfinished} unfinished) -> {store_path} run {result.run_id}"
    )
    click.echo(result.run_id)


# ---- tasks push -------------------------------------------------------------------------------


@click.command("push")
@click.argument("tasks_dir", type=click.Path(path_type=Path))
@kube_options
def tasks_push(tasks_dir: Path, kubeconfig: Path | None, context: str | None, namespace: str | None) -> None:
    """Store the tasks of TASKS_DIR as content-addressed ConfigMaps; prints the task set's name."""
    from orchestrator.controller import tasksets

    kube = Kube(kubeconfig, context, namespace)
    result = kube.call("push tasks", tasksets.push, kube.core, kube.namespace, tasks_dir)
    err.print(
        f"{result.tasks} tasks -> {result.created} ConfigMaps created, {result.existing} already there "
        f"(namespace {kube.namespace})"
    )
    click.echo(result.name)


# ---- controller: orchestrator/controller/main.py (python -m orchestrator.controller parses the same command) --

cluster.add_command(controller_command)
