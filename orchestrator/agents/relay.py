"""Byte relays between loopback TCP and a unix socket: how a host-side agent whose sandbox has no network but
its own loopback reaches the model gateway.

Two halves. In headroom, :class:`UnixToTcp` listens on a unix socket of the try (bound into the agent's
sandbox, nothing else of the host is) and connects each caller to the gateway's port on the host's loopback.
In the sandbox, this file runs as a script (``python3 headroom_relay.py PORT SOCKET -- COMMAND...``): it
listens on ``127.0.0.1:PORT`` of the sandbox's own loopback (the port the gateway has on the host, so the
URLs the agent is given mean the same inside), forks a child that relays each connection to ``SOCKET``, and
execs ``COMMAND`` (the agent) in its own place: when the agent ends, the sandbox's PID namespace ends, and
the relay with it.

Standard library only, no import from the rest of headroom: it is copied into the sandbox and run there by
a bare interpreter.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable

CHUNK = 1 << 16


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _splice(a: socket.socket, b: socket.socket) -> None:
    back = threading.Thread(target=_pump, args=(b, a), daemon=True)
    back.start()
    _pump(a, b)
    back.join()
    a.close()
    b.close()


def serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept until the listener is closed; each connection relayed to a fresh ``connect()`` in a thread."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return

        def handle(conn: socket.socket = conn) -> None:
            try:
                upstream = connect()
            except OSError:
                conn.close()
                return
            _splice(conn, upstream)

        threading.Thread(target=handle, daemon=True).start()


def _unix(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        s.close()
        raise
    return s


class UnixToTcp:
    """Headroom's half: ``path`` (a unix socket) relayed to ``127.0.0.1:port``."""

    def __init__(self, path: str, port: int, owner: tuple[int, int] | None = None) -> None:
        self.path = path
        self.port = port
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        os.chmod(path, 0o600)
        if owner is not None:  # the sandbox's unprivileged user connects to it
            os.chown(path, *owner)
        self._listener.listen(64)
        self._thread = threading.Thread(target=serve, args=(self._listener, self._tcp), daemon=True)

    def _tcp(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def __enter__(self) -> UnixToTcp:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def main(argv: list[str]) -> None:
    """The sandbox's half: ``PORT SOCKET -- COMMAND...``."""
    port, path, sep, *command = argv
    if sep != "--" or not command:
        sys.exit("usage: headroom_relay.py PORT SOCKET -- COMMAND...")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)
    if os.fork() == 0:  # before any thread: the child serves, the parent becomes the agent
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.setsid()
        serve(listener, lambda: _unix(path))
        os._exit(0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
