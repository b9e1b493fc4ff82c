"""Build the API client: from every file ``KUBECONFIG`` lists (merged as kubectl merges them), or in-cluster.

The client counts each request it sends (``KubeClient.requests``) and, given the controller's
metrics, exports them too: one counter for the backend, the controller and the benchmarks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from orchestrator.errors import KubeConfigError
from orchestrator.kube.requests import RequestCounter, describe

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_KUBECONFIG = "~/.kube/config"


class RequestMetrics(Protocol):
    """The controller's Prometheus counters (orchestrator.controller.metrics.Metrics)."""

    api_requests: Any
    api_errors: Any


class KubeClient(client.ApiClient):
    """An ApiClient that counts each request it sends, and exports the count when given metrics."""

    def __init__(
        self, configuration: client.Configuration | None = None, metrics: RequestMetrics | None = None
    ) -> None:
        super().__init__(configuration=configuration)
        self.requests = RequestCounter()
        self.metrics = metrics

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        verb, resource = describe(method, url)
        self.requests.add(verb, resource)
        try:
            response = super().call_api(method, url, *args, **kwargs)
        except ApiException as exc:
            self._export(verb, resource, exc.status or 0)
            raise
        except Exception:
            self._export(verb, resource, 0)
            raise
        self._export(verb, resource, getattr(response, "status", 0) or 0)
        return response

    def _export(self, verb: str, resource: str, status: int) -> None:
        m = self.metrics
        if m is None:
            return
        code = str(status)
        m.api_requests.labels(verb, resource, code).inc()
        if status == 0 or status >= 400:
            m.api_errors.labels(verb, resource, code).inc()


def kubeconfig_files(kubeconfig: str | os.PathLike[str] | None = None) -> str | None:
    """The kubeconfig file list to merge: the one given, else ``$KUBECONFIG``, else ~/.kube/config if it exists.

    A list keeps every entry (``a:b``): the client merges them in order, as kubectl does.
    None: no kubeconfig at all (in a pod, the service account is used).
    """
    value = str(kubeconfig) if kubeconfig else os.environ.get("KUBECONFIG", "")
    entries = [os.path.expanduser(p) for p in value.split(os.pathsep) if p]
    if not entries:
        default = os.path.expanduser(DEFAULT_KUBECONFIG)
        return default if os.path.exists(default) else None
    missing = [p for p in entries if not os.path.exists(p)]
    if len(missing) == len(entries):
        raise KubeConfigError(f"kubeconfig not found: {', '.join(missing)}")
    return os.pathsep.join(entries)


def configuration(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None) -> client.Configuration:
    """The connection settings: merged kubeconfig files (see :func:`kubeconfig_files`), else in-cluster."""
    cfg = client.Configuration()
    files = kubeconfig_files(kubeconfig)
    try:
        if files is None:
            config.load_incluster_config(client_configuration=cfg)
        else:
            # persist_config=False: refreshed credentials are never written back into the user's files
            config.load_kube_config(config_file=files, context=context, client_configuration=cfg, persist_config=False)
    except config.ConfigException as exc:
        where = "no kubeconfig ($KUBECONFIG, ~/.kube/config) and not in a pod" if files is None else str(exc)
        raise KubeConfigError(f"cannot reach a Kubernetes cluster: {where}") from None
    except (OSError, ValueError, TypeError) as exc:  # an unreadable or malformed file
        raise KubeConfigError(f"cannot reach a Kubernetes cluster: {exc}") from None
    return cfg


def connect(
    kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None, metrics: RequestMetrics | None = None
) -> KubeClient:
    """A counting client for the cluster the kubeconfig (or the pod's service account) names."""
    return KubeClient(configuration(kubeconfig, context), metrics)


def counted(api_client: Any) -> KubeClient:
    """``api_client`` if it counts its requests, else a counting client with the same configuration."""
    if isinstance(api_client, KubeClient):
        return api_client
    own = KubeClient(api_client.configuration)
    own.default_headers.update(api_client.default_headers)  # Impersonate-User and the like go along
    own.cookie = getattr(api_client, "cookie", None)
    return own


def current_namespace(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's current context, or the pod's, or 'default'."""
    try:
        files = kubeconfig_files(kubeconfig)
    except KubeConfigError:
        return "default"
    if files is None:
        if SERVICE_ACCOUNT_NAMESPACE.is_file():
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        return "default"
    try:
        contexts, active = config.list_kube_config_contexts(config_file=files)
        if context:
            active = next((c for c in contexts if c.get("name") == context), active)
        return str((active or {}).get("context", {}).get("namespace") or "default")
    except (config.ConfigException, OSError, TypeError, ValueError):
        return "default"
