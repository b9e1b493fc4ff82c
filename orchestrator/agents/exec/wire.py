"""The exec channel's wire format: one JSON request, one JSON reply, one connection per exec.

Standard library only, so the client (``$HEADROOM_EXEC``, :mod:`orchestrator.agents.exec`)
starts fast and can be copied into an agent's own environment. Bytes travel as base64.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

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
