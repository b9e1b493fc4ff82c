"""Taking a secret out of this process's environment: read once, then gone from every place it could be read.

``os.environ.pop`` removes a variable from what children inherit, but the kernel still shows the
environment the process started with: ``/proc/PID/environ`` reads it from the process's own memory, where
``unsetenv`` leaves it. Anything that can read that file (a process of the same user outside a sandbox; a
trusted host agent) would find the key there. So the value's bytes in that block are overwritten too,
through ``/proc/self/mem``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def take(names: Iterable[str]) -> dict[str, str]:
    """The values of ``names`` (those set), removed from ``os.environ`` and wiped from the start-up block."""
    got = {n: os.environ[n] for n in names if os.environ.get(n)}
    for n in got:
        os.environ.pop(n, None)
    if got:
        wipe_startup_environ(got)
    return got


def wipe_startup_environ(names: Iterable[str]) -> bool:
    """Overwrite the values of ``names`` in the environment block ``/proc/self/environ`` shows. False when it
    could not be done (a kernel without ``/proc/self/mem`` writes): the variables are still gone from
    ``os.environ`` and from every child's environment."""
    wanted = {n.encode() for n in names}
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # fields[0] is the state (field 3 of proc(5)); env_start and env_end are fields 50 and 51
        start, end = int(fields[47]), int(fields[48])
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            offset = 0
            for entry in block.split(b"\0"):
                name, sep, value = entry.partition(b"=")
                if sep and name in wanted and value:
                    mem.seek(start + offset + len(name) + 1)
                    mem.write(b"\0" * len(value))
                offset += len(entry) + 1
        return True
    except (OSError, ValueError, IndexError):
        return False
