"""What happens inside a try's container, through the Engine API: run a step, stop everything, move files.

* :func:`run_step` runs a command with ``exec`` in the image's WORKDIR, streams
  its output (keeping the tails) and enforces the step's timeout from outside:
  on expiry every process but the keep-alive is killed, which ends the exec.
* :func:`kill_all` kills every process in the container except PID 1 (the
  keep-alive, which the kernel protects from signals sent inside its PID
  namespace) and checks with the API's process list that none is left.
* :func:`put_tree` / :func:`read_small` copy files in and out with the archive
  endpoints, so the image needs no ``tar``, ``cat`` or shell for them.
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orchestrator.spec.facts import StepFacts

TAIL_BYTES = 4096
#: After the step's main process has exited, how long its output may keep flowing (background children).
DRAIN_S = 5.0
KILL_ROUNDS = 50


class _Tail:
    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0

    def add(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        while self.size - len(self.chunks[0]) >= TAIL_BYTES:
            self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        return b"".join(self.chunks)[-TAIL_BYTES:].decode("utf-8", "replace")


def exec_once(api: docker.APIClient, container_id: str, argv: list[str], *, user: str = "0") -> tuple[int, str]:
    """A short helper command as root: (exit code, output)."""
    exec_id = api.exec_create(container_id, argv, user=user, stdout=True, stderr=True)["Id"]
    out = api.exec_start(exec_id)
    code = api.exec_inspect(exec_id).get("ExitCode")
    return (code if code is not None else -1), (out or b"").decode("utf-8", "replace")


def kill_all(api: docker.APIClient, container_id: str, then: str = "") -> tuple[int, str | None]:
    """Kill every process but PID 1, then run ``then`` (a shell command) in the same exec, until the
    process list shows PID 1 alone.

    Returns (processes left, None) or, when ``then`` failed in the last round, (0, its output).
    ``then`` runs after the last kill round that left nothing behind, so what it cleans no agent
    process can write to again.
    """
    remaining = -1
    script = "kill -9 -1 2>/dev/null; " + (then or "true")
    code, out = 0, ""
    for _ in range(KILL_ROUNDS):
        # kill(-1) reaches every process this root may signal except the caller and init.
        code, out = exec_once(api, container_id, ["sh", "-c", script])
        remaining = max(0, len(_processes(api, container_id)) - 1)  # the keep-alive stays
        if remaining == 0:
            break
        time.sleep(0.02)
    return remaining, (None if code == 0 or remaining else out.strip()[-500:] or f"exit {code}")


def _processes(api: docker.APIClient, container_id: str) -> list[list[str]]:
    """The container's live processes (the API's default ``top``; its last column is the command).

    Zombies (``<defunct>``, as Podman lists them) are left out: PID 1 (``sleep``) reaps no orphan,
    and a zombie runs no code. No ``ps`` arguments are passed: Podman runs ``ps`` with arguments
    inside the container, where it counts itself (and the image may have no ``ps``).
    """
    rows = api.top(container_id).get("Processes") or []
    return [r for r in rows if r and not str(r[-1]).rstrip().endswith("<defunct>")]


def run_step(
    api: docker.APIClient,
    stream_api: docker.APIClient,
    container_id: str,
    name: str,
    argv: list[str],
    *,
    env: dict[str, str],
    workdir: str,
    timeout_s: float,
    cancelled: threading.Event,
) -> StepFacts:
    facts = StepFacts(name=name)
    started = time.monotonic()
    try:
        exec_id = api.exec_create(container_id, argv, environment=env, workdir=workdir or None, stdout=True,
                                  stderr=True)["Id"]
    except docker.errors.APIError as exc:
        facts.spawn_error = f"cannot exec in the container: {exc.explanation or exc}"
        return facts
    out, err = _Tail(), _Tail()
    failure: list[BaseException] = []

    def pump() -> None:
        try:
            for stdout, stderr in stream_api.exec_start(exec_id, stream=True, demux=True):
                if stdout:
                    out.add(stdout)
                if stderr:
                    err.add(stderr)
        except Exception as exc:  # noqa: BLE001 - the container went away (cancel) or the daemon did
            failure.append(exc)

    reader = threading.Thread(target=pump, name=f"exec-{name}", daemon=True)
    reader.start()
    deadline = started + timeout_s
    exited_at: float | None = None
    while reader.is_alive():
        reader.join(0.2)
        now = time.monotonic()
        if cancelled.is_set():
            break
        if now >= deadline:
            facts.timed_out = True
            break
        if exited_at is None and not _running(api, exec_id):
            exited_at = now
        if exited_at is not None and now - exited_at > DRAIN_S:
            break  # a background child holds the output open; the step itself is over
    if facts.timed_out or cancelled.is_set():
        try:
            kill_all(api, container_id)
        except docker.errors.APIError:
            pass
        reader.join(10)
    facts.duration_s = time.monotonic() - started
    try:
        info = api.exec_inspect(exec_id)
    except docker.errors.APIError:
        info = {}
    code = info.get("ExitCode")
    if code is not None and not info.get("Running"):
        if code > 128:
            facts.signal = code - 128  # a shell's convention; exec reports no signal of its own
        facts.exit_code = code
    if failure and not cancelled.is_set() and not facts.timed_out and code is None:
        facts.spawn_error = f"lost the step's output stream: {failure[0]}"
    facts.stdout_tail = out.text()
    facts.stderr_tail = err.text()
    return facts


def _running(api: docker.APIClient, exec_id: str) -> bool:
    try:
        return bool(api.exec_inspect(exec_id).get("Running"))
    except docker.errors.APIError:
        return False


def _add_dir(tar: tarfile.TarFile, arcname: str, mode: int) -> None:
    ti = tarfile.TarInfo(arcname)
    ti.type = tarfile.DIRTYPE
    ti.mode = mode
    ti.mtime = int(time.time())
    tar.addfile(ti)


def tree_archive(dirs: Iterable[tuple[str, int]], trees: Iterable[tuple[Path, str]] = (),
                 files: Iterable[tuple[str, bytes, int]] = (), links: Iterable[tuple[str, str]] = ()) -> bytes:
    """A tar to unpack at ``/``: empty dirs (path, mode), host trees or files (source, target),
    files (path, bytes, mode), symlinks (path, target).

    Everything is owned by root; file modes are kept, so test.sh needs no chmod.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, mode in dirs:
            _add_dir(tar, path.strip("/"), mode)
        for source, target in trees:
            root = target.strip("/")
            if source.is_file():
                _add_file(tar, source, root)
                continue
            _add_dir(tar, root, 0o755)
            for p in sorted(source.rglob("*")):
                _add_file(tar, p, f"{root}/{p.relative_to(source).as_posix()}")
        for path, data, mode in files:
            ti = tarfile.TarInfo(path.strip("/"))
            ti.size = len(data)
            ti.mode = mode
            ti.mtime = int(time.time())
            tar.addfile(ti, io.BytesIO(data))
        for path, target in links:
            ti = tarfile.TarInfo(path.strip("/"))
            ti.type = tarfile.SYMTYPE
            ti.linkname = target
            ti.mtime = int(time.time())
            tar.addfile(ti)
    return buf.getvalue()


def _add_file(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    ti = tar.gettarinfo(str(path), arcname=arcname)
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    if ti.isfile():
        with path.open("rb") as f:
            tar.addfile(ti, f)
    else:
        tar.addfile(ti)


def put_archive(api: docker.APIClient, container_id: str, data: bytes) -> None:
    if not api.put_archive(container_id, "/", data):
        raise RuntimeError("the daemon refused the archive")


def read_small(api: docker.APIClient, container_id: str, path: str, limit: int) -> tuple[bytes | None, str | None]:
    """(contents, None), (None, None) if absent, or (None, why) if it is not a small regular file."""
    try:
        stream, stat = api.get_archive(container_id, path)
    except docker.errors.NotFound:
        return None, None
    if not isinstance(stat, dict) or stat.get("size", 0) > limit:
        for _ in stream:  # drain so the connection can be reused
            pass
        return None, f"larger than {limit} bytes"
    raw = b"".join(stream)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        member = next((m for m in tar.getmembers()), None)
        if member is None or not member.isfile():
            return None, "not a regular file"
        f = tar.extractfile(member)
        return (f.read(limit + 1) if f else b""), None


def stats_once(api: docker.APIClient, container_id: str) -> dict[str, Any]:
    try:
        try:
            return api.stats(container_id, stream=False, one_shot=True) or {}
        except docker.errors.InvalidVersion:  # API before 1.41: one sample after a second's wait
            return api.stats(container_id, stream=False) or {}
    except docker.errors.APIError:
        return {}
