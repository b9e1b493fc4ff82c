"""The seccomp program bubblewrap installs in each sandboxed step (``bwrap --seccomp FD``).

The namespaces of :mod:`.sandbox` separate files, processes, IPC and the network,
but not the kernel's key management: a step inherits the orchestrator's *session
keyring* (a login's credentials, a Kerberos ticket, an API token someone put there),
and a key one step adds (to that inherited keyring, or to its uid's keyrings: every
step is ``nobody``) is seen by later steps, other trials' included, and outlives the
step. Docker's default seccomp profile refuses the three
keyring syscalls for exactly this reason ("prevent containers from using the kernel
keyring, which is not namespaced"); this filter does the same, with the same errno
(EPERM), so a task behaves alike on the local and Docker backends.

It also refuses ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register``, as Docker's
default profile does (since 25.0): io_uring runs operations from the kernel's own workers, past
what a filter on the calling thread sees (``IORING_OP_SOCKET`` creates a socket without a
``socket()`` call, so the socket-family rule below would not see it). A program falls back to
ordinary calls when ``io_uring_setup`` fails, as it must under Docker.

The list is kept to what the namespaces leave open. The rest of Docker's list either
needs a capability a step does not have (it is ``nobody`` on the host and bwrap drops
every capability inside: ``mount``, ``kexec_load``, ``init_module``, ``bpf``, ...) or
is contained already (``ptrace`` reaches only the step's own PID namespace).

With the network off (no ``allow_internet``) it also refuses every socket family but
``AF_UNIX``, ``AF_INET`` and ``AF_INET6`` (:data:`OFFLINE_FAMILIES`): the network namespace
has no interface but loopback, but ``AF_VSOCK`` (a VM's channel to its host), ``AF_NETLINK``,
``AF_BLUETOOTH`` and the like are not routed through it, so a step could still talk to the
world, or to the kernel's less-used protocol code, there. ``socket`` and ``socketpair`` get
EPERM for any other family (as Docker's default profile refuses ``AF_VSOCK``); on the 32-bit
x86 ABI the ``socketcall`` multiplexer hides the family in memory a filter cannot read, so its
SOCKET and SOCKETPAIR calls are refused whole (32-bit programs built against a glibc since
2.23 call ``socket`` directly and keep unix and inet sockets).

The program is compiled by libseccomp (the library under Docker, systemd and
Flatpak) through ``pyseccomp``, a ctypes binding to the system's ``libseccomp.so.2``.
It is built once per process into a sealed memfd; each step opens it afresh by path,
so concurrent steps never share a read offset. Where it cannot be built the sandbox
runs without it and says so (:class:`FilterUnavailable`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import FilterUnavailable

#: Refused in every sandboxed step: the kernel keyring and io_uring (see the module doc).
BLOCKED = ("add_key", "keyctl", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register")
#: What a refused call returns: Docker's default profile answers EPERM too.
ERRNO = errno.EPERM
#: The only socket families a step may create with the network off (see the module doc).
OFFLINE_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}
#: socketcall(2)'s call numbers that create sockets (linux/net.h SYS_SOCKET, SYS_SOCKETPAIR).
_SOCKETCALL_CREATES = (1, 8)


@dataclass
class Filter:
    """A compiled BPF program in a sealed memfd of this process."""

    fd: int
    arches: list[str]
    library: str
    network: bool = True  # False: socket families restricted to OFFLINE_FAMILIES

    @property
    def path(self) -> str:
        # Opened by the step's own wrapper shell (the orchestrator's uid, before any uid drop).
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "filter": "libseccomp",
            "library": self.library,
            "blocked": list(BLOCKED),
            "errno": errno.errorcode[ERRNO],
            "arches": self.arches,
        }
        if not self.network:
            out["socket_families"] = sorted(OFFLINE_FAMILIES)
        return out


_built: dict[bool, Filter] = {}
_lock = threading.Lock()


def build(network: bool = True) -> Filter:
    """The filter for steps with or without the network, compiled on first use (one per process)."""
    with _lock:
        if network not in _built:
            _built[network] = _compile(network)
        return _built[network]


def _offline_rules(sc: Any, flt: Any, x86: bool) -> None:
    """Refuse ``socket``/``socketpair`` for every family but OFFLINE_FAMILIES: one comparison per rule
    (libseccomp ANDs a rule's comparisons), the families below the largest allowed one by name, and
    everything above it (a negative int or high bits included: the compare is unsigned 64-bit) at once."""
    allowed = set(OFFLINE_FAMILIES.values())
    top = max(allowed)
    for call in ("socket", "socketpair"):
        flt.add_rule(sc.ERRNO(ERRNO), call, sc.Arg(0, sc.GT, top))
        for family in range(top):
            if family not in allowed:
                flt.add_rule(sc.ERRNO(ERRNO), call, sc.Arg(0, sc.EQ, family))
    if x86:
        for number in _SOCKETCALL_CREATES:
            flt.add_rule(sc.ERRNO(ERRNO), "socketcall", sc.Arg(0, sc.EQ, number))


def _compile(network: bool = True) -> Filter:
    """Compile the filter: allow everything but :data:`BLOCKED` (and, offline, other socket families),
    on the native ABI and its 32-bit one."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError, RuntimeError) as exc:  # RuntimeError: the binding found no libseccomp.so
        raise FilterUnavailable(f"libseccomp is not usable ({type(exc).__name__}: {exc})") from None
    try:
        flt = sc.SyscallFilter(sc.ALLOW)
        arches = ["native"]
        # A 32-bit program (int 0x80) would otherwise reach keyctl by its i386 number; libseccomp's default
        # action for an ABI the filter does not name is to kill, so adding it keeps such programs working.
        x86 = sc.system_arch() == sc.Arch.X86_64
        if x86:
            flt.add_arch(sc.Arch.X86)
            arches.append("x86")
        elif sc.system_arch() == sc.Arch.AARCH64:
            flt.add_arch(sc.Arch.ARM)
            arches.append("arm")
        for name in BLOCKED:
            flt.add_rule(sc.ERRNO(ERRNO), name)
        if not network:
            _offline_rules(sc, flt, x86)
        fd = os.memfd_create("headroom-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        with os.fdopen(os.dup(fd), "wb") as out:
            flt.export_bpf(out)
        # Sealed: nothing (a step's wrapper included) can change the program once it is written.
        fcntl.fcntl(
            fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
        )
    except (OSError, ValueError, AttributeError) as exc:
        raise FilterUnavailable(f"libseccomp could not build the filter ({type(exc).__name__}: {exc})") from None
    if os.fstat(fd).st_size == 0:
        os.close(fd)
        raise FilterUnavailable("libseccomp produced an empty filter")
    return Filter(fd=fd, arches=arches, library=_library_version(sc), network=network)


def _library_version(sc: Any) -> str:
    """libseccomp's version, from the library itself (seccomp_version), for provenance."""
    try:
        import ctypes

        class _Version(ctypes.Structure):
            _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]

        fn = sc._libseccomp.seccomp_version
        fn.restype = ctypes.POINTER(_Version)
        v = fn().contents
        return f"libseccomp {v.major}.{v.minor}.{v.micro}"
    except (AttributeError, ValueError, OSError):
        return "libseccomp"
