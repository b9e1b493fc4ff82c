"""The exec channel's Python API: how an agent on the host acts on its trial's environment.

>>> from orchestrator.agents import exec as hx
>>> r = hx.run(["ls", "/app"])                   # or hx.run("cd /app && make", timeout=60)
>>> r.exit_code, r.stdout

The channel is the try's own (``$HEADROOM_EXEC_SOCKET``, set by headroom for an
external agent); every command runs inside the trial's environment and limits and
is recorded in the try's exec log. The same as a command: ``$HEADROOM_EXEC -- ls /app``.

This file is the whole client, wire format included, and imports the standard
library only: copy it into an agent's own environment as, say, ``headroom_exec.py``
and ``import headroom_exec as hx`` (tests/agents/test_exec_client.py runs such a copy
with a bare interpreter). Keep it so: no import from the rest of headroom.
"""

from __future__ import annotations

import base64
import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SOCKET_VAR = "HEADROOM_EXEC_SOCKET"
COMMAND_VAR = "HEADROOM_EXEC"

# -- the wire format (orchestrator.agents.exec.wire re-exports it for the server) --------------
# One JSON request, one JSON reply, one connection per exec, each a newline-terminated object; bytes as base64.

#: The largest request accepted (stdin included).
MAX_REQUEST = 64 * 1024 * 1024


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def receive(sock: socket.socket, limit: int = MAX_REQUEST) -> dict[str, Any]:
    """One newline-terminated JSON object; ValueError when it is not one or is too long."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        nl = chunk.find(b"\n")
        if nl >= 0:
            chunks.append(chunk[:nl])
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"message longer than {limit} bytes")
    value = json.loads(b"".join(chunks) or b"null")
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


# -- the client -----------------------------------------------------------------------------


class ExecChannelError(RuntimeError):
    """The channel itself failed (no channel, the environment is gone): not the command's exit status."""


@dataclass
class Completed:
    exit_code: int | None  # None: killed (see signal) or timed out
    stdout: bytes
    stderr: bytes
    signal: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    stdout_bytes: int = 0  # all it wrote; stdout holds at most the channel's cap
    stderr_bytes: int = 0

    @property
    def returncode(self) -> int:
        """As a shell reports it: 124 for a timeout (like ``timeout(1)``), 128+N for signal N."""
        if self.timed_out:
            return 124
        if self.signal is not None:
            return 128 + self.signal
        return self.exit_code if self.exit_code is not None else 125

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


def run(
    command: str | Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | str | None = None,
    timeout: float | None = None,
    user: str | None = None,
    socket_path: str | None = None,
) -> Completed:
    """Run ``command`` (an argv, or a string for ``bash -c``) in the trial's environment and wait for it."""
    path = socket_path or os.environ.get(SOCKET_VAR)
    if not path:
        raise ExecChannelError(f"no exec channel: ${SOCKET_VAR} is not set (headroom sets it for external agents)")
    argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("an empty command")
    data = stdin.encode() if isinstance(stdin, str) else stdin
    request = {
        "argv": argv,
        "cwd": cwd,
        "env": dict(env or {}),
        "timeout_s": timeout,
        "user": user,
        "stdin": b64(data) if data is not None else None,
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
            send(sock, request)
            sock.shutdown(socket.SHUT_WR)
            reply = receive(sock, limit=1 << 40)
        except (OSError, ValueError) as exc:
            raise ExecChannelError(f"exec channel {path}: {exc}") from exc
    if reply.get("error"):
        raise ExecChannelError(str(reply["error"]))
    return Completed(
        exit_code=reply.get("exit_code"),
        stdout=unb64(reply.get("stdout")),
        stderr=unb64(reply.get("stderr")),
        signal=reply.get("signal"),
        timed_out=bool(reply.get("timed_out")),
        duration_s=float(reply.get("duration_s") or 0.0),
        stdout_bytes=int(reply.get("stdout_bytes") or 0),
        stderr_bytes=int(reply.get("stderr_bytes") or 0),
    )
