"""Where backends and the engine put what a try leaves: :class:`ArtifactSink`.

Every artifact is redacted (the run's secret values and the gateway's keys, then
the patterns of :mod:`orchestrator.agentio.redact`), hashed (sha256 of the redacted
content: that is its address), compressed (:mod:`orchestrator.artifacts.codec`)
and stored once per distinct content in the run's SQLite store, beside the
results (tables ``artifacts`` and ``artifact_blobs``; the store stays one file).

What the agent made can be anything, and storing it must never crash or hang:

* symlinks are recorded (with their target as text) and never followed; FIFOs,
  sockets and device nodes are recorded and never opened; files are opened with
  ``O_NOFOLLOW | O_NONBLOCK`` and checked to be regular after opening;
* a tree is walked through directory descriptors (no path is resolved twice), at
  most :data:`MAX_DEPTH` levels deep and :attr:`ArtifactsSpec.max_files_per_try`
  entries wide;
* names are kept as valid UTF-8 (:mod:`orchestrator.artifacts.names`);
* the per-try byte cap (:attr:`ArtifactsSpec.max_bytes_per_try`) bounds what is
  read, not just what is kept: a 10 GB log costs the cap and a little slack;
* a failure (unreadable file, full disk) is recorded against the try, as a row
  with status ``failed``, or if even that cannot be written, in :meth:`finish`'s
  summary, which the engine puts into the try's evidence.

Backends get the sink of their run with :func:`artifacts_for` and call it from any
thread; when no sink is registered (the in-cluster controller, a unit test)
that returns a :class:`NullSink`, so a backend calls it unconditionally.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import stat
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from orchestrator.agentio.redact import redact_bytes, redact_text, scrub_edges
from orchestrator.artifacts.codec import CHUNK, CODEC, Compressor
from orchestrator.artifacts.names import artifact_name, join
from orchestrator.spec.artifacts import ArtifactsSpec
from orchestrator.spec.evidence import ArtifactCut, ArtifactsSummary

if TYPE_CHECKING:
    from orchestrator.spec.launch import Launch

Status = Literal["stored", "truncated", "dropped", "skipped", "failed"]
MAX_DEPTH = 64
#: Raw bytes read past the cap, so a secret printed across the cut is redacted whole before the cut.
SLACK = 64 * 1024
#: A line longer than this is redacted in pieces (see :func:`_redacted`).
LONG_LINE = 4 * CHUNK
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


@dataclass(frozen=True)
class TryKey:
    run_id: str
    trial_id: str
    try_index: int

    @classmethod
    def of(cls, who: TryKey | Launch) -> TryKey:
        return who if isinstance(who, TryKey) else cls(who.run_id, who.trial_id, who.try_index)


@dataclass(frozen=True)
class Stored:
    """What became of one artifact."""

    name: str
    status: Status
    size: int = 0
    original_size: int | None = None
    sha256: str | None = None
    detail: str | None = None


class ArtifactSink(Protocol):
    def add_file(
        self, key: TryKey | Launch, name: str, path: str | os.PathLike[str], *, cut_from: int | None = None
    ) -> Stored: ...

    def add_bytes(self, key: TryKey | Launch, name: str, data: bytes, *, cut_from: int | None = None) -> Stored: ...

    def add_tree(self, key: TryKey | Launch, prefix: str, host_dir: str | os.PathLike[str]) -> list[Stored]: ...

    def add_skipped(self, key: TryKey | Launch, name: str, why: str) -> Stored: ...

    def protect(self, key: TryKey | Launch, secrets: Iterable[str]) -> None: ...

    def finish(self, key: TryKey | Launch) -> ArtifactsSummary | None: ...


class NullSink:
    """Keeps nothing (no store to keep it in); says so for every artifact."""

    def _none(self, name: str) -> Stored:
        return Stored(artifact_name(name), "dropped", detail="no artifact store for this run")

    def add_file(
        self, key: TryKey | Launch, name: str, path: str | os.PathLike[str], *, cut_from: int | None = None
    ) -> Stored:
        return self._none(name)

    def add_bytes(self, key: TryKey | Launch, name: str, data: bytes, *, cut_from: int | None = None) -> Stored:
        return self._none(name)

    def add_tree(self, key: TryKey | Launch, prefix: str, host_dir: str | os.PathLike[str]) -> list[Stored]:
        return []

    def add_skipped(self, key: TryKey | Launch, name: str, why: str) -> Stored:
        return self._none(name)

    def protect(self, key: TryKey | Launch, secrets: Iterable[str]) -> None:
        return None

    def finish(self, key: TryKey | Launch) -> ArtifactsSummary | None:
        return None


@dataclass
class _Budget:
    bytes_left: int
    rows_left: int
    names: set[str]
    lock: threading.Lock = field(default_factory=threading.Lock)
    over_files: int = 0  # entries not recorded once the file cap was reached
    errors: list[str] = field(default_factory=list)  # failures that could not be written as rows


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class StoreSink:
    """The sink of one SQLite store; thread-safe (one connection of its own, serialised)."""

    def __init__(self, path: Path | str, spec: ArtifactsSpec | None = None, secrets: Iterable[str] = ()) -> None:
        self.path = Path(path)
        self.spec = spec or ArtifactsSpec()
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._try_secrets: dict[TryKey, list[str]] = {}
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db_lock = threading.Lock()
        self._budgets: dict[TryKey, _Budget] = {}
        self._budgets_lock = threading.Lock()

    def close(self) -> None:
        with self._db_lock:
            self._db.close()

    # -- the API backends call --------------------------------------------------------
    def protect(self, key: TryKey | Launch, secrets: Iterable[str]) -> None:
        """More values to redact from this try's artifacts (the gateway's per-try key)."""
        k = TryKey.of(key)
        with self._budgets_lock:
            merged = {*self._try_secrets.get(k, []), *(s for s in secrets if s)}
            self._try_secrets[k] = sorted(merged, key=len, reverse=True)

    def add_bytes(self, key: TryKey | Launch, name: str, data: bytes, *, cut_from: int | None = None) -> Stored:
        """``cut_from``: the size of what ``data`` was cut from before it got here (see :meth:`_store`)."""
        k = TryKey.of(key)
        try:
            view = memoryview(data)
            chunks = (bytes(view[i : i + CHUNK]) for i in range(0, len(data), CHUNK))
            return self._store(k, name, chunks, len(data), cut_from=cut_from)
        except Exception as exc:  # noqa: BLE001 -- storing evidence must never end a run
            return self._failed(k, name, f"{type(exc).__name__}: {exc}")

    def add_file(
        self, key: TryKey | Launch, name: str, path: str | os.PathLike[str], *, cut_from: int | None = None
    ) -> Stored:
        """A host file, never through a symlink and never blocking on a FIFO."""
        k = TryKey.of(key)
        try:
            return self._add_at(k, self._name(k, name), os.fspath(path), None, cut_from=cut_from)
        except Exception as exc:  # noqa: BLE001
            return self._failed(k, name, f"{type(exc).__name__}: {exc}")

    def add_tree(self, key: TryKey | Launch, prefix: str, host_dir: str | os.PathLike[str]) -> list[Stored]:
        """Every entry under ``host_dir``, named ``prefix/relative/path``; symlinks and special files are
        recorded, not followed or opened."""
        k = TryKey.of(key)
        out: list[Stored] = []
        try:
            root = os.open(os.fspath(host_dir), _DIR_FLAGS)
        except OSError as exc:
            out.append(self._failed(k, prefix, f"cannot open the directory: {exc.strerror}"))
            return out
        try:
            self._walk(k, root, prefix, out)
        except Exception as exc:  # noqa: BLE001
            out.append(self._failed(k, f"{prefix}/", f"walking the tree failed: {type(exc).__name__}: {exc}"))
        finally:
            os.close(root)
        return out

    def add_skipped(self, key: TryKey | Launch, name: str, why: str) -> Stored:
        """An entry recorded without content, and why (what a backend saw but could not or would not read)."""
        k = TryKey.of(key)
        try:
            return self._skipped(k, self._name(k, name), why)
        except Exception as exc:  # noqa: BLE001
            return self._failed(k, name, f"{type(exc).__name__}: {exc}")

    def finish(self, key: TryKey | Launch) -> ArtifactsSummary | None:
        """The try's artifacts in brief, for its evidence: counts, what the cap cut, what failed. None if none."""
        k = TryKey.of(key)
        budget = self._budgets.get(k)
        if budget is not None and budget.over_files:
            self._row(
                k,
                f"… {budget.over_files} more",
                "dropped",
                None,
                0,
                None,
                f"{budget.over_files} entries were not recorded: the try reached max_files_per_try "
                f"({self.spec.max_files_per_try})",
                force=True,
            )
            budget.over_files = 0
        with self._budgets_lock:  # a late artifact of the try starts again from what the store holds
            self._try_secrets.pop(k, None)
            self._budgets.pop(k, None)
        try:
            with self._db_lock:
                rows = self._db.execute(
                    "SELECT name, status, size, original_size FROM artifacts WHERE run_id=? AND trial_id=? AND try=?",
                    (k.run_id, k.trial_id, k.try_index),
                ).fetchall()
        except sqlite3.Error as exc:
            return ArtifactsSummary(errors=[*(budget.errors if budget else []), f"reading the summary failed: {exc}"])
        if not rows and not (budget and budget.errors):
            return None
        by: dict[str, list[tuple[str, int, int | None]]] = {}
        for name, status, size, original in rows:
            by.setdefault(status, []).append((name, size, original))
        summary = ArtifactsSummary(
            count=len(rows),
            bytes=sum(r[2] for r in rows),
            max_bytes_per_try=self.spec.max_bytes_per_try,
            statuses={s: len(v) for s, v in sorted(by.items())},
        )
        cut = [
            ArtifactCut(name=n, kept=s, original_size=o) for n, s, o in by.get("truncated", []) + by.get("dropped", [])
        ]
        if cut:
            summary.cap_hit = cut[:20]
        if budget is not None and budget.errors:
            summary.errors = budget.errors[:20]
        return summary

    # -- walking -----------------------------------------------------------------------
    def _walk(self, k: TryKey, root: int, prefix: str, out: list[Stored]) -> None:
        stack: list[tuple[int, Iterator[os.DirEntry[str]], list[str]]] = [(root, iter(os.scandir(root)), [])]
        try:
            while stack:
                fd, entries, parts = stack[-1]
                entry = next(entries, None)
                if entry is None:
                    stack.pop()
                    if fd != root:
                        os.close(fd)
                    continue
                name = self._name(k, join(prefix, *parts, entry.name))
                if self._budget(k).rows_left <= 0:
                    self._budget(k).over_files += 1
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    out.append(self._failed(k, name, f"cannot stat: {exc.strerror}", named=True))
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if len(parts) + 1 >= MAX_DEPTH:
                        out.append(self._skipped(k, name, f"a directory deeper than {MAX_DEPTH} levels"))
                        continue
                    try:
                        sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                        stack.append((sub, iter(os.scandir(sub)), [*parts, entry.name]))
                    except OSError as exc:
                        out.append(self._failed(k, name + "/", f"cannot list: {exc.strerror}", named=True))
                    continue
                out.append(self._add_at(k, name, entry.name, fd, st))
        finally:
            for fd, _, _ in stack:
                if fd != root:
                    os.close(fd)

    def _add_at(
        self,
        k: TryKey,
        name: str,
        path: str,
        dir_fd: int | None,
        st: os.stat_result | None = None,
        cut_from: int | None = None,
    ) -> Stored:
        try:
            st = st or os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            return self._failed(k, name, f"cannot stat: {exc.strerror}", named=True)
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(path, dir_fd=dir_fd)
            except OSError:
                target = "?"
            return self._skipped(k, name, f"a symlink (not followed) to {artifact_name(target)}")
        if not stat.S_ISREG(st.st_mode):
            return self._skipped(k, name, self._kind(st.st_mode))
        try:
            fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return self._skipped(k, name, "a symlink (not followed)")
            return self._failed(k, name, f"cannot open: {exc.strerror}", named=True)
        try:
            now = os.fstat(fd)
            if not stat.S_ISREG(now.st_mode):  # swapped between stat and open
                return self._skipped(k, name, self._kind(now.st_mode))
            return self._store(k, name, _read_chunks(fd), now.st_size, named=True, cut_from=cut_from)
        finally:
            os.close(fd)

    @staticmethod
    def _kind(mode: int) -> str:
        return next((what for test, what in _KINDS if test(mode)), "not a regular file") + " (not read)"

    # -- storing -----------------------------------------------------------------------
    def _secrets_of(self, k: TryKey) -> list[str]:
        extra = self._try_secrets.get(k)
        return self._secrets if not extra else sorted({*self._secrets, *extra}, key=len, reverse=True)

    def _name(self, k: TryKey, name: str) -> str:
        return artifact_name(redact_text(artifact_name(name), self._secrets_of(k)))

    def _budget(self, k: TryKey) -> _Budget:
        with self._budgets_lock:
            b = self._budgets.get(k)
            if b is None:
                with self._db_lock:
                    rows = self._db.execute(
                        "SELECT name, size FROM artifacts WHERE run_id=? AND trial_id=? AND try=?",
                        (k.run_id, k.trial_id, k.try_index),
                    ).fetchall()
                b = _Budget(
                    self.spec.max_bytes_per_try - sum(r[1] for r in rows),
                    self.spec.max_files_per_try - len(rows),
                    {r[0] for r in rows},
                )
                self._budgets[k] = b
            return b

    def _store(
        self,
        k: TryKey,
        name: str,
        chunks: Iterator[bytes],
        original: int,
        *,
        named: bool = False,
        cut_from: int | None = None,
    ) -> Stored:
        """``cut_from``: content a backend already cut (the Pod runner's record cap) is kept as the per-try cap
        keeps what it cuts: ``truncated`` (``dropped`` when nothing of it came), with its original size."""
        name = name if named else self._name(k, name)
        budget = self._budget(k)
        with budget.lock:  # one artifact of a try at a time: the cap is exact
            if budget.rows_left <= 0:
                budget.over_files += 1
                return Stored(name, "dropped", 0, original, None, "max_files_per_try reached")
            allowance = max(budget.bytes_left, 0)
            if allowance == 0 and original > 0:
                return self._row(
                    k,
                    name,
                    "dropped",
                    None,
                    0,
                    original,
                    f"not kept: the try's artifacts reached max_bytes_per_try ({self.spec.max_bytes_per_try})",
                )
            secrets = self._secrets_of(k)
            content, cut = _redacted(chunks, allowance, secrets)
            comp = Compressor()
            digest = hashlib.sha256()
            size = 0
            for piece in content:
                comp.feed(piece)
                digest.update(piece)
                size += len(piece)
            blob = comp.finish()
            sha = digest.hexdigest()
            status: Status = "truncated" if cut else "stored"
            detail = (
                (
                    f"cut at the per-try cap: {size} bytes kept of {original} "
                    f"(max_bytes_per_try {self.spec.max_bytes_per_try})"
                )
                if cut
                else None
            )
            if not cut and cut_from is not None and cut_from > original:
                status = "truncated" if size else "dropped"
                detail = f"cut before it reached headroom: {size} bytes kept of {cut_from} (the backend's record cap)"
                original = cut_from
            return self._row(k, name, status, sha, size, original, detail, blob=blob)

    def _row(
        self,
        k: TryKey,
        name: str,
        status: Status,
        sha: str | None,
        size: int,
        original: int | None,
        detail: str | None,
        *,
        blob: bytes | None = None,
        force: bool = False,
    ) -> Stored:
        budget = self._budget(k)
        if not force and budget.rows_left <= 0:
            budget.over_files += 1
            return Stored(name, "dropped", 0, original, None, "max_files_per_try reached")
        base, n = name, 2
        while name in budget.names:
            name, n = f"{base} #{n}", n + 1
        try:
            with self._db_lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    if blob is not None:
                        self._db.execute(
                            "INSERT OR IGNORE INTO artifact_blobs (sha256, size, codec, data) VALUES (?,?,?,?)",
                            (sha, size, CODEC, blob),
                        )
                    self._db.execute(
                        "INSERT INTO artifacts (run_id, trial_id, try, name, status, sha256, size, original_size, detail,"
                        " added_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (
                            k.run_id,
                            k.trial_id,
                            k.try_index,
                            name,
                            status,
                            sha,
                            size,
                            original,
                            None if detail is None else redact_text(detail, self._secrets_of(k)),
                            _now(),
                        ),
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as exc:
            if blob is not None:  # the content could not be kept: say so in its row
                return self._row(k, name, "failed", None, 0, original, f"storing failed: {exc}", force=force)
            budget.errors.append(f"{name}: storing failed: {exc}")
            return Stored(name, "failed", 0, original, None, f"storing failed: {exc}")
        budget.names.add(name)
        budget.rows_left -= 1
        budget.bytes_left -= size
        return Stored(name, status, size, original, sha, detail)

    def _skipped(self, k: TryKey, name: str, why: str) -> Stored:
        return self._row(k, name, "skipped", None, 0, None, why)

    def _failed(self, k: TryKey, name: str, why: str, *, named: bool = False) -> Stored:
        try:
            return self._row(k, name if named else self._name(k, name), "failed", None, 0, None, why)
        except Exception as exc:  # noqa: BLE001 -- the last resort: remembered for the try's evidence
            self._budgets.setdefault(k, _Budget(0, 0, set())).errors.append(f"{name}: {why}; {exc}")
            return Stored(artifact_name(name), "failed", detail=why)


def _read_chunks(fd: int) -> Iterator[bytes]:
    while data := os.read(fd, CHUNK):
        yield data


def _redacted(chunks: Iterator[bytes], allowance: int, secrets: list[str]) -> tuple[list[bytes], bool]:
    """The redacted content, at most ``allowance`` bytes, and whether anything was cut.

    Redaction runs on whole lines where it can (a secret or a key pattern does not span lines); a line longer
    than :data:`LONG_LINE` is split, and a known secret's fragment on either side of that split is scrubbed.
    At most ``allowance + SLACK`` raw bytes are read, however long the input.
    """
    out: list[bytes] = []
    kept = 0

    def emit(segment: bytes, *, split_after: bool, split_before: bool) -> bool:
        """Append the redacted segment; True once the allowance is spent."""
        nonlocal kept
        clean = redact_bytes(segment, secrets)
        if split_before or split_after:
            clean = _scrub(clean, secrets, start=split_before, end=split_after)
        room = allowance - kept
        if len(clean) > room:
            out.append(_scrub(clean[:room], secrets, start=False, end=True))
            kept = allowance
            return True
        out.append(clean)
        kept += len(clean)
        return False

    carry, read, split = b"", 0, False
    for data in chunks:
        read += len(data)
        carry += data
        if read > allowance + SLACK:  # what is left cannot fit: stop reading
            emit(carry, split_after=True, split_before=split)
            return out, True
        nl = carry.rfind(b"\n")
        if nl >= 0:
            segment, carry = carry[: nl + 1], carry[nl + 1 :]
            if emit(segment, split_after=False, split_before=split):
                return out, True
            split = False
        elif len(carry) >= LONG_LINE:
            if emit(carry, split_after=True, split_before=split):
                return out, True
            carry, split = b"", True
    if carry and emit(carry, split_after=False, split_before=split):
        return out, True
    return out, False


def _scrub(data: bytes, secrets: list[str], *, start: bool, end: bool) -> bytes:
    text = data.decode("utf-8", "surrogateescape")
    return scrub_edges(text, secrets, start=start, end=end).encode("utf-8", "surrogateescape")


# -- the run's sink, for backends ------------------------------------------------------
_SINKS: dict[str, ArtifactSink] = {}
_SINKS_LOCK = threading.Lock()
_NULL = NullSink()


def register(run_id: str, sink: ArtifactSink) -> None:
    with _SINKS_LOCK:
        _SINKS[run_id] = sink


def unregister(run_id: str) -> None:
    with _SINKS_LOCK:
        _SINKS.pop(run_id, None)


def artifacts_for(who: TryKey | Launch) -> ArtifactSink:
    """The sink of the try's run (the engine registers it for the run's duration), else a :class:`NullSink`."""
    with _SINKS_LOCK:
        return _SINKS.get(who.run_id, _NULL)
