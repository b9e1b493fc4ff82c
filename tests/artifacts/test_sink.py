"""The artifact store: redacted, content-addressed, compressed, capped, and unbreakable by what an agent leaves."""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
from pathlib import Path

import pytest

from orchestrator.agentio.redact import REDACTED
from orchestrator.artifacts import reader
from orchestrator.artifacts.codec import CHUNK
from orchestrator.artifacts.sink import (
    LONG_LINE,
    SLACK,
    NullSink,
    StoreSink,
    TryKey,
    artifacts_for,
    register,
    unregister,
)
from orchestrator.spec.artifacts import ArtifactsSpec
from orchestrator.store.sqlite import Store

SECRET = "hunter2-very-secret-value"
KEY = TryKey("run-1", "trial-a", 0)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "h.db"
    Store(path).close()
    return path


def sink(path: Path, **spec: int) -> StoreSink:
    return StoreSink(path, ArtifactsSpec(**spec), secrets=[SECRET])


def rows(path: Path) -> dict[str, reader.ArtifactInfo]:
    db = sqlite3.connect(path)
    try:
        return {a.name: a for a in reader.list_artifacts(db, KEY.run_id, KEY.trial_id, KEY.try_index)}
    finally:
        db.close()


def content(path: Path, sha: str) -> bytes:
    db = sqlite3.connect(path)
    try:
        return reader.read(db, sha)
    finally:
        db.close()


def test_content_is_redacted_then_addressed_by_its_digest_and_stored_once(store_path: Path, tmp_path: Path) -> None:
    s = sink(store_path)
    out = tmp_path / "stdout"
    out.write_bytes(b"starting\nkey is " + SECRET.encode() + b"\nOPENAI_API_KEY=sk-abcdefghijklmnopqrstuv\n")
    a = s.add_file(KEY, "agent/stdout", out)
    expected = f"starting\nkey is {REDACTED}\nOPENAI_API_KEY={REDACTED}\n".encode()
    assert a.status == "stored" and a.sha256 == hashlib.sha256(expected).hexdigest() and a.size == len(expected)
    assert content(store_path, a.sha256) == expected
    # The same content in another try is the same blob.
    b = s.add_bytes(TryKey("run-1", "trial-b", 0), "agent/stdout", out.read_bytes())
    assert b.sha256 == a.sha256
    s.close()
    db = sqlite3.connect(store_path)
    assert db.execute("SELECT COUNT(*) FROM artifact_blobs").fetchone()[0] == 1
    stored, size = db.execute("SELECT length(data), size FROM artifact_blobs").fetchone()
    assert size == len(expected) and stored != size  # kept compressed


def test_a_secret_inside_an_endless_line_is_redacted_across_the_split(store_path: Path) -> None:
    s = sink(store_path, max_bytes_per_try=64 * CHUNK)
    # No newline anywhere: the line is redacted in pieces, and the secret straddles the first split.
    data = b"x" * (LONG_LINE - 10) + SECRET.encode() + b"y" * (LONG_LINE + 100)
    a = s.add_bytes(KEY, "agent/stderr", data)
    kept = content(store_path, a.sha256)
    assert SECRET.encode() not in kept
    for i in range(4, len(SECRET)):  # no fragment of MIN_FRAGMENT characters or more survives at the split
        assert SECRET[:i].encode() + b"y" not in kept and b"x" + SECRET[i:].encode() not in kept


def test_the_cap_cuts_then_drops_and_records_original_sizes(store_path: Path, tmp_path: Path) -> None:
    s = sink(store_path, max_bytes_per_try=1000)
    first = s.add_bytes(KEY, "a", b"1" * 600)
    second = s.add_bytes(KEY, "b", b"line\n" * 200)  # 1000 bytes, 400 fit
    third = s.add_bytes(KEY, "c", b"3" * 10)
    empty = s.add_bytes(KEY, "d", b"")
    assert (first.status, second.status, third.status, empty.status) == ("stored", "truncated", "dropped", "stored")
    assert second.size == 400 and second.original_size == 1000 and "400 bytes kept of 1000" in (second.detail or "")
    assert third.size == 0 and third.original_size == 10 and third.sha256 is None
    summary = s.finish(KEY)
    assert summary is not None and summary.bytes == 1000 and summary.cap_hit is not None
    assert {c.name: c.original_size for c in summary.cap_hit} == {"b": 1000, "c": 10}
    assert content(store_path, second.sha256 or "") == (b"line\n" * 80)


def test_a_huge_file_costs_the_cap_not_its_size(store_path: Path, tmp_path: Path) -> None:
    huge = tmp_path / "huge.log"
    with huge.open("wb") as f:  # 8 GiB, sparse: reading it all would take minutes
        f.truncate(8 << 30)
    s = sink(store_path, max_bytes_per_try=1 << 20)
    io = Path("/proc/self/io")
    before = int(dict(line.split(": ") for line in io.read_text().splitlines())["rchar"])
    a = s.add_file(KEY, "logs/huge.log", huge)
    after = int(dict(line.split(": ") for line in io.read_text().splitlines())["rchar"])
    assert a.status == "truncated" and a.size == 1 << 20 and a.original_size == 8 << 30
    assert after - before < (1 << 20) + SLACK + 2 * CHUNK + (1 << 20)  # the cap, the slack, a chunk; not 8 GiB


def test_a_hostile_logs_dir_is_recorded_without_following_opening_or_hanging(store_path: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "trajectory.json").write_text('{"steps": []}')
    (logs / "sub" / "notes.txt").write_text("notes")
    os.symlink("/etc/passwd", logs / "passwd-link")
    os.symlink("/etc", logs / "etc-link")
    os.mkfifo(logs / "fifo")  # opening it for reading would block without O_NONBLOCK
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(logs / "sock"))
    bad = os.fsencode(logs) + b"/bad-\xff\xfe-name"
    with open(bad, "wb") as f:
        f.write(b"undecodable name")
    deep = logs
    for i in range(70):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("too deep")
    s = sink(store_path)
    results = s.add_tree(KEY, "logs", logs)
    sock.close()
    by = rows(store_path)
    assert by["logs/trajectory.json"].status == "stored" and by["logs/sub/notes.txt"].status == "stored"
    assert by["logs/passwd-link"].status == "skipped" and "/etc/passwd" in (by["logs/passwd-link"].detail or "")
    assert by["logs/etc-link"].status == "skipped"  # a symlinked directory is not walked
    assert not any(name.startswith("logs/etc-link/") for name in by)
    assert "FIFO" in (by["logs/fifo"].detail or "") and "socket" in (by["logs/sock"].detail or "")
    assert by["logs/bad-\\xff\\xfe-name"].status == "stored"
    assert content(store_path, by["logs/bad-\\xff\\xfe-name"].sha256 or "") == b"undecodable name"
    assert any("deeper than" in (a.detail or "") for a in by.values())
    assert not any(name.endswith("bottom.txt") for name in by)
    assert len(results) == len(by)
    passwd = Path("/etc/passwd").read_bytes()
    assert all(content(store_path, a.sha256) != passwd for a in by.values() if a.sha256)


def test_the_file_cap_stops_the_walk_and_says_how_much_was_left(store_path: Path, tmp_path: Path) -> None:
    logs = tmp_path / "many"
    logs.mkdir()
    for i in range(30):
        (logs / f"f{i:02}").write_text(str(i))
    s = sink(store_path, max_files_per_try=10)
    s.add_tree(KEY, "logs", logs)
    summary = s.finish(KEY)
    by = rows(store_path)
    assert len(by) == 11 and summary is not None
    (more,) = [a for a in by.values() if a.name.startswith("…")]
    assert more.status == "dropped" and "20 entries were not recorded" in (more.detail or "")


def test_a_failure_to_store_is_recorded_against_the_try(store_path: Path, tmp_path: Path) -> None:
    db = sqlite3.connect(store_path)
    db.execute(
        "CREATE TRIGGER full BEFORE INSERT ON artifact_blobs BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    db.commit()
    db.close()
    s = sink(store_path)
    a = s.add_bytes(KEY, "agent/stdout", b"some output")
    assert a.status == "failed" and "disk is full" in (a.detail or "")
    assert rows(store_path)["agent/stdout"].status == "failed"
    missing = s.add_file(KEY, "logs/gone", tmp_path / "does-not-exist")
    assert missing.status == "failed" and "No such file" in (missing.detail or "")
    summary = s.finish(KEY)
    assert summary is not None and summary.statuses is not None and summary.statuses["failed"] == 2


def test_secret_names_are_redacted_and_names_never_collide(store_path: Path) -> None:
    s = sink(store_path)
    a = s.add_bytes(KEY, f"logs/{SECRET}.txt", b"x")
    b = s.add_bytes(KEY, "same", b"1")
    c = s.add_bytes(KEY, "same", b"2")
    assert a.name == f"logs/{REDACTED}.txt" and (b.name, c.name) == ("same", "same #2")
    s.close()
    assert SECRET.encode() not in store_path.read_bytes()


def test_backends_find_their_runs_sink_or_a_null_one(store_path: Path) -> None:
    assert isinstance(artifacts_for(KEY), NullSink)
    s = sink(store_path)
    register(KEY.run_id, s)
    try:
        assert artifacts_for(KEY) is s
    finally:
        unregister(KEY.run_id)
    assert artifacts_for(KEY).add_bytes(KEY, "x", b"y").status == "dropped"
