"""What bubblewrap's defaults left open (issue 19, item 6): an uncounted /dev and /dev/shm, socket
families the network namespace does not cover, and io_uring (which creates sockets past the filter)."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from orchestrator.isolation import sandbox, seccomp
from tests.hostile.harness import assert_nothing_leaks, requires_sandbox, sweep, write_hostile_task

pytestmark = [pytest.mark.slow, requires_sandbox]


def test_dev_shm_counts_against_the_storage_limit_and_dev_is_read_only(tasks_root: Path, tmp_path: Path) -> None:
    # 300 MB into /dev/shm under a 30 MiB limit: once a tmpfs nobody counted; now the step's own dir
    # in the trial's work dir, which the storage watcher measures. /dev itself takes no new file.
    attack = textwrap.dedent("""
        echo x > /dev/planted 2>/dev/null && echo "WROTE DEV"
        head -c 16 /dev/urandom > /dev/null && echo "devices work"
        head -c 314572800 /dev/zero > /dev/shm/big && echo "WROTE SHM"
        sleep 20
        """)
    write_hostile_task(tasks_root, "shmfill", attack, storage_mb=30, memory_mb=512, agent_timeout=60)
    run = sweep(tasks_root, tmp_path, "--multipliers", "1x-strict")
    assert run.outcomes == [("infra_error", "storage_limit")], (run.outcomes, run.stdout_of())
    out = run.stdout_of()
    assert "WROTE DEV" not in out and "devices work" in out, out
    (ev,) = run.evidence
    assert ev["extra"]["storage_peak_bytes"] > 30 * 1024 * 1024
    assert ev["agent"]["timed_out"] is False
    assert_nothing_leaks(run)


def test_dev_shm_still_works_for_a_step(tasks_root: Path, tmp_path: Path) -> None:
    # Python's multiprocessing makes its semaphores in /dev/shm: an honest agent relying on it still runs.
    _, expected = write_hostile_task(tasks_root, "shmuse", "")
    (tasks_root / "shmuse" / "environment" / "attack.sh").write_text(
        textwrap.dedent(f"""
        python3 -c 'import multiprocessing as m; l = m.Lock(); l.acquire(); l.release(); print("lock ok")'
        echo {expected} > /dev/shm/a && cp /dev/shm/a "$HEADROOM_WORKDIR/answer"
        """)
    )
    run = sweep(tasks_root, tmp_path)
    assert run.outcomes == [("passed", None)], run.stdout_of()
    assert "lock ok" in run.stdout_of()


PROBE = textwrap.dedent("""
    import ctypes, errno, socket
    libc = ctypes.CDLL(None, use_errno=True)
    L = ctypes.c_long
    out = {}
    for name in ("AF_UNIX", "AF_INET", "AF_INET6", "AF_VSOCK", "AF_NETLINK", "AF_BLUETOOTH", "AF_ALG", "AF_UNSPEC", "AF_TIPC"):
        fam = getattr(socket, name)
        kind = socket.SOCK_RAW if name == "AF_NETLINK" else socket.SOCK_STREAM
        try:
            socket.socket(fam, kind).close()
            out[name] = "ok"
        except OSError as e:
            out[name] = errno.errorcode.get(e.errno)
    # the kernel reads the family as an int: high bits must not smuggle AF_VSOCK (40) past the filter
    r = libc.syscall(L(41), L((1 << 32) | 40), L(1), L(0))
    out["vsock_high_bits"] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno())
    r = libc.syscall(L(53), L(1), L(1), L(0), (ctypes.c_int * 2)())  # socketpair(AF_UNIX)
    out["socketpair_unix"] = "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno())
    r = libc.syscall(L(53), L(40), L(1), L(0), (ctypes.c_int * 2)())  # socketpair(AF_VSOCK)
    out["socketpair_vsock"] = "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno())
    print(out)
    """)


def _in_sandbox(probe: str, network: bool) -> dict[str, str]:
    """What one of our probes prints (a dict literal), run in a trial step's sandbox."""
    box = sandbox.probe()
    if box.filter is None:
        pytest.skip(f"no seccomp filter here: {box.filter_fallback_reason}")
    view = sandbox.StepView(task_dir=Path("/"), task_entries=[], network=network)
    res = subprocess.run(box.argv(view, ["python3", "-c", probe], cwd="/"), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return eval(res.stdout)  # noqa: S307 - our own probe's dict literal


def _families(network: bool) -> dict[str, str]:
    return _in_sandbox(PROBE, network)


def test_only_unix_and_inet_sockets_without_the_network() -> None:
    got = _families(network=False)
    assert {k: got[k] for k in ("AF_UNIX", "AF_INET", "AF_INET6", "socketpair_unix")} == dict.fromkeys(
        ("AF_UNIX", "AF_INET", "AF_INET6", "socketpair_unix"), "ok"
    ), got
    refused = (
        "AF_VSOCK",
        "AF_NETLINK",
        "AF_BLUETOOTH",
        "AF_ALG",
        "AF_UNSPEC",
        "AF_TIPC",
        "vsock_high_bits",
        "socketpair_vsock",
    )
    assert {k: got[k] for k in refused} == dict.fromkeys(refused, "EPERM"), got
    assert sandbox.probe().offline_filter.describe()["socket_families"] == sorted(seccomp.OFFLINE_FAMILIES)


def test_with_the_network_the_families_are_the_kernels_business() -> None:
    got = _families(network=True)
    assert got["AF_UNIX"] == got["AF_INET"] == "ok"
    assert got["AF_NETLINK"] == "ok"  # not refused by headroom's filter (the kernel decides the others)
    assert "EPERM" not in (got["AF_VSOCK"], got["AF_ALG"]), got


#: io_uring_setup(2) with an empty io_uring_params (its syscall number on this machine's ABI), then the other two
#: calls on a bad fd: refused by the filter they answer EPERM, allowed they reach the kernel (EBADF, or ENOSYS/EINVAL
#: where io_uring is off). IORING_OP_SOCKET makes sockets with no socket() call, so the family rule cannot see them.
URING = textwrap.dedent("""
    import ctypes, errno, platform
    libc = ctypes.CDLL(None, use_errno=True)
    L = ctypes.c_long
    nr = {"x86_64": (425, 426, 427), "aarch64": (425, 426, 427)}[platform.machine()]
    params = (ctypes.c_ubyte * 120)()
    out = {}
    for name, args in (("setup", (L(8), params)), ("enter", (L(-1), L(0), L(0), L(0), L(0), L(0))),
                       ("register", (L(-1), L(0), L(0), L(0)))):
        r = libc.syscall(L(nr[("setup", "enter", "register").index(name)]), *args)
        out[name] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno())
    print(out)
    """)


@pytest.mark.parametrize("network", [False, True])
def test_io_uring_is_refused_in_the_sandbox(network: bool) -> None:
    assert _in_sandbox(URING, network) == dict.fromkeys(("setup", "enter", "register"), "EPERM")
    # Outside the sandbox the same probe reaches the kernel: the EPERM above is the filter's, not the host's.
    host = subprocess.run(["python3", "-c", URING], capture_output=True, text=True, timeout=60)
    assert eval(host.stdout)["enter"] != "EPERM", host.stdout  # noqa: S307
