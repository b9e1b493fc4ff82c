"""Removing a tree an agent wrote, whatever it made of it.

``shutil.rmtree`` recurses in Python (3.11): a directory nested a few thousand levels deep,
which any agent can make in its work dir with a loop of ``mkdir d; cd d``, raises
``RecursionError`` (``ignore_errors`` does not cover it), and deeper than ``PATH_MAX`` it
cannot even name the entries. Left behind, such a tree broke the next headroom start, which
removes what crashed runs left. GNU ``rm`` walks with ``fts`` and relative ``*at`` calls, so
any depth goes; ``--one-file-system`` keeps it off anything mounted inside.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path


def remove_tree(path: Path) -> bool:
    """Remove ``path`` and everything under it, never following symlinks; True when it is gone."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        pass
    if not os.path.lexists(path):
        return True
    subprocess.run(
        ["rm", "-rf", "--one-file-system", "--", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=600,
    )
    return not os.path.lexists(path)


class BackgroundRemoval:
    """Removes finished trials' work dirs on one thread of its own, off the trial's path (issue 32: some 30 ms a
    trial, disk-bound, spent before the slot was free again).

    What a trial keeps (its logs, its artifacts) is copied out before its work dir is handed over here.
    ``submit`` blocks once ``backlog`` dirs are waiting, so a slow disk slows the trials down instead of
    filling up; :meth:`drain` returns when every dir handed over so far is gone (or could not be removed),
    and :meth:`close` drains. A headroom killed before that leaves them in its work root, which the next
    start reaps like any crashed run's.
    """

    def __init__(self, backlog: int = 16) -> None:
        self._queue: queue.Queue[Path | None] = queue.Queue(maxsize=backlog)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: what could not be removed (something in it refuses deletion); left for the work root's removal
        self.failed: list[Path] = []

    def submit(self, path: Path) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="workdir-removal", daemon=True)
                self._thread.start()
        self._queue.put(path)

    def drain(self) -> None:
        self._queue.join()

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _work(self) -> None:
        while True:
            path = self._queue.get()
            try:
                if path is None:
                    return
                if not remove_tree(path):
                    self.failed.append(path)
            except Exception:  # noqa: BLE001 - one tree that cannot go must not stop the removal of the next
                if path is not None:
                    self.failed.append(path)
            finally:
                self._queue.task_done()
