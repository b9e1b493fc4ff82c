"""Symlinks an agent leaves for the verifier to follow into what only the verifier sees.

The tests appear only in the verifier's sandbox, but an agent can name them in advance:
``ln -s /task/tests/expected.txt /app/answer`` makes a verifier that reads the answer read
the expected one (a probe passed a task this way; Harbor has the same gap). Before the
verifier runs, every symlink in what the agent could write and the verifier will see (the
work dir and the agent's logs) is resolved the way the verifier's kernel would, with the
not-yet-existing parts taken as written (``readlink -m``), following the links the agent
made on the way. A link that lands on a verifier-only path, or in ``/proc`` (its magic
links reach anything, ``/proc/self/root/task/tests`` included), or that cannot be
resolved here, is removed: the verifier then finds no answer, as if none was written.
Links elsewhere (``venv/bin/python -> /usr/bin/python3``) are left alone.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from pathlib import Path, PurePosixPath

#: Where the kernel goes from any path: a link into these reaches everything.
ALWAYS_HIDDEN = ("/proc", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr")
MAX_HOPS = 40  # the kernel's own limit on symlinks in one lookup
MAX_LISTED = 20


def _under(path: PurePosixPath, prefix: str) -> bool:
    return path == PurePosixPath(prefix) or PurePosixPath(prefix) in path.parents


class _Unresolvable(Exception):
    pass


def resolve(path: str, writable: dict[str, Path]) -> PurePosixPath:
    """Where ``path`` (a sandbox path) leads, following the links under ``writable`` (sandbox dir -> host dir).

    Links elsewhere (the read-only system, the task) are not the agent's and are taken as they are.
    """
    parts = deque(PurePosixPath(path).parts[1:])
    cur = PurePosixPath("/")
    hops = 0
    while parts:
        name = parts.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            cur = cur.parent
            continue
        nxt = cur / name
        host = next((Path(h) / nxt.relative_to(mount) for mount, h in writable.items() if _under(nxt, mount)), None)
        if host is not None:
            try:
                is_link = stat.S_ISLNK(os.lstat(host).st_mode)
            except FileNotFoundError:
                is_link = False
            except OSError as exc:  # too long a name, a loop on the host side: nothing the verifier should follow
                raise _Unresolvable(str(exc)) from None
            if is_link:
                hops += 1
                if hops > MAX_HOPS:
                    raise _Unresolvable("too many levels of symbolic links")
                target = PurePosixPath(os.readlink(host))
                if target.is_absolute():
                    cur = PurePosixPath("/")
                    parts.extendleft(reversed(target.parts[1:]))
                else:
                    parts.extendleft(reversed(target.parts))
                continue
        cur = nxt
    return cur


def _links(root: Path) -> list[Path]:
    """Every symlink under ``root`` reachable by path, without following any (iterative: any depth)."""
    out: list[Path] = []
    stack = [root]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                for entry in it:
                    try:
                        if entry.is_symlink():
                            out.append(Path(entry.path))
                        elif entry.is_dir(follow_symlinks=False):
                            stack.append(Path(entry.path))
                    except OSError:
                        continue
        except OSError:  # beyond PATH_MAX, or gone: the verifier cannot reach it by a path either
            continue
    return out


def remove_verifier_only_links(writable: dict[str, Path], hidden: list[str]) -> list[str]:
    """Remove the links under ``writable`` that lead into ``hidden`` (sandbox paths); the sandbox paths removed."""
    removed: list[str] = []
    for mount, host_root in writable.items():
        for link in _links(host_root):
            inside = str(PurePosixPath(mount) / link.relative_to(host_root).as_posix())
            try:
                where = resolve(inside, writable)
                bad = any(_under(where, h) for h in (*hidden, *ALWAYS_HIDDEN))
            except _Unresolvable:
                bad = True
            if bad:
                try:
                    link.unlink()
                except FileNotFoundError:
                    pass
                removed.append(inside)
    return removed
