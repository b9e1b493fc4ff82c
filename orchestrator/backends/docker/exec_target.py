"""The Docker backend's side of an external agent: ``exec`` in the try's container as its exec channel's target.

Each exec is an Engine API exec in the running container (so it is inside the container's
cgroup, namespaces and network: the same limits as everything else of the try), with the
requested user, working dir, variables and stdin (over the exec's hijacked socket when
stdin is given). A timeout kills the exec's process tree from the host (the API has no
kill for an exec); the output is kept up to :data:`~orchestrator.agents.exec.target.MAX_OUTPUT`
per stream and counted whole.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import docker
import docker.errors
import psutil
from docker.utils.socket import frames_iter

from orchestrator.agents.exec.target import MAX_OUTPUT, ExecResult

#: After an exec's main process exits, how long its output may keep flowing (a background child holding it).
DRAIN_S = 2.0
_STDOUT, _STDERR = 1, 2


class _Sink:
    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.kept = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if self.kept < MAX_OUTPUT:
            piece = data[: MAX_OUTPUT - self.kept]
            self.parts.append(piece)
            self.kept += len(piece)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class ContainerExec:
    """An :class:`~orchestrator.agents.exec.target.ExecTarget` on the Docker backend."""

    def __init__(
        self,
        api: docker.APIClient,
        stream_api: docker.APIClient,
        container_id: str,
        *,
        env: Mapping[str, str],
        workdir: str,
    ) -> None:
        self.api, self.stream_api, self.cid = api, stream_api, container_id
        self.env, self.workdir = dict(env), workdir

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float | None = None,
        user: str | None = None,
    ) -> ExecResult:
        started = time.monotonic()
        try:
            exec_id = self.api.exec_create(
                self.cid,
                list(argv),
                environment={**self.env, **(env or {})},
                workdir=cwd or self.workdir,
                user=user or "",
                stdin=stdin is not None,
                stdout=True,
                stderr=True,
            )["Id"]
        except docker.errors.APIError as exc:
            return ExecResult(exit_code=None, error=f"cannot exec in the container: {exc.explanation or exc}")
        out, err = _Sink(), _Sink()
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                if stdin is None:
                    for o, e in self.stream_api.exec_start(exec_id, stream=True, demux=True):
                        if o:
                            out.add(o)
                        if e:
                            err.add(e)
                    return
                sock: Any = self.stream_api.exec_start(exec_id, socket=True)
                raw = getattr(sock, "_sock", sock)
                raw.sendall(stdin)
                raw.shutdown(socket.SHUT_WR)
                for stream, data in frames_iter(sock, tty=False):
                    (out if stream == _STDOUT else err).add(data)
            except Exception as exc:  # noqa: BLE001 -- the container went away: the result says so
                failure.append(exc)

        reader = threading.Thread(target=pump, name="container-exec", daemon=True)
        reader.start()
        deadline = None if timeout_s is None else started + timeout_s
        timed_out, exited_at, seen = False, None, 0
        while reader.is_alive():
            reader.join(0.1)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                timed_out = True
                self._kill(exec_id)
                reader.join(5)
                break
            if exited_at is None and self._running(exec_id) is False:
                exited_at = now
            if exited_at is not None and out.total + err.total != seen:  # still arriving: a late flush (steps.py)
                seen, exited_at = out.total + err.total, now
            if exited_at is not None and now - exited_at > DRAIN_S:
                break
        try:
            info = self.api.exec_inspect(exec_id)
        except docker.errors.APIError:
            info = {}
        code = None if timed_out or info.get("Running") else info.get("ExitCode")
        result = ExecResult(
            exit_code=code,
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            stdout=out.bytes(),
            stderr=err.bytes(),
            stdout_bytes=out.total,
            stderr_bytes=err.total,
        )
        if code is None and not timed_out and failure:
            result.error = f"lost the exec's output stream: {failure[0]}"
        return result

    def _running(self, exec_id: str) -> bool | None:
        """None when the daemon could not say: no exit, so no drain (steps.py)."""
        try:
            return bool(self.api.exec_inspect(exec_id).get("Running"))
        except docker.errors.APIError:
            return None

    def _kill(self, exec_id: str) -> None:
        """The exec's process and its descendants, by their host pids (the API cannot stop one exec)."""
        try:
            pid = int(self.api.exec_inspect(exec_id).get("Pid") or 0)
        except docker.errors.APIError:
            return
        if pid <= 0:
            return
        try:
            proc = psutil.Process(pid)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
