"""What the commands that talk to a cluster share: its options (--kubeconfig, --kube-context, --namespace) and
API handles whose failures are one-line errors. The Kubernetes client is imported only when one runs."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from orchestrator.commands.options import kube_context_option, kubeconfig_option, namespace_option
from orchestrator.errors import UserError


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
