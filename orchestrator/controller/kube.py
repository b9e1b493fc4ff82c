"""The Kubernetes client the controller uses: every request counted, errors typed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from orchestrator.controller.metrics import Metrics

_NAMED = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/(?P<resource>[^/]+)(?P<name>/[^/]+)?(?P<sub>/[^/]+)?")


def describe(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of a request URL, in the API server's own vocabulary."""
    parts = urlsplit(url)
    m = _NAMED.match(parts.path)
    if m is None:
        return method.lower(), "other"
    resource = m.group("resource")
    if resource == "namespaces" and m.group("name") and m.group("sub"):
        # /api/v1/namespaces/ns/pods: the path names a namespace then the resource
        rest = parts.path.split("/namespaces/", 1)[1].split("/")
        resource = rest[1] if len(rest) > 1 else "namespaces"
        has_name = len(rest) > 2
        sub = f"/{rest[3]}" if len(rest) > 3 else ""
    else:
        has_name = m.group("name") is not None
        sub = m.group("sub") or ""
    query = parse_qs(parts.query)
    verb = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method.upper(), method.lower()
    )
    if verb == "get" and not has_name:
        verb = "watch" if query.get("watch", [""])[0] in ("true", "1", "True") else "list"
    return verb, resource + sub


class InstrumentedApiClient(client.ApiClient):
    """An ApiClient that counts each request in the controller's metrics."""

    metrics: Metrics | None = None

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        verb, resource = describe(method, url)
        m = self.metrics
        try:
            response = super().call_api(method, url, *args, **kwargs)
        except ApiException as exc:
            if m:
                code = str(exc.status or 0)
                m.api_requests.labels(verb, resource, code).inc()
                m.api_errors.labels(verb, resource, code).inc()
            raise
        except Exception:
            if m:
                m.api_requests.labels(verb, resource, "0").inc()
                m.api_errors.labels(verb, resource, "0").inc()
            raise
        if m:
            code = str(getattr(response, "status", 0) or 0)
            m.api_requests.labels(verb, resource, code).inc()
            if int(code) >= 400:
                m.api_errors.labels(verb, resource, code).inc()
        return response


def make_client(kubeconfig: Path | None, metrics: Metrics | None = None, context: str | None = None) -> InstrumentedApiClient:
    """From a kubeconfig, or in-cluster (the pod's service account) when none is given and KUBECONFIG is unset."""
    cfg = client.Configuration()
    if kubeconfig is None:
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException:
            config.load_kube_config(client_configuration=cfg, context=context)
    else:
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg, context=context)
    api = InstrumentedApiClient(configuration=cfg)
    api.metrics = metrics
    return api


def current_namespace(kubeconfig: Path | None) -> str:
    """The namespace of the kubeconfig's current context, or the pod's, or 'default'."""
    sa_ns = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    if kubeconfig is None and sa_ns.is_file():
        return sa_ns.read_text().strip()
    try:
        _, active = config.list_kube_config_contexts(config_file=str(kubeconfig) if kubeconfig else None)
        return str(active.get("context", {}).get("namespace") or "default")
    except (config.ConfigException, OSError, TypeError):
        return "default"
