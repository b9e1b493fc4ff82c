"""Helpers for the controller's cluster tests: install the chart, act as its ServiceAccount,
run the controller as a real process out of cluster, scrape its metrics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.cli_run import headroom as run_cli

from .plane import FAKE_NODE_TOLERATION, REPO, Cluster, free_port, wait_for

CHART = REPO / "helm" / "headroom"
RELEASE = "headroom"
SERVICE_ACCOUNT = "headroom"  # fullname of release "headroom" of chart "headroom"

#: Values that land the chart's pods on the kwok nodes (kwok marks them Running and Ready).
KWOK_VALUES = [
    "--set",
    "nodeSelector.type=kwok",
    "--set",
    f"tolerations[0].key={FAKE_NODE_TOLERATION['key']}",
    "--set",
    "tolerations[0].operator=Exists",
    "--set",
    "tolerations[0].effect=NoSchedule",
]


def headroom(
    cluster: Cluster, *args: str, kubeconfig: Path | None = None, cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The headroom CLI as a user runs it, against the test plane (``--kubeconfig``: the cluster's, or ``kubeconfig``)."""
    return run_cli(*args, "--kubeconfig", str(kubeconfig or cluster.kubeconfig), cwd=cwd, timeout=timeout)


def install_crds(cluster: Cluster) -> None:
    """The chart's CRDs, as `helm install` would create them (idempotent; CRDs are cluster-wide)."""
    ext = client.ApiextensionsV1Api(cluster.api_client)
    for f in sorted((CHART / "crds").glob("*.yaml")):
        body = yaml.safe_load(f.read_text())
        try:
            ext.create_custom_resource_definition(body)
        except client.exceptions.ApiException as exc:
            if exc.status != 409:
                raise
        name = body["metadata"]["name"]
        # wait_for calls the lambda before the loop moves on, so the late binding is harmless.
        wait_for(
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in (ext.read_custom_resource_definition(name).status.conditions or [])  # noqa: B023
            ),
            30,
            f"CRD {name} established",
        )


@pytest.fixture
def crds(cluster: Cluster) -> None:
    install_crds(cluster)


def helm_install(cluster: Cluster, namespace: str, *extra: str, wait: bool = True) -> subprocess.CompletedProcess[str]:
    args = ["install", RELEASE, str(CHART), "--namespace", namespace, *KWOK_VALUES, *extra]
    if wait:
        args += ["--wait", "--timeout", "120s"]
    return cluster.helm(*args, timeout=180)


def service_account_kubeconfig(cluster: Cluster, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig holding a token of ``sa``: whoever uses it is that ServiceAccount, RBAC and all."""
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = admin["clusters"][0]["cluster"]
    token = cluster.core.create_namespaced_service_account_token(
        sa,
        namespace,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    ).status.token
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": server}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": sa, "namespace": namespace}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


class ControllerProcess:
    """``headroom controller`` as a child process (so kill -9 is a real kill -9)."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log: Path,
        *args: str,
        simulated: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.log = log
        self.env = env or {}
        entry = ["tests.cluster.run_controller"] if simulated else ["orchestrator.controller"]
        self.argv = [
            sys.executable,
            "-m",
            *entry,
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            namespace,
            "--metrics-address",
            f"127.0.0.1:{self.port}",
            *args,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> ControllerProcess:
        """Start the process and return at once (``start`` also waits for its /metrics)."""
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            )
        return self

    def start(self) -> ControllerProcess:
        self.launch()
        wait_for(lambda: self.scrape() is not None or not self.alive(), 30, "controller /metrics")
        assert self.alive(), self.log.read_text()[-3000:]
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill9()

    def scrape(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
                return r.read().decode()
        except OSError:
            return None

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one sample, or None."""
        from prometheus_client.parser import text_string_to_metric_families

        text = self.scrape()
        if text is None:
            return None
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return float(s.value)
        return None


def can(
    cluster: Cluster,
    user: str,
    groups: list[str],
    namespace: str | None,
    verb: str,
    resource: str,
    group: str = "",
    subresource: str = "",
    name: str = "",
) -> bool:
    """What the API server's authorizer says (SubjectAccessReview, as `kubectl auth can-i --as` asks)."""
    attrs: dict[str, Any] = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attrs["namespace"] = namespace
    if subresource:
        attrs["subresource"] = subresource
    if name:
        attrs["name"] = name
    review = client.AuthorizationV1Api(cluster.api_client).create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attrs},
        }
    )
    return bool(review.status.allowed)


def wait_until(ok: Any, timeout: float, what: str) -> None:
    wait_for(ok, timeout, what, interval=0.5)


__all__ = ["CHART", "ControllerProcess", "helm_install", "service_account_kubeconfig", "can", "time"]


@contextmanager
def reconciler(
    cluster: Cluster, namespace: str, make_backend: Callable[[str, Any], Any], *, scratch: Path | None = None
) -> Iterator[Any]:
    """The controller's real reconciler over real informers of ``namespace`` (synced), stopped on exit."""
    from orchestrator.controller.events import EventRecorder
    from orchestrator.controller.manager import slim_experiment, slim_trial
    from orchestrator.controller.metrics import Metrics
    from orchestrator.controller.reconcile import Reconciler
    from orchestrator.controller.resources import EXPERIMENT_PLURAL, GROUP, TRIAL_PLURAL, VERSION
    from orchestrator.kube.watch import Informer, wait_synced

    custom = client.CustomObjectsApi(cluster.api_client)
    experiments = Informer(
        "experiment",
        lambda **kw: custom.list_namespaced_custom_object(GROUP, VERSION, namespace, EXPERIMENT_PLURAL, **kw),
        transform=slim_experiment,
    )
    trials = Informer(
        "trial",
        lambda **kw: custom.list_namespaced_custom_object(GROUP, VERSION, namespace, TRIAL_PLURAL, **kw),
        transform=slim_trial,
    )
    for inf in (experiments, trials):
        inf.start()
    try:
        assert wait_synced([experiments, trials], timeout=60)
        yield Reconciler(
            namespace=namespace,
            custom=custom,
            core=cluster.core,
            experiments=experiments,
            trials=trials,
            make_backend=make_backend,
            metrics=Metrics(),
            events=EventRecorder(cluster.core, namespace, "test"),
            **({"scratch": scratch} if scratch is not None else {}),
        )
    finally:
        for inf in (experiments, trials):
            inf.stop()
