"""The host side of a try's exec channel: a unix-socket server that runs each request on the
trial's :class:`~orchestrator.agents.exec.target.ExecTarget` and records it in the exec log.

One server per try, its socket in a directory only headroom's user can enter (the
trial's sandbox or container never sees it). Requests run concurrently, each in
its own thread. Every exec, refused ones included, becomes one
:class:`~orchestrator.artifacts.execlog.ExecRecord` line; the log is the try's
``exec-log.jsonl`` artifact. ``close`` refuses anything later: a call after the
agent's phase ended never reaches the environment.
"""

from __future__ import annotations

import os
import shlex
import socket
import socketserver
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.agents.exec import wire
from orchestrator.agents.exec.target import ExecResult, ExecTarget
from orchestrator.artifacts import execlog

#: The longest one exec may ask for when it names no timeout: the agent's own budget bounds it anyway.
DEFAULT_TIMEOUT_S = 3600.0


class ExecServer:
    def __init__(
        self,
        target: ExecTarget,
        *,
        default_cwd: str | None = None,
        base_env: Mapping[str, str] | None = None,
        max_timeout_s: float | None = None,
    ) -> None:
        self.target = target
        self.default_cwd = default_cwd
        self.base_env = dict(base_env or {})
        self.max_timeout_s = max_timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix="headroom-exec-"))
        os.chmod(self._dir, 0o700)
        self.socket_path = str(self._dir / "exec.sock")
        self._records: list[bytes] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                server._handle(self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self._server = Server(self.socket_path, Handler)
        os.chmod(self.socket_path, 0o600)
        #: ``$HEADROOM_EXEC``: the client, run by this very interpreter (the agent's own may lack headroom)
        self.command_path = str(self._dir / "headroom-exec")
        Path(self.command_path).write_text(
            f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m orchestrator.agents.exec.client "$@"\n'
        )
        os.chmod(self.command_path, 0o700)
        self._thread = threading.Thread(target=self._server.serve_forever, name="exec-server", daemon=True)

    def __enter__(self) -> ExecServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()
        Path(self.socket_path).unlink(missing_ok=True)
        Path(self.command_path).unlink(missing_ok=True)
        try:
            self._dir.rmdir()
        except OSError:
            pass

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._records)

    def log_bytes(self) -> bytes:
        with self._lock:
            return b"".join(self._records)

    # -- one request ---------------------------------------------------------------------
    def _handle(self, sock: socket.socket) -> None:
        started_at = datetime.now(UTC).isoformat()
        t0 = time.monotonic()
        try:
            req = wire.receive(sock)
        except (OSError, ValueError) as exc:
            self._reply(sock, {"error": f"bad request: {exc}"})
            return
        argv = req.get("argv")
        cwd = req.get("cwd") or self.default_cwd
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            self._reply(sock, {"error": "bad request: argv must be a non-empty list of strings"})
            return
        env = req.get("env") or {}
        if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            self._reply(sock, {"error": "bad request: env must map strings to strings"})
            return
        timeout = req.get("timeout_s")
        timeout_s = float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else DEFAULT_TIMEOUT_S
        if self.max_timeout_s is not None:
            timeout_s = min(timeout_s, self.max_timeout_s)
        if self._closed.is_set():
            result = ExecResult(exit_code=None, error="the trial's agent phase has ended")
        else:
            try:
                result = self.target.run(
                    argv,
                    cwd=cwd,
                    env={**self.base_env, **env},
                    stdin=wire.unb64(req.get("stdin")),
                    timeout_s=timeout_s,
                    user=req.get("user"),
                )
            except Exception as exc:  # noqa: BLE001 -- the environment failed, not the agent: say so to it
                result = ExecResult(exit_code=None, error=f"{type(exc).__name__}: {exc}")
        record: dict[str, Any] = {
            "command": argv,
            "cwd": cwd,
            "exit_code": result.exit_code,
            "signal": result.signal,
            "timed_out": result.timed_out,
            "duration_s": round(result.duration_s or (time.monotonic() - t0), 4),
            "stdout_bytes": result.stdout_bytes,
            "stderr_bytes": result.stderr_bytes,
            "started_at": started_at,
        }
        if result.error:
            record["error"] = result.error
        if req.get("user"):
            record["user"] = req["user"]
        with self._lock:
            self._records.append(execlog.dumps(execlog.ExecRecord.model_validate(record)))
        if result.error:
            self._reply(sock, {"error": result.error})
            return
        self._reply(
            sock,
            {
                "exit_code": result.exit_code,
                "signal": result.signal,
                "timed_out": result.timed_out,
                "duration_s": record["duration_s"],
                "stdout": wire.b64(result.stdout),
                "stderr": wire.b64(result.stderr),
                "stdout_bytes": result.stdout_bytes,
                "stderr_bytes": result.stderr_bytes,
            },
        )

    @staticmethod
    def _reply(sock: socket.socket, message: dict[str, Any]) -> None:
        try:
            wire.send(sock, message)
        except OSError:
            pass  # the agent hung up: its exec is on record all the same
