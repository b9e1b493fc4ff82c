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

The reverse direction (``--into``) is for containerd's CRI streaming server (exec, attach,
port-forward), which listens on 127.0.0.1 *inside* the node's namespace while the kubelet, in
the host's, dials the URL containerd hands it (``http://127.0.0.1:PORT/exec/...``): this process
listens on the host's 127.0.0.1:PORT and connects each accepted connection to 127.0.0.1:PORT in
the node's namespace (a socket created while the thread is in that namespace stays in it). Loopback
only on both sides. Run: ``python -m tests.cluster.netns_bridge --into NETNS_FILE 127.0.0.1:PORT
127.0.0.1:PORT`` (listen on the host, connect in the namespace).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import ipaddress
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

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


def connect_in(netns_file: str, address: tuple[str, int], timeout: float = 10) -> socket.socket:
    """A TCP connection to ``address`` made from another network namespace: the socket is created
    there (a socket keeps the namespace it was created in), then the thread comes back."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns_file, os.O_RDONLY)
    try:
        setns(target)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            setns(home)
    finally:
        os.close(home)
        os.close(target)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
        sock.settimeout(None)
    except OSError:
        sock.close()
        raise
    return sock


def listen_here(ip: str, port: int) -> socket.socket:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((ip, port))
    srv.listen(64)
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


def relay(conn: socket.socket, connect: Callable[[], socket.socket]) -> None:
    try:
        up = connect()
        up.settimeout(None)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pump, args=(up, conn), daemon=True).start()
    pump(conn, up)


def _address(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def _loopback(text: str) -> tuple[str, int]:
    host, port = _address(text)
    if not ipaddress.ip_address(host).is_loopback:
        raise argparse.ArgumentTypeError(f"{text}: the reverse bridge stays on loopback")
    return host, port


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="netns_bridge")
    p.add_argument(
        "--into",
        action="store_true",
        help="listen on the host's loopback, connect inside NETNS_FILE's namespace (loopback)",
    )
    p.add_argument(
        "--owner",
        help="the folder of the session that started it (tests/cluster/stale.py finds a "
        "crashed session's processes by it)",
    )
    p.add_argument("netns_file")
    p.add_argument("listen")
    p.add_argument("upstream")
    args = p.parse_args(argv)
    connect: Callable[[], socket.socket]
    if args.into:
        try:
            (ip, port), upstream = _loopback(args.listen), _loopback(args.upstream)
        except argparse.ArgumentTypeError as exc:
            p.error(str(exc))
        srv = listen_here(ip, port)
        connect = functools.partial(connect_in, args.netns_file, upstream)
        print(f"relaying {args.listen} to {args.upstream} (in {args.netns_file})", flush=True)
    else:
        (ip, port), upstream = _address(args.listen), _address(args.upstream)
        srv = listen_in(args.netns_file, ip, port)
        connect = functools.partial(socket.create_connection, upstream, 10)
        print(f"relaying {args.listen} (in {args.netns_file}) to {args.upstream}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=relay, args=(conn, connect), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
