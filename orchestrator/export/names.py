"""File names for what an agent or a task named: one safe path component each, never a path.

A task id comes from a directory the task author chose and an artifact name from a file the
agent wrote; both become folder and file names of an export. Each part is reduced to a
plain character set, can never be ``.``, ``..`` or empty, is bounded in length, and when
it had to change carries a hash of the original, so two different names never land on
one file. :func:`inside` is the last check before anything is opened for writing.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

MAX_PART = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._+@=,-]")


def component(raw: str) -> str:
    """``raw`` as one file name: the same text when it is already plain, else a plain form plus a hash of it."""
    plain = _UNSAFE.sub("_", raw)
    if plain.strip(".") == "":  # "", ".", "..", "..." are no names (and a name of dots only is a trap)
        plain = "_" + plain
    if plain == raw and len(raw) <= MAX_PART:
        return raw
    tag = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{plain[: MAX_PART - len(tag) - 1]}~{tag}"


def relative(raw: str) -> Path:
    """A '/'-separated name (an artifact's) as a relative path of safe components."""
    parts = [component(p) for p in raw.split("/")]
    return Path(*parts) if parts else Path("_")


def inside(root: Path, rel: Path) -> Path:
    """``root / rel``, refused unless it stays under ``root`` (``rel`` is built by :func:`relative`, so this
    only fails if that is ever broken)."""
    target = root / rel
    if rel.is_absolute() or ".." in rel.parts or not target.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"{rel} leaves {root}")
    return target
