"""The real node's stand-in for kube-proxy, for one Service: the API server's ``kubernetes`` ClusterIP.

The test plane has no kube-proxy, and the real node's pods live behind containerd's own
network namespace, where nothing reaches the host's loopback API server. A pod using the
in-cluster config (``KUBERNETES_SERVICE_HOST`` = the ``kubernetes`` Service's ClusterIP,
which the API server's certificate names) connects to that IP; this process owns it:

* it enters the node's network namespace (``setns``), adds the ClusterIP to ``lo`` there and
  listens on it, then returns to the host's namespace;
* every accepted connection is relayed, as plain TCP (TLS stays end to end), to the API
  server on the host's 127.0.0.1.

Pods route everything through the node's namespace (the CNI's default route), so a packet for
the ClusterIP is delivered to this listener locally. Nothing listens outside namespaces the
test session created. Run: ``python -m tests.cluster.netns_bridge NETNS_FILE IP:PORT HOST:PORT``.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000


def setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def listen_in(netns_file: str, ip: str, port: int) -> socket.socket:
    """A listening socket in another network namespace; the calling thread comes back to its own."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns_file, os.O_RDONLY)
    try:
        setns(target)
        try:
            # forked from this thread, so `ip` runs in the node's namespace
            subprocess.run(["ip", "addr", "replace", f"{ip}/32", "dev", "lo"], check=True)
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind((ip, port))
            srv.listen(64)
        finally:
            setns(home)
    finally:
        os.close(home)
        os.close(target)
    return srv


def pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(conn: socket.socket, upstream: tuple[str, int]) -> None:
    try:
        up = socket.create_connection(upstream, timeout=10)
        up.settimeout(None)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pump, args=(up, conn), daemon=True).start()
    pump(conn, up)


def main(argv: list[str]) -> None:
    netns_file, listen, upstream = argv
    ip, port = listen.rsplit(":", 1)
    host, uport = upstream.rsplit(":", 1)
    srv = listen_in(netns_file, ip, int(port))
    print(f"relaying {listen} (in {netns_file}) to {upstream}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=relay, args=(conn, (host, int(uport))), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
