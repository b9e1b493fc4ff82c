"""The trial's disk limit, enforced the kubelet's way: measure what it wrote, evict when over.

The kubelet walks a pod's writable layer, emptyDirs and logs periodically and
evicts the pod when their sum exceeds its ``ephemeral-storage`` limit. Here the
sum is every writable directory of the trial (work dir, logs, each step's HOME
and TMPDIR), walked without following symlinks, hard links counted once, in
allocated blocks (``du``'s measure, so a sparse file costs what it really uses).
The walk is repeated while a step runs, at an interval that grows with the
walk's own cost so a tree of many small files cannot make the watcher a CPU
hog, and once more when the step ends, so an agent that writes fast and exits
is judged too.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

#: Polling bounds: at least this often when walks are cheap, never more often than 20x a walk's cost.
MIN_INTERVAL_S = 0.25
MAX_INTERVAL_S = 5.0


def usage_bytes(roots: Iterable[Path]) -> int:
    """Allocated bytes under ``roots`` (hard links once, symlinks not followed)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(r) for r in roots]
    while stack:
        top = stack.pop()
        try:
            st = os.lstat(top)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        total += st.st_blocks * 512
        if not stat.S_ISDIR(st.st_mode):
            continue
        try:
            with os.scandir(top) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                            continue
                        est = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    ekey = (est.st_dev, est.st_ino)
                    if est.st_nlink > 1:
                        if ekey in seen:
                            continue
                        seen.add(ekey)
                    total += est.st_blocks * 512
        except OSError:
            continue
    return total


class DiskWatcher:
    """Watch ``roots`` while a trial runs; call ``on_exceeded`` once if they grow past ``limit_bytes``."""

    def __init__(self, roots: list[Path], limit_bytes: int, on_exceeded: Callable[[int], None]) -> None:
        self.roots = roots
        self.limit_bytes = limit_bytes
        self.on_exceeded = on_exceeded
        self.peak_bytes = 0
        self.exceeded_bytes: int | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="headroom-disk-watch", daemon=True)

    def __enter__(self) -> "DiskWatcher":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def check(self) -> bool:
        """Measure now; True (and ``on_exceeded`` called once) if over the limit."""
        used = usage_bytes(self.roots)
        with self._lock:
            self.peak_bytes = max(self.peak_bytes, used)
            first = used > self.limit_bytes and self.exceeded_bytes is None
            if first:
                self.exceeded_bytes = used
        if first:
            self.on_exceeded(used)
        return self.exceeded_bytes is not None

    def _loop(self) -> None:
        interval = MIN_INTERVAL_S
        while not self._stop.wait(interval):
            t0 = time.monotonic()
            if self.check():
                return
            interval = min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, 20 * (time.monotonic() - t0)))
