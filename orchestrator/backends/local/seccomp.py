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

The list is kept to what the namespaces leave open. The rest of Docker's list either
needs a capability a step does not have (it is ``nobody`` on the host and bwrap drops
every capability inside: ``mount``, ``kexec_load``, ``init_module``, ``bpf``, ...) or
is contained already (``ptrace`` reaches only the step's own PID namespace).

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

#: Refused in every sandboxed step: the kernel keyring (see the module doc).
BLOCKED = ("add_key", "keyctl", "request_key")
#: What a refused call returns: Docker's default profile answers EPERM too.
ERRNO = errno.EPERM


class FilterUnavailable(RuntimeError):
    """libseccomp (or its binding) is missing, or it cannot compile the program here."""


@dataclass
class Filter:
    """A compiled BPF program in a sealed memfd of this process."""

    fd: int
    arches: list[str]
    library: str

    @property
    def path(self) -> str:
        # Opened by the step's own wrapper shell (the orchestrator's uid, before any uid drop).
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def describe(self) -> dict[str, Any]:
        return {"filter": "libseccomp", "library": self.library, "blocked": list(BLOCKED),
                "errno": errno.errorcode[ERRNO], "arches": self.arches}


_built: Filter | None = None
_lock = threading.Lock()


def build() -> Filter:
    """The filter, compiled on first use (the program is the same for every backend of this process)."""
    global _built
    with _lock:
        if _built is None:
            _built = _compile()
        return _built


def _compile() -> Filter:
    """Compile the filter: allow everything but :data:`BLOCKED`, on the native ABI and its 32-bit one."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError, RuntimeError) as exc:  # RuntimeError: the binding found no libseccomp.so
        raise FilterUnavailable(f"libseccomp is not usable ({type(exc).__name__}: {exc})") from None
    try:
        flt = sc.SyscallFilter(sc.ALLOW)
        arches = ["native"]
        # A 32-bit program (int 0x80) would otherwise reach keyctl by its i386 number; libseccomp's default
        # action for an ABI the filter does not name is to kill, so adding it keeps such programs working.
        if sc.system_arch() == sc.Arch.X86_64:
            flt.add_arch(sc.Arch.X86)
            arches.append("x86")
        elif sc.system_arch() == sc.Arch.AARCH64:
            flt.add_arch(sc.Arch.ARM)
            arches.append("arm")
        for name in BLOCKED:
            flt.add_rule(sc.ERRNO(ERRNO), name)
        fd = os.memfd_create("headroom-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        with os.fdopen(os.dup(fd), "wb") as out:
            flt.export_bpf(out)
        # Sealed: nothing (a step's wrapper included) can change the program once it is written.
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    except (OSError, ValueError, AttributeError) as exc:
        raise FilterUnavailable(f"libseccomp could not build the filter ({type(exc).__name__}: {exc})") from None
    if os.fstat(fd).st_size == 0:
        os.close(fd)
        raise FilterUnavailable("libseccomp produced an empty filter")
    return Filter(fd=fd, arches=arches, library=_library_version(sc))


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
