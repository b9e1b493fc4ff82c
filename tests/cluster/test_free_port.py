"""The ports the test plane and its daemons are handed: never from the range outgoing connections take."""

from __future__ import annotations

import socket

from tests.cluster.plane import _ephemeral_low, free_port


def test_a_handed_port_is_bindable_below_the_outgoing_range_and_never_handed_twice() -> None:
    """A port from the kernel's outgoing range could be taken by any client connection before its server binds it
    (etcd failed to start that way in a suite run): every port handed out is below that range, free, and new."""
    low = _ephemeral_low()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(p < low for p in ports), (low, ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", ports[-1]))  # still free: the helper holds nothing
