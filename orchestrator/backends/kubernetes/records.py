"""A try's full record on Pods: the runner's tar of the steps' output and the agent's logs dir, read back from
the end of the pod's log and kept as the try's artifacts, exactly as the local and Docker backends keep them.

The runner prints the tar base64-encoded after every process of the agent and the verifier is gone,
and puts its size (and sha256, where the image has ``sha256sum``) into the termination message,
the channel only the runner writes last. The backend takes the last block of the log and checks it
against those facts, so nothing the agent printed into the log earlier can stand in for it. What the
tar holds is agent-written: it becomes artifacts and evidence, never the verdict.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import posixpath
import re
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.artifacts import artifacts_for, names
from orchestrator.artifacts.sink import NullSink
from orchestrator.backends.kubernetes.message import RunnerReport
from orchestrator.spec.evidence import RecordsEvidence
from orchestrator.spec.launch import Launch

_BLOCK = re.compile(rb"===== headroom records (\d+) =====\n([A-Za-z0-9+/=\r\n]*?)===== end of headroom records =====")
#: The step output files the runner writes, by where they go among the artifacts.
_STEP_FILES = {
    "agent_setup/stdout.txt": "agent_setup/stdout",
    "agent_setup/stderr.txt": "agent_setup/stderr",
    "agent/stdout.txt": names.AGENT_STDOUT,
    "agent/stderr.txt": names.AGENT_STDERR,
    "verifier/stdout.txt": names.VERIFIER_STDOUT,
    "verifier/stderr.txt": names.VERIFIER_STDERR,
}


@dataclass
class Record:
    """What became of a try's record: kept in ``extra.records``."""

    status: str  # kept | not_kept (no store: the controller) | unreadable | mismatch | runner:<why>
    bytes: int = 0
    truncated: bool = False
    verified: str = "none"  # sha256 | size (the image has no sha256sum)
    errors: list[str] = field(default_factory=list)

    def evidence(self) -> RecordsEvidence:
        out = RecordsEvidence(
            status=self.status,
            bytes=self.bytes,
            verified=self.verified,
            written_by="agent (the runner archived it; never read for the verdict)",
        )
        if self.truncated:
            out.truncated = True
        if self.errors:
            out.errors = self.errors[:10]
        return out


def expected(report: RunnerReport) -> tuple[int, str | None] | str | None:
    """The record the runner says it printed (size, sha256), why it printed none, or None (an older runner)."""
    if (why := report.fields.get("records")) is not None:
        return f"runner:{why}"
    size = report._int("records_bytes")
    if size is None:
        return None
    return size, report.fields.get("records_sha256")


def from_log(log: bytes, size: int, sha256: str | None) -> bytes | None:
    """The runner's tar: the last block of ``log``, when it has the size (and digest) the runner reported."""
    blocks = list(_BLOCK.finditer(log))
    if not blocks:
        return None
    last = blocks[-1]
    try:
        data = base64.b64decode(re.sub(rb"\s+", b"", last.group(2)), validate=True)
    except (binascii.Error, ValueError):
        return None
    if int(last.group(1)) != size or len(data) != size:
        return None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        return None
    return data


#: The runner's list of what it staged without content (runner.sh, stage_tree): ``KIND SIZE NAME`` lines.
MANIFEST = "headroom.manifest"
#: The local backend's reasons for entries it records and never opens (orchestrator/artifacts/sink.py).
_KIND_WHY = {
    "fifo": "a FIFO (not read)",
    "socket": "a socket (not read)",
    "chardev": "a character device (not read)",
    "blockdev": "a block device (not read)",
}
#: At most this many manifest lines are read (the runner lists at most its entry cap).
_MANIFEST_LINES = 20_000


def _artifact(rel: str) -> str | None:
    """The artifact name of a path of the runner's tar (``agent/...``), as the other backends name it."""
    if rel in _STEP_FILES:
        return _STEP_FILES[rel]
    top, _, rest = rel.partition("/")
    if top == "agent" and rest:
        return f"{names.LOGS_PREFIX}/{rest}"
    return None


def _manifest(root: Path, rec: Record) -> list[tuple[str, int, str]]:
    f = root / MANIFEST
    if not f.is_file() or f.is_symlink():
        return []
    out: list[tuple[str, int, str]] = []
    with f.open("rb") as fh:
        for i, raw in enumerate(fh.read(4 * 1024 * 1024).split(b"\n")):
            if i >= _MANIFEST_LINES:
                break
            kind, _, rest = raw.decode("utf-8", "surrogateescape").partition(" ")
            size, _, name = rest.partition(" ")
            if kind and name:
                out.append((kind, int(size) if size.isdigit() else 0, posixpath.normpath(name)))
    f.unlink()
    return out


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and ".." not in parts


def _unpack(data: bytes, root: Path, truncated: bool, rec: Record) -> bool:
    """Every member but links, with tarfile's ``data`` filter; then the links, as links (never followed, never
    written through: a later member cannot land outside ``root`` by a link an earlier one made)."""
    links: list[tuple[str, str]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            while True:
                try:
                    member = tar.next()
                except (tarfile.TarError, OSError) as exc:  # the cut end of a truncated tar
                    if not truncated:
                        rec.errors.append(f"tar: {exc}")
                    break
                if member is None:
                    break
                if member.issym():
                    links.append((posixpath.normpath(member.name), member.linkname))
                    continue
                try:
                    tar.extract(member, root, filter="data")
                except (tarfile.TarError, OSError) as exc:
                    rec.errors.append(f"{names.artifact_name(member.name)}: {exc}")
    except tarfile.TarError as exc:
        rec.errors.append(str(exc))
        return False
    real = os.path.realpath(root)
    for name, target in links:
        dest = root / name
        if not _safe_name(name) or os.path.lexists(dest):
            rec.errors.append(f"{names.artifact_name(name)}: a link the record cannot hold there")
            continue
        if os.path.realpath(dest.parent) != real and not os.path.realpath(dest.parent).startswith(real + os.sep):
            rec.errors.append(f"{names.artifact_name(name)}: a link under a link")
            continue
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, dest)
        except OSError as exc:
            rec.errors.append(f"{names.artifact_name(name)}: {exc.strerror}")
    return True


def keep(launch: Launch, data: bytes, truncated: bool) -> Record:
    """Unpack the tar and store it through the run's sink under the names the other backends use, each entry with
    the local backend's reason: a link is recorded with its target and never followed, a FIFO, socket or device
    (which the runner only named) is recorded unread, a file the runner cut at its cap is ``truncated`` with its
    original size (``dropped`` once the cap was spent)."""
    rec = Record("kept", len(data), truncated, "size")
    sink = artifacts_for(launch)
    with tempfile.TemporaryDirectory(prefix="headroom-records-") as tmp:
        root = Path(tmp)
        if not _unpack(data, root, truncated, rec):
            return Record("unreadable", len(data), truncated, errors=rec.errors)
        cut: dict[str, int] = {}
        for kind, size, rel in _manifest(root, rec):
            name = _artifact(rel)
            if kind == "cut":
                cut[rel] = size
            elif kind == "dropped" and name is not None:
                sink.add_bytes(launch, name, b"", cut_from=size)
            elif kind in _KIND_WHY and name is not None:
                sink.add_skipped(launch, name, _KIND_WHY[kind])
            elif kind == "timeout":
                rec.errors.append("the runner's staging of the record ran out of time: what it got to is kept")
            elif kind in ("unnamed", "over", "unreadable"):
                rec.errors.append(f"{kind}: {names.artifact_name(rel)}" + (f" ({size})" if size else ""))
        for rel, name in _STEP_FILES.items():
            f = root / rel
            if f.is_file() and not f.is_symlink():
                sink.add_file(launch, name, f, cut_from=cut.pop(rel, None))
                f.unlink()
        for rel, size in cut.items():  # the logs dir's files the runner cut: kept apart from the walk, cut
            f, name = root / rel, _artifact(rel)
            if name is not None and _safe_name(rel) and f.is_file() and not f.is_symlink():
                sink.add_file(launch, name, f, cut_from=size)
                f.unlink()
        if (root / "agent").is_dir() and not (root / "agent").is_symlink():
            sink.add_tree(launch, names.LOGS_PREFIX, root / "agent")
    rec.errors = rec.errors[:50]
    return rec


def harvest(core: Any, namespace: str, pod: dict[str, Any], launch: Launch) -> Record | None:
    """Read the try's record from its pod's log and keep it; None when the runner reported none (an older runner)."""
    from orchestrator.backends.kubernetes.signals import TASK_CONTAINER, runner_report

    report = runner_report(pod)
    want = expected(report) if report is not None else None
    if want is None:
        return None
    if isinstance(want, str):
        return Record(want)
    size, sha256 = want
    if isinstance(artifacts_for(launch), NullSink):  # the in-cluster controller: no store to keep it in
        return Record("not_kept", size)
    try:
        # The whole log: the record is its last block (bounded by the runner, HR_RECORDS_MAX).
        resp = core.read_namespaced_pod_log(
            launch.name, namespace, container=TASK_CONTAINER, _preload_content=False, _request_timeout=60
        )
        log = resp.data if hasattr(resp, "data") else bytes(resp)
    except Exception as exc:  # the kubelet is away, or the log was rotated away
        return Record("unreadable", size, errors=[str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__])
    data = from_log(log, size, sha256)
    if data is None:
        return Record(
            "mismatch",
            size,
            errors=["the last records block of the log does not match the runner's termination message"],
        )
    rec = keep(launch, data, report.fields.get("records_truncated") == "1" if report is not None else False)
    if rec.status == "kept":
        rec.verified = "sha256" if sha256 else "size"
    return rec
