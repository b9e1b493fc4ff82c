"""The trial's disk limit, enforced the kubelet's way: measure what it wrote, evict when over.

The kubelet walks a pod's writable layer, emptyDirs and logs periodically and
evicts the pod when their sum exceeds its ``ephemeral-storage`` limit. Here the
sum is every writable directory of the trial (work dir, logs, each step's HOME
and TMPDIR), walked without following symlinks, hard links counted once, in
allocated blocks (``du``'s measure, so a sparse file costs what it really uses).

Two ceilings, both from the trial's storage limit:

* bytes: the limit itself;
* inodes (files, directories, symlinks): one per :data:`BYTES_PER_INODE` of the
  limit, the share of inodes that much of an ext4 disk comes with (``mkfs.ext4``'s
  default ``inode_ratio``). Empty files cost no blocks, yet a host out of inodes
  is as full as one out of bytes; a trial holding no more than its share of both
  cannot exhaust either faster than its limit says.

The walk goes by directory file descriptors (``openat`` with ``O_NOFOLLOW |
O_DIRECTORY``), never by path, so a tree deeper than ``PATH_MAX`` is measured like
any other; it is iterative (no recursion limit), keeps at most
:data:`MAX_OPEN_DIRS` descriptors open (deeper ancestors are re-opened through
``..`` and checked by device and inode), and stops as soon as a ceiling is passed,
so one walk costs at most about as many entries as the inode ceiling allows.
It is repeated while a step runs, at an interval that grows with the walk's own
cost so a tree of many small files cannot make the watcher a CPU hog, and once
more when the step ends (every process of it dead, so nothing moves under the
walk), so an agent that writes fast and exits is judged too.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: Polling bounds: at least this often when walks are cheap, never more often than 20x a walk's cost.
MIN_INTERVAL_S = 0.25
MAX_INTERVAL_S = 5.0
#: One inode per 16 KiB of the storage limit: mkfs.ext4's default inode_ratio (mke2fs.conf).
BYTES_PER_INODE = 16 * 1024
#: Directory descriptors one walk holds open at most, however deep the tree.
MAX_OPEN_DIRS = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def inode_ceiling(limit_bytes: int) -> int:
    """The inodes a trial may hold under a storage limit of ``limit_bytes``."""
    return max(1, limit_bytes // BYTES_PER_INODE)


@dataclass
class Usage:
    """What a walk found: allocated bytes and inodes; ``complete`` False if it stopped early."""

    bytes: int = 0
    inodes: int = 0
    complete: bool = True


@dataclass
class _Dir:
    fd: int | None  # None once closed to bound the open descriptors; re-opened through ".." on the way back
    key: tuple[int, int]
    subdirs: list[str] = field(default_factory=list)


class _Walk:
    def __init__(self, stop_bytes: int | None, stop_inodes: int | None) -> None:
        self.usage = Usage()
        self.seen: set[tuple[int, int]] = set()
        self.stop_bytes = stop_bytes
        self.stop_inodes = stop_inodes

    def over(self) -> bool:
        u = self.usage
        return (self.stop_bytes is not None and u.bytes > self.stop_bytes) or (
            self.stop_inodes is not None and u.inodes > self.stop_inodes
        )

    def count(self, st: os.stat_result) -> None:
        self.usage.bytes += st.st_blocks * 512
        self.usage.inodes += 1

    def enter(self, fd: int, listed: bool) -> _Dir | None:
        """Count the directory open on ``fd`` and its entries; None if already counted.

        A subdirectory's inode is counted when its parent lists it (``listed`` when entering it later only adds
        its blocks), so a directory of a million empty subdirectories passes the inode ceiling while it is listed.
        """
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if key in self.seen:
            return None
        self.seen.add(key)
        self.usage.bytes += st.st_blocks * 512
        self.usage.inodes += 0 if listed else 1
        d = _Dir(fd, key)
        with os.scandir(fd) as it:  # entries stat'ed relative to fd (fstatat), never by path
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        d.subdirs.append(entry.name)
                        self.usage.inodes += 1
                    else:
                        est = entry.stat(follow_symlinks=False)
                        if est.st_nlink > 1:
                            ekey = (est.st_dev, est.st_ino)
                            if ekey in self.seen:
                                continue
                            self.seen.add(ekey)
                        self.count(est)
                except OSError:
                    continue  # removed while we looked
                if self.over():
                    break
        return d

    def tree(self, root: Path) -> None:
        try:
            fd = os.open(root, _DIR_FLAGS)
        except OSError:
            try:  # a root that is not a directory (or is gone)
                self.count(os.lstat(root))
            except OSError:
                pass
            return
        try:
            top = self.enter(fd, listed=False)
        except OSError:
            os.close(fd)
            return
        if top is None:
            os.close(fd)
            return
        stack = [top]
        try:
            while stack and not self.over():
                cur = stack[-1]
                assert cur.fd is not None
                if not cur.subdirs:
                    stack.pop()
                    if stack and stack[-1].fd is None and not self._reopen_parent(cur.fd, stack[-1]):
                        self.usage.complete = False  # the tree moved under the walk: count what was found
                        os.close(cur.fd)
                        return
                    os.close(cur.fd)
                    continue
                name = cur.subdirs.pop()
                try:
                    child_fd = _open_dir(name, cur.fd)
                except OSError:
                    continue  # removed or replaced by a symlink meanwhile
                try:
                    child = self.enter(child_fd, listed=True)
                except OSError:
                    child = None
                if child is None:
                    os.close(child_fd)
                    continue
                stack.append(child)
                if len(stack) > MAX_OPEN_DIRS and (old := stack[-1 - MAX_OPEN_DIRS]).fd is not None:
                    os.close(old.fd)
                    old.fd = None
        finally:
            for d in stack:
                if d.fd is not None:
                    os.close(d.fd)

    @staticmethod
    def _reopen_parent(child_fd: int, parent: _Dir) -> bool:
        """Re-open ``parent`` as ``..`` of the directory on ``child_fd``; False if it is no longer that directory."""
        try:
            fd = os.open("..", _DIR_FLAGS, dir_fd=child_fd)
        except OSError:
            return False
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != parent.key:
            os.close(fd)
            return False
        parent.fd = fd
        return True


def _open_dir(name: str, dir_fd: int) -> int:
    """Open the subdirectory ``name`` for listing, making it listable if its owner (us) had made it unreadable.

    A headroom that is not root runs its steps under its own uid, so a step can ``chmod 000`` a directory to
    hide what is in it from the walk. Its owner may always give it back ``rwx``: through an ``O_PATH`` descriptor
    opened with ``O_NOFOLLOW | O_DIRECTORY``, so never through a symlink the step swapped in.
    """
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{pfd}", stat.S_IMODE(os.fstat(pfd).st_mode) | stat.S_IRWXU)
        finally:
            os.close(pfd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def measure(roots: Iterable[Path], *, stop_bytes: int | None = None, stop_inodes: int | None = None) -> Usage:
    """Allocated bytes and inodes under ``roots`` (hard links once, symlinks not followed, any depth).

    With ``stop_bytes``/``stop_inodes`` the walk ends as soon as either is passed
    (the result is then a lower bound, already over the ceiling).
    """
    walk = _Walk(stop_bytes, stop_inodes)
    for r in roots:
        if walk.over():
            walk.usage.complete = False
            break
        walk.tree(Path(r))
    walk.usage.complete = walk.usage.complete and not walk.over()
    return walk.usage


def usage_bytes(roots: Iterable[Path]) -> int:
    """Allocated bytes under ``roots`` (hard links once, symlinks not followed)."""
    return measure(roots).bytes


class DiskWatcher:
    """Watch ``roots`` while a trial runs; call ``on_exceeded`` once if they pass the limit or its inode ceiling."""

    def __init__(self, roots: list[Path], limit_bytes: int, on_exceeded: Callable[[int], None]) -> None:
        self.roots = roots
        self.limit_bytes = limit_bytes
        self.limit_inodes = inode_ceiling(limit_bytes)
        self.on_exceeded = on_exceeded
        self.peak_bytes = 0
        self.peak_inodes = 0
        #: the measurement that first passed a ceiling (bytes, inodes), None while none has
        self.exceeded: Usage | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="headroom-disk-watch", daemon=True)

    @property
    def exceeded_bytes(self) -> int | None:
        return self.exceeded.bytes if self.exceeded else None

    def __enter__(self) -> DiskWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def over(self, u: Usage) -> bool:
        return u.bytes > self.limit_bytes or u.inodes > self.limit_inodes

    def check(self) -> bool:
        """Measure now; True (and ``on_exceeded`` called once) if over the limit or the inode ceiling."""
        used = measure(self.roots, stop_bytes=self.limit_bytes, stop_inodes=self.limit_inodes)
        with self._lock:
            self.peak_bytes = max(self.peak_bytes, used.bytes)
            self.peak_inodes = max(self.peak_inodes, used.inodes)
            first = self.over(used) and self.exceeded is None
            if first:
                self.exceeded = used
        if first:
            self.on_exceeded(used.bytes)
        return self.exceeded is not None

    def detail(self) -> str | None:
        """Why the trial was evicted, in one line; None if it was not."""
        u = self.exceeded
        if u is None:
            return None
        mib = 1024 * 1024
        if u.bytes > self.limit_bytes:
            return (
                f"the trial wrote {u.bytes / mib:.1f} MiB, over its storage limit of {self.limit_bytes / mib:.1f} MiB"
            )
        return (
            f"the trial created {u.inodes} files and directories, over the {self.limit_inodes} its storage limit "
            f"of {self.limit_bytes / mib:.1f} MiB allows (one per {BYTES_PER_INODE // 1024} KiB)"
        )

    def _loop(self) -> None:
        interval = MIN_INTERVAL_S
        while not self._stop.wait(interval):
            t0 = time.monotonic()
            if self.check():
                return
            interval = min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, 20 * (time.monotonic() - t0)))
