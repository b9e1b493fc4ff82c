"""A host-side agent's logs dir, out of its sandbox: received as an open directory, copied into the try's host dir.

In its sandbox the agent's logs dir is a tmpfs of ``disk_mb`` (:mod:`.host_sandbox`): the kernel refuses a
write past it (ENOSPC), whatever the agent's speed. Its first program (:mod:`.handoff`) sends the open directory
out before the agent starts; :func:`receive` takes it after the step (a descriptor in flight keeps the tmpfs
alive once the sandbox is gone) and :func:`copy_out` copies the tree into the try's host logs dir, where the
backend keeps it as artifacts as before.

What the agent wrote is hostile, and this runs as headroom (root, maybe), so the copy never follows a link:
both trees are walked through directory descriptors opened ``O_NOFOLLOW``; symlinks are recreated as symlinks
(the artifact sink records them, never follows them), FIFOs and sockets as empty nodes of their kind (never
opened), anything else is left out; a file is written only as a fresh entry (an entry of the same name that the
environment put in the shared logs dir is replaced, never written through). It is bounded: holes stay holes (a
sparse 10 GB file costs its data), at most :data:`MAX_ENTRIES` entries, :data:`MAX_DEPTH` levels, and the
tmpfs's own size in bytes (hard links, which take no room there, are the only way past it).
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: As the artifact sink's (orchestrator/artifacts/sink.py): what it would record of the tree at most.
MAX_ENTRIES = 10_000
MAX_DEPTH = 64
CHUNK = 1 << 20
#: how a directory of either tree is opened: never through a link
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Copied:
    """What the copy did, and what of the agent's tmpfs was in use when the step ended."""

    entries: int = 0
    bytes: int = 0
    size_bytes: int = 0  # the tmpfs's size
    used_bytes: int = 0
    left_out: list[str] = field(default_factory=list)  # why entries were not copied (first few, with counts)
    not_copied: int = 0

    @property
    def full(self) -> bool:
        """Whether the agent met its bound: less than one page (or one entry) was left."""
        return self.size_bytes > 0 and self.size_bytes - self.used_bytes < 4096 * 2


def receive(sock: socket.socket) -> int | None:
    """The directory the sandbox's first program sent, or None (it never ran: the sandbox did not start). Only the
    first datagram counts: the agent never held the socket, and anything after it is ignored."""
    sock.setblocking(False)  # not MSG_DONTWAIT: a socket with a (default) timeout would wait that long
    try:
        _msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 4)
    except OSError:
        return None
    got = None
    for fd in fds:
        if got is None and stat.S_ISDIR(os.fstat(fd).st_mode):
            got = fd
        else:
            os.close(fd)
    return got


def copy_out(src: int, dest: Path) -> Copied:
    """Copy the tree under the directory ``src`` into ``dest`` (which exists); ``src`` stays open (the caller's)."""
    vfs = os.fstatvfs(src)
    done = Copied(size_bytes=vfs.f_blocks * vfs.f_frsize, used_bytes=(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize)
    budget = done.size_bytes
    reasons: dict[str, int] = {}

    def leave(why: str) -> None:
        done.not_copied += 1
        reasons[why] = reasons.get(why, 0) + 1

    root = os.open(str(dest), DIR_FLAGS)
    stack: list[tuple[int, int, Iterator[os.DirEntry[str]], int]] = []
    try:
        top = os.dup(src)
        stack.append((top, root, iter(os.scandir(top)), 0))
        while stack:
            s, d, entries, depth = stack[-1]
            e = next(entries, None)
            if e is None:
                stack.pop()
                os.close(s)
                if d != root:
                    os.close(d)
                continue
            if done.entries >= MAX_ENTRIES:  # the rest is not walked: a million empty files cost no more
                leave(f"entries past the first {MAX_ENTRIES} (and all after them)")
                break
            try:
                st = os.stat(e.name, dir_fd=s, follow_symlinks=False)
            except OSError:
                leave("gone before it was copied")
                continue
            done.entries += 1
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                if depth + 1 >= MAX_DEPTH:
                    leave(f"a directory deeper than {MAX_DEPTH} levels")
                    continue
                sub = _make_dir(e.name, d)
                if sub is None:
                    leave("its name is taken in the logs dir by a directory of the environment's")
                    continue
                try:
                    ssub = os.open(e.name, DIR_FLAGS, dir_fd=s)
                    stack.append((ssub, sub, iter(os.scandir(ssub)), depth + 1))
                except OSError:
                    os.close(sub)
                    leave("its directory could not be listed")
                continue
            if not _clear(e.name, d):
                leave("its name is taken in the logs dir by a directory of the environment's")
                continue
            try:
                if stat.S_ISREG(mode):
                    if st.st_blocks * 512 > budget:
                        leave("past the bound's bytes (hard links)")
                        continue
                    n = _copy_file(e.name, s, d)
                    budget -= n
                    done.bytes += n
                elif stat.S_ISLNK(mode):
                    os.symlink(os.readlink(e.name, dir_fd=s), e.name, dir_fd=d)
                elif stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                    os.mknod(e.name, stat.S_IFMT(mode) | 0o644, dir_fd=d)
                else:
                    leave("a device node")
            except OSError as exc:
                leave(f"could not be copied ({errno.errorcode.get(exc.errno or 0, exc.strerror)})")
    finally:
        for s, d, _, _ in stack:
            os.close(s)
            if d != root:
                os.close(d)
        os.close(root)
    done.left_out = [f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])][:5]
    return done


def _make_dir(name: str, d: int) -> int | None:
    """The directory ``name`` in ``d``: the one there (a real directory), or a fresh one in place of another entry."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=d)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None
    if not _clear(name, d):
        return None
    try:
        os.mkdir(name, 0o755, dir_fd=d)
        return os.open(name, DIR_FLAGS, dir_fd=d)
    except OSError:
        return None


def _clear(name: str, d: int) -> bool:
    """Make room for ``name`` in ``d``: a file, link or node there is removed (never followed); a directory stays."""
    try:
        os.unlink(name, dir_fd=d)
    except FileNotFoundError:
        return True
    except IsADirectoryError:
        return False
    except OSError as exc:
        return exc.errno != errno.EPERM  # EPERM: a directory (unlink of one is refused so on Linux)
    return True


def _copy_file(name: str, s: int, d: int) -> int:
    """A regular file, holes kept: only its data is read and written. Its bytes of data."""
    src = os.open(name, _READ, dir_fd=s)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open: left out
            raise OSError(errno.EINVAL, "not a regular file")
        dst = os.open(name, _WRITE, 0o644, dir_fd=d)
        try:
            copied = 0
            pos = 0
            while pos < st.st_size:
                try:
                    start = os.lseek(src, pos, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # only a hole is left
                        break
                    raise
                end = os.lseek(src, start, os.SEEK_HOLE)
                os.lseek(src, start, os.SEEK_SET)
                os.lseek(dst, start, os.SEEK_SET)
                left = end - start
                while left > 0:
                    chunk = os.read(src, min(CHUNK, left))
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(dst, view) :]
                    left -= len(chunk)
                    copied += len(chunk)
                pos = end
            os.ftruncate(dst, st.st_size)
            return copied
        finally:
            os.close(dst)
    finally:
        os.close(src)
