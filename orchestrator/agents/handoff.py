"""The first program in a host-side agent's sandbox: it hands the agent's logs dir out, sets the agent's process
ceiling where there is no cgroup, and execs the agent (``python3 headroom_handoff.py FD DIR NPROC CARRIED -- COMMAND...``).

The agent's logs dir is a size-bounded tmpfs of the sandbox (:mod:`.host_sandbox`), so a write past its bound
fails with ENOSPC in the kernel, not after a poll; but a tmpfs of the sandbox is gone with the sandbox. So,
before the agent runs, this opens ``DIR`` and sends the open directory over the datagram socket ``FD`` (its
other end is headroom's, outside): a descriptor in flight, then held by headroom, keeps the tmpfs alive after the
sandbox's namespaces are gone, and headroom copies what the agent wrote out of it after the step
(:mod:`.host_logs`). The socket is closed before the agent starts: the first datagram is this program's.

``NPROC`` (empty: none) is set as ``RLIMIT_NPROC`` before the exec, here, after the sandbox dropped the agent to
its uid: where the host cannot give the agent a cgroup, the kernel's per-uid process count is its ceiling.

``CARRIED`` (empty: none) is a read-only copy of what an earlier host step of the try left in its logs dir (an
installed agent's setup: its state for the run); it is copied into ``DIR`` first, as far as the bound lets it.

Standard library only, no import from the rest of headroom: it is copied into the sandbox and run there by a
bare interpreter.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import sys


def main(argv: list[str]) -> None:
    if len(argv) < 6 or argv[4] != "--":
        sys.exit("usage: headroom_handoff.py FD DIR NPROC CARRIED -- COMMAND...")
    fd, where, nproc, carried, command = int(argv[0]), argv[1], argv[2], argv[3], argv[5:]
    if carried:
        try:
            shutil.copytree(carried, where, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:  # a full logs dir: the agent starts with what fitted, and is told
            sys.stderr.write(
                f"headroom-handoff: the earlier step's logs were not all carried over: {exc}"[:2000] + "\n"
            )
    try:
        if nproc:
            n = int(nproc)
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
        # last: a directory received means everything before the agent was done (external.py reads nothing else)
        d = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        with socket.socket(fileno=fd) as s:
            socket.send_fds(s, [b"logs"], [d])
        os.close(d)
    except (OSError, ValueError) as exc:
        # no directory sent: headroom reads that as the sandbox's failure to start (a spawn error), never the agent's
        sys.stderr.write(f"headroom-handoff: {exc}\n")
        sys.exit(126)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
