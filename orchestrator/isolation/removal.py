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
import shutil
import subprocess
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
