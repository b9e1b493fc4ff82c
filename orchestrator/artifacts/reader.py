"""Reading artifacts back (viewer, bundle): a try's list, one artifact whole or streamed.

Every function takes a connection (a :class:`~orchestrator.store.sqlite.Store`'s
``db``, read-only is enough). A store written before schema 4 has no artifacts:
it reads as empty.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.artifacts.codec import decompress_stream


@dataclass(frozen=True)
class ArtifactInfo:
    try_index: int
    name: str
    status: str
    size: int
    original_size: int | None
    sha256: str | None
    detail: str | None
    added_at: str

    @property
    def readable(self) -> bool:
        return self.sha256 is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def has_artifacts(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='artifacts'").fetchone() is not None


_SELECT = "SELECT try, name, status, size, original_size, sha256, detail, added_at FROM artifacts"


def list_artifacts(
    db: sqlite3.Connection, run_id: str, trial_id: str, try_index: int | None = None
) -> list[ArtifactInfo]:
    """A trial's artifacts (one try's, if given), by try and name."""
    if not has_artifacts(db):
        return []
    where = "WHERE run_id=? AND trial_id=?"
    args: list[str | int] = [run_id, trial_id]
    if try_index is not None:
        where, args = where + " AND try=?", [*args, try_index]
    return [ArtifactInfo(*r) for r in db.execute(f"{_SELECT} {where} ORDER BY try, name", args)]


def run_manifest(db: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Every artifact of a run, without content: what a bundle carries."""
    if not has_artifacts(db):
        return []
    return [
        {"trial_id": r[0], **ArtifactInfo(*r[1:]).to_dict()}
        for r in db.execute(
            f"SELECT trial_id, {_SELECT.removeprefix('SELECT ')} WHERE run_id=? ORDER BY trial_id, try, name", (run_id,)
        )
    ]


def find(db: sqlite3.Connection, run_id: str, trial_id: str, try_index: int, name: str) -> ArtifactInfo | None:
    if not has_artifacts(db):
        return None
    row = db.execute(
        f"{_SELECT} WHERE run_id=? AND trial_id=? AND try=? AND name=?", (run_id, trial_id, try_index, name)
    ).fetchone()
    return ArtifactInfo(*row) if row else None


def stream(db: sqlite3.Connection, sha256: str, chunk: int = 1 << 16) -> Iterator[bytes]:
    """The content of a blob, decompressed as it is read (SQLite's incremental blob I/O)."""
    row = db.execute("SELECT rowid, codec FROM artifact_blobs WHERE sha256=?", (sha256,)).fetchone()
    if row is None:
        raise KeyError(f"no artifact content sha256:{sha256}")
    with db.blobopen("artifact_blobs", "data", row[0], readonly=True) as blob:
        yield from decompress_stream(row[1], blob, chunk)  # type: ignore[arg-type]  # a Blob reads like a binary file


def read(db: sqlite3.Connection, sha256: str, limit: int | None = None) -> bytes:
    """The content (its first ``limit`` bytes, if given)."""
    parts, size = [], 0
    for piece in stream(db, sha256):
        parts.append(piece)
        size += len(piece)
        if limit is not None and size >= limit:
            break
    data = b"".join(parts)
    return data if limit is None else data[:limit]
