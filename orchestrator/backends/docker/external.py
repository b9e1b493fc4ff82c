"""The Docker backend's side of an external agent, and what a try leaves, kept as artifacts."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors
import requests

from orchestrator.agents.external import HostStep, exec_env, run_external, setup_step, tagged
from orchestrator.artifacts import ArtifactSink, artifacts_for, names
from orchestrator.artifacts.codec import CHUNK
from orchestrator.artifacts.sink import SLACK
from orchestrator.backends.docker.exec_target import ContainerExec
from orchestrator.contract import paths as cc
from orchestrator.contract.outputs import read_agent_result
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.launch import Launch

#: Where an installed agent's directory is copied in the container.
AGENT_DIR = "/agent"
#: What of the archive of the container's logs dir is read past twice the sink's per-try cap, when the daemon's
#: volume folder is not on this machine: a file's bytes past the cap are read and dropped, to list what follows.
LOGS_ARCHIVE_MARGIN = 64 * 1024 * 1024


def run_agent(
    api: docker.APIClient,
    stream_api: docker.APIClient,
    cid: str,
    launch: Launch,
    *,
    workdir: str,
    host_dir: Path,
    step: HostStep | None = None,
) -> tuple[StepFacts, bytes, dict]:
    """The external agent (or ``step``: its install step) on the host against ``exec`` in the container: its
    facts, the exec log, and its self-report (written on the host)."""
    logs = host_dir / "logs"
    logs.mkdir(mode=0o700, exist_ok=True)
    target = ContainerExec(api, stream_api, cid, env=exec_env(launch, workdir), workdir=workdir)
    run = run_external(
        launch,
        target,
        host_dir=host_dir,
        logs_dir=logs,
        workdir_inside=workdir,
        task_dir_inside=cc.TASK_DIR,
        exec_env={},
        step=step,
    )
    return run.agent, run.exec_log, read_agent_result(logs / "result.json")


def contract_agent(
    api: docker.APIClient, stream_api: docker.APIClient, ctr: Any, launch: Launch, *, workdir: str
) -> Callable[[Any], StepFacts]:
    """The external agent as the contract's host-side agent phase: it acts through :class:`ContainerExec` (the
    complete output, not the step runner's tails) and leaves its exec log on ``ctr.exec_log``."""

    def agent(_exec: Any) -> StepFacts:
        facts, log, _report = run_agent(api, stream_api, ctr.cid, launch, workdir=workdir, host_dir=ctr.spool)
        ctr.exec_log = (ctr.exec_log or b"") + log  # after the install step's, when it had one
        return facts

    return agent


def contract_setup(
    api: docker.APIClient, stream_api: docker.APIClient, ctr: Any, launch: Launch, *, workdir: str
) -> Callable[[Any], StepFacts] | None:
    """The external agent's install step as the contract's agent_setup phase (None: it has none); its commands
    open the try's exec log, marked as the phase's."""
    step = setup_step(launch)
    if step is None:
        return None

    def setup(_exec: Any) -> StepFacts:
        facts, log, _report = run_agent(
            api, stream_api, ctr.cid, launch, workdir=workdir, host_dir=ctr.spool, step=step
        )
        ctr.exec_log = tagged(log, step.name)
        return facts

    return setup


def keep_artifacts(
    api: docker.APIClient,
    cid: str | None,
    launch: Launch,
    *,
    host_dir: Path,
    exec_log: bytes | None,
    logs_volume: str | None = None,
) -> None:
    """Both steps' complete output, the agent's logs (the host's for an external agent, and the container's
    ``/logs/agent``), the exec log."""
    sink = artifacts_for(launch)
    for name, file in (
        ("agent_setup/stdout", "agent_setup.stdout"),
        ("agent_setup/stderr", "agent_setup.stderr"),
        (names.AGENT_STDOUT, "agent.stdout"),
        (names.AGENT_STDERR, "agent.stderr"),
        (names.VERIFIER_STDOUT, "verifier.stdout"),
        (names.VERIFIER_STDERR, "verifier.stderr"),
    ):
        if (host_dir / file).is_file():
            sink.add_file(launch, name, host_dir / file)
    if (host_dir / "logs").is_dir():
        sink.add_tree(launch, names.LOGS_PREFIX, host_dir / "logs")
    if exec_log is not None:
        sink.add_bytes(launch, names.EXEC_LOG, exec_log)
    if cid is None:
        return
    here = volume_dir(api, logs_volume) if logs_volume else None
    if here is not None:  # the daemon's own folder of the logs volume, on this machine: walked as local walks
        sink.add_tree(launch, names.LOGS_PREFIX, here)
        return
    with tempfile.TemporaryDirectory(prefix="headroom-logs-") as tmp:
        copy_out(api, cid, cc.AGENT_LOGS, Path(tmp), sink, launch)


def volume_dir(api: docker.APIClient, volume: str) -> Path | None:
    """The volume's folder when this machine holds it (the daemon runs here, and it is readable), else None.

    The volume's name is random per try and part of the folder's path, so a folder found here is that
    volume's, not a remote daemon's path that happens to exist on this machine."""
    try:
        where = str(api.inspect_volume(volume).get("Mountpoint") or "")
    except (docker.errors.APIError, OSError):
        return None
    path = Path(where)
    if not where.startswith("/") or volume not in path.parts:
        return None
    try:
        ok = path.is_dir() and not path.is_symlink() and os.access(path, os.R_OK | os.X_OK)
    except OSError:
        return None
    return path if ok else None


class _Chunks(io.RawIOBase):
    """The archive endpoint's stream as a file, cut after ``limit`` bytes (an EOF there)."""

    def __init__(self, chunks: Iterator[bytes], limit: int) -> None:
        self.chunks, self.limit, self.read_bytes, self.cut = chunks, limit, 0, False
        self.pending = memoryview(b"")  # a view: taking a piece copies only that piece

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.read_bytes >= self.limit:
            self.cut = True
            return 0
        if not len(self.pending):
            self.pending = memoryview(next(self.chunks, b""))
            if not len(self.pending):
                return 0
        n = min(len(b), len(self.pending), self.limit - self.read_bytes)
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        self.read_bytes += n
        return n


def copy_out(api: docker.APIClient, cid: str, path: str, dest: Path, sink: ArtifactSink, launch: Launch) -> None:
    """The container's ``path`` through the archive endpoint, streamed (never held whole), rebuilt under
    ``dest`` and kept with the same walk as the local backend's, so each entry is kept, cut or skipped with
    the same reason: a regular file's first bytes (as many as the sink could keep) with its full size (the
    rest a hole: a 10 GB sparse file costs no more than the cap), links as links (recorded, never followed),
    FIFOs as FIFOs. Devices, and names that would leave ``dest``, are recorded as skipped. The stream is cut
    after twice the sink's cap and :data:`LOGS_ARCHIVE_MARGIN`; what came after is recorded as not listed."""
    keep = sink_cap(sink) + 2 * SLACK
    bound = 2 * sink_cap(sink) + LOGS_ARCHIVE_MARGIN
    top = Path(path).name
    root = dest / top
    notes: list[tuple[str, str]] = []
    stream: _Chunks | None = None
    try:
        chunks, _stat = api.get_archive(cid, path, chunk_size=CHUNK)
        stream = _Chunks(iter(chunks), bound)
        with tarfile.open(fileobj=io.BufferedReader(stream, CHUNK), mode="r|", bufsize=CHUNK) as tar:
            for m in tar:
                rel = PurePosixPath(m.name)
                if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] != top:
                    notes.append((m.name, "a name outside the logs dir (not kept)"))
                    continue
                target = dest.joinpath(*rel.parts)
                if not _inside(target, dest):
                    notes.append((m.name, "a name outside the logs dir (not kept)"))
                    continue
                _rebuild(tar, m, target, root, keep, notes)
            if stream.read_bytes < tar.offset and not stream.cut:  # ended inside an entry: not the archive's end
                notes.append(("", f"the archive of the logs dir ended early, after {stream.read_bytes} bytes"))
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        notes.append(("", f"the archive of the logs dir could not be read: {getattr(exc, 'explanation', None) or exc}"))
    except Exception as exc:  # noqa: BLE001 -- a broken tar, a full disk, the daemon's stream lost (urllib3's own)
        if stream is None or not stream.cut:
            notes.append(("", f"the archive of the logs dir ended early: {type(exc).__name__}: {exc}"))
    if stream is not None and stream.cut:
        notes.append(("", f"the archive of the logs dir was cut after {bound} bytes: later entries not listed"))
    if root.is_dir():
        sink.add_tree(launch, names.LOGS_PREFIX, root)
    for name, why in notes:
        inner = name.split("/", 1)[1] if "/" in name else ""
        sink.add_skipped(launch, names.join(names.LOGS_PREFIX, *inner.split("/")) if inner else names.LOGS_PREFIX, why)


def sink_cap(sink: ArtifactSink) -> int:
    spec = getattr(sink, "spec", None)
    return int(getattr(spec, "max_bytes_per_try", 0) or 0)


def _inside(p: Path, root: Path) -> bool:
    return os.path.normpath(p).startswith(os.path.normpath(root) + os.sep) or os.path.normpath(p) == os.path.normpath(
        root
    )


def _rebuild(tar: tarfile.TarFile, m: tarfile.TarInfo, target: Path, root: Path, keep: int, notes: list) -> None:
    """One member under ``target`` (its parents made as private folders); nothing is ever followed."""
    if m.isdir():
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        return
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        return  # a second entry of one name: the first one stays
    if m.isreg():
        src = tar.extractfile(m)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            left = min(m.size, keep)
            while left > 0 and src is not None and (data := src.read(min(CHUNK, left))):
                os.write(fd, data)
                left -= len(data)
            os.ftruncate(fd, m.size)  # the rest a hole: the record keeps the real size
        finally:
            os.close(fd)
    elif m.issym():
        os.symlink(m.linkname, target)
    elif m.islnk():
        src_path = root.parent.joinpath(*PurePosixPath(m.linkname).parts)
        if _inside(src_path, root) and src_path.is_file() and not src_path.is_symlink():
            os.link(src_path, target)
        else:
            notes.append((m.name, f"a hard link to {m.linkname} (not kept)"))
    elif m.isfifo():
        os.mkfifo(target, 0o600)
    else:
        kind = "a character device" if m.ischr() else "a block device" if m.isblk() else "not a regular file"
        notes.append((m.name, f"{kind} (not read)"))
