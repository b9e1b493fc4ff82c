"""What happens inside a try's container, through the Engine API: run a step, stop everything, move files.

* :func:`run_step` runs a command with ``exec`` in the image's WORKDIR, streams
  its output (keeping the tails) and enforces the step's timeout from outside:
  on expiry it calls ``on_expiry`` (the backend stops the container through the
  API, which kills every process in it and ends the exec).
* :func:`processes` is the API's view of the container's processes.
* :func:`tree_archive` / :func:`read_small` copy files in and out with the archive
  endpoints, so the image needs no ``tar``, ``cat`` or shell for them; an
  archive can also empty a folder or replace a path (the daemon unpacks it with
  its own code, not the container's tools).

Nothing here runs a command of the image's on headroom's behalf: a root agent
can replace any of them (a shadowed ``sh`` once made the old in-container kill
step a no-op).
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orchestrator.spec.facts import StepFacts

TAIL_BYTES = 4096
#: After the step's main process has exited, how long its output may keep flowing (background children).
DRAIN_S = 5.0


class _Tail:
    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.received = 0  # every byte, the tail's cut ones too: whether output still arrives

    def add(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        self.received += len(data)
        while self.size - len(self.chunks[0]) >= TAIL_BYTES:
            self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        return b"".join(self.chunks)[-TAIL_BYTES:].decode("utf-8", "replace")


def processes(api: docker.APIClient, container_id: str) -> list[list[str]]:
    """Every process the API lists in the container, zombies included.

    No row is skipped for what its command line says: a process chooses its own command
    line (one named ``... <defunct>`` once passed for a zombie). No ``ps`` arguments are
    passed: Podman then runs ``ps`` inside the container (which the agent may have replaced).
    """
    return [r for r in api.top(container_id).get("Processes") or [] if r]


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
    on_expiry: Callable[[], object],
    spool: Path | None = None,
) -> StepFacts:
    """Run one step; on timeout or cancel, ``on_expiry`` stops what runs (from outside the container).

    With ``spool`` (a host directory), the step's complete output also goes to ``NAME.stdout`` and
    ``NAME.stderr`` there (the try's artifacts)."""
    facts = StepFacts(name=name)
    started = time.monotonic()
    try:
        exec_id = api.exec_create(
            container_id, argv, environment=env, workdir=workdir or None, stdout=True, stderr=True
        )["Id"]
    except docker.errors.APIError as exc:
        facts.spawn_error = f"cannot exec in the container: {exc.explanation or exc}"
        return facts
    out, err = _Tail(), _Tail()
    failure: list[BaseException] = []

    def pump() -> None:
        files = ((spool / f"{name}.stdout").open("wb"), (spool / f"{name}.stderr").open("wb")) if spool else None
        try:
            for stdout, stderr in stream_api.exec_start(exec_id, stream=True, demux=True):
                if stdout:
                    out.add(stdout)
                    if files:
                        files[0].write(stdout)
                if stderr:
                    err.add(stderr)
                    if files:
                        files[1].write(stderr)
        except Exception as exc:  # noqa: BLE001 - the container went away (cancel) or the daemon did
            failure.append(exc)
        finally:
            for f in files or ():
                f.close()

    reader = threading.Thread(target=pump, name=f"exec-{name}", daemon=True)
    reader.start()
    deadline = started + timeout_s
    exited_at: float | None = None
    seen = 0
    while reader.is_alive():
        reader.join(0.2)
        now = time.monotonic()
        if cancelled.is_set():
            break
        if now >= deadline:
            facts.timed_out = True
            break
        if exited_at is None and _running(api, exec_id) is False:
            exited_at = now
        if exited_at is not None and out.received + err.received != seen:
            # output still arrives after the exit: a loaded daemon flushing it late, not a child holding the
            # stream open; the drain counts from the last byte (a sanitiser's verdict line once came after it)
            seen, exited_at = out.received + err.received, now
        if exited_at is not None and now - exited_at > DRAIN_S:
            break  # a background child holds the output open; the step itself is over
    if facts.timed_out or cancelled.is_set():
        on_expiry()
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


def _running(api: docker.APIClient, exec_id: str) -> bool | None:
    """Whether the exec still runs; None when the daemon could not say (a busy daemon's error is no exit: the
    drain must not start, and cut the output, on it)."""
    try:
        return bool(api.exec_inspect(exec_id).get("Running"))
    except docker.errors.APIError:
        return None


def _add_dir(tar: tarfile.TarFile, arcname: str, mode: int) -> None:
    ti = tarfile.TarInfo(arcname)
    ti.type = tarfile.DIRTYPE
    ti.mode = mode
    ti.mtime = int(time.time())
    tar.addfile(ti)


def tree_archive(
    dirs: Iterable[tuple[str, int]],
    trees: Iterable[tuple[Path, str]] = (),
    files: Iterable[tuple[str, bytes, int]] = (),
    links: Iterable[tuple[str, str]] = (),
    fresh: Iterable[tuple[str, int]] = (),
) -> bytes:
    """A tar to unpack at ``/``: dirs (path, mode), fresh dirs (path, mode), host trees or files
    (source, target), files (path, bytes, mode), symlinks (path, target).

    A dir entry over an existing directory merges into it; over anything else (a file, a
    symlink) it replaces it. A *fresh* dir is emptied: it is written first as a file, which
    makes the daemon remove whatever is at the path (``os.RemoveAll``, without following a
    link), then as a directory. A file entry likewise replaces whatever is at its path.
    Everything is owned by root; file modes are kept, so test.sh needs no chmod.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, mode in dirs:
            _add_dir(tar, path.strip("/"), mode)
        for path, mode in fresh:
            ti = tarfile.TarInfo(path.strip("/"))
            ti.mtime = int(time.time())
            tar.addfile(ti, io.BytesIO(b""))
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
