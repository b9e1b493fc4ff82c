"""Run a command in a pod's container over the API server's exec subresource (``kubernetes.stream``).

``kubernetes.stream.stream`` swaps the ``call_api`` of the client it is given while it opens the
websocket; on a client other threads share, their requests would go out as websockets meanwhile.
Each exec therefore opens its own client from the same configuration (and is counted on the
caller's client).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import client
from kubernetes.stream import stream
from websocket import WebSocketConnectionClosedException

from orchestrator.errors import ExecError
from orchestrator.kube.client import KubeClient


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None  # None: the command had not ended when the timeout passed
    stdout: str
    stderr: str


def exec_in_pod(
    api_client: Any,
    namespace: str,
    pod: str,
    command: Sequence[str],
    *,
    container: str | None = None,
    stdin: str | bytes | None = None,
    timeout: float = 60.0,
) -> ExecResult:
    """Run ``command`` (argv, no shell) in ``pod``; stdin, if given, is written then closed."""
    if isinstance(api_client, KubeClient):
        api_client.requests.add("create", "pods/exec")
    own = client.ApiClient(api_client.configuration)
    try:
        ws = stream(
            client.CoreV1Api(own).connect_get_namespaced_pod_exec,
            pod,
            namespace,
            command=list(command),
            container=container,
            stdin=stdin is not None,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
        )
        out: list[str] = []
        err: list[str] = []
        try:
            if stdin is not None:
                try:
                    ws.write_stdin(stdin)
                    ws.close_channel(0)  # end of input (v5 protocol; older servers keep stdin open)
                except WebSocketConnectionClosedException:
                    pass  # it ended (or never started) before reading its input: its status says which
            deadline = time.monotonic() + timeout
            while ws.is_open() and (left := deadline - time.monotonic()) > 0:
                ws.update(timeout=min(left, 1.0))
                if ws.peek_stdout():
                    out.append(ws.read_stdout())
                if ws.peek_stderr():
                    err.append(ws.read_stderr())
            out.append(ws.read_stdout(timeout=0) if ws.peek_stdout() else "")
            err.append(ws.read_stderr(timeout=0) if ws.peek_stderr() else "")
            code = None if ws.is_open() else _exit_code(ws.read_channel(3))
        finally:
            ws.close()
    finally:
        own.close()
    return ExecResult(code, "".join(out), "".join(err))


def _exit_code(status_text: str) -> int:
    """The exit code from the exec's status channel (a metav1.Status)."""
    status = yaml.safe_load(status_text or "") or {}
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            return int(cause["message"])
    raise ExecError(str(status.get("message") or status_text or "the exec ended without a status"))
