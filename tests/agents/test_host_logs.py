"""Copying a host-side agent's logs dir out of its sandbox (orchestrator/agents/host_logs.py): what the agent wrote is
hostile and the copy runs as headroom, so nothing is followed, nothing is opened that is not a regular file, holes
stay holes, and an entry the environment planted in the shared logs dir is replaced, never written through.

The source here is a plain directory (the copy reads any directory descriptor; the sandbox's tmpfs is exercised
end to end in test_host_bounds.py)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from orchestrator.agents import host_logs


def _copy(src: Path, dest: Path) -> host_logs.Copied:
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return host_logs.copy_out(fd, dest)
    finally:
        os.close(fd)


def test_links_nodes_and_holes_are_copied_as_what_they_are(tmp_path: Path) -> None:
    src, dest, outside = tmp_path / "src", tmp_path / "dest", tmp_path / "outside"
    for d in (src, dest, outside):
        d.mkdir()
    (src / "trajectory.json").write_text('{"steps": 3}')
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "sub" / "deeper" / "note.txt").write_text("kept")
    (src / "to-host").symlink_to("/etc/shadow")
    os.mkfifo(src / "fifo")
    with (src / "sparse").open("wb") as f:  # 1 GiB apparent, one page of data
        f.seek(1 << 30)
        f.write(b"end")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(src / "sock"))
    s.close()
    done = _copy(src, dest)
    assert (dest / "trajectory.json").read_text() == '{"steps": 3}'
    assert (dest / "sub" / "deeper" / "note.txt").read_text() == "kept"
    assert os.readlink(dest / "to-host") == "/etc/shadow"
    assert stat.S_ISFIFO(os.lstat(dest / "fifo").st_mode) and stat.S_ISSOCK(os.lstat(dest / "sock").st_mode)
    sparse = os.stat(dest / "sparse")
    assert sparse.st_size == (1 << 30) + 3 and sparse.st_blocks * 512 < 1 << 20  # its data, not its size
    assert done.bytes < 1 << 20 and done.not_copied == 0


def test_an_entry_the_environment_planted_is_replaced_never_written_through(tmp_path: Path) -> None:
    src, dest, outside = tmp_path / "src", tmp_path / "dest", tmp_path / "outside"
    for d in (src, dest, outside):
        d.mkdir()
    (src / "result.json").write_text("agent's")
    (src / "dir").mkdir()
    (src / "dir" / "f").write_text("agent's")
    victim = outside / "victim"
    victim.write_text("host's")
    (dest / "result.json").symlink_to(victim)  # a file name pointing out of the logs dir
    (dest / "dir").symlink_to(outside)  # a directory name pointing out of it
    _copy(src, dest)
    assert victim.read_text() == "host's" and not (outside / "f").exists()
    assert (dest / "result.json").read_text() == "agent's" and not (dest / "result.json").is_symlink()
    assert (dest / "dir" / "f").read_text() == "agent's" and not (dest / "dir").is_symlink()


def test_the_copy_stops_at_its_entry_bound_and_says_so(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    for i in range(30):
        (src / f"f{i}").write_text("x")
    monkeypatch.setattr(host_logs, "MAX_ENTRIES", 10)
    done = _copy(src, dest)
    assert len(list(dest.iterdir())) == 10 and done.not_copied == 1
    assert done.left_out == ["1 entries past the first 10 (and all after them)"]


def test_only_the_first_datagram_counts_and_only_a_directory(tmp_path: Path) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with ours, theirs:
        assert host_logs.receive(ours) is None  # nothing sent: the sandbox never started
        f = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        socket.send_fds(theirs, [b"logs"], [f])
        other = os.open(os.devnull, os.O_RDONLY)
        socket.send_fds(theirs, [b"logs"], [other])
        got = host_logs.receive(ours)
        assert got is not None and os.path.samestat(os.fstat(got), os.stat(tmp_path))
        for fd in (f, other, got):
            os.close(fd)
        ours2, theirs2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        with ours2, theirs2:
            nul = os.open(os.devnull, os.O_RDONLY)
            socket.send_fds(theirs2, [b"logs"], [nul])
            os.close(nul)
            assert host_logs.receive(ours2) is None  # not a directory: refused
