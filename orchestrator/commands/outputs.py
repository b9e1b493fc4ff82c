"""Where a command writes (``-o``/``--output``, ``--tasks-out``): every mistake is one line, never a traceback.

Each path is checked before the command does its work, so a typo costs nothing; the write
itself still turns an OSError into the same kind of line (a full disk, /proc, a race).
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import UserError


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_file(path: Path, option: str) -> None:
    """PATH will be written as a file: refuse a directory, a missing parent directory or one we cannot write."""
    if path.is_dir():
        raise UserError("is a directory; give a file name", file=str(path), field=option)
    parent = path.absolute().parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise UserError(f"directory {parent} {what}", file=str(path), field=option)
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise UserError("cannot write here (permission denied)", file=str(path), field=option)


def check_dir(path: Path, option: str) -> None:
    """PATH will be a directory (created with its parents if missing): refuse a file or an unwritable place."""
    if path.exists() and not path.is_dir():
        raise UserError("exists and is not a directory", file=str(path), field=option)
    base = _nearest_existing(path)
    if not base.is_dir():
        raise UserError(f"{base} is not a directory", file=str(path), field=option)
    if not os.access(base, os.W_OK):
        raise UserError(f"cannot write in {base} (permission denied)", file=str(path), field=option)


def make_dir(path: Path, option: str) -> None:
    check_dir(path, option)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the directory ({exc.strerror})", file=str(path), field=option) from None


def write_file(path: Path, text: str, option: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise UserError(f"cannot write ({exc.strerror})", file=str(path), field=option) from None
