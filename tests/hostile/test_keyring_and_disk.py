"""Hostile agents against what the namespaces do not separate: the kernel keyring, and the disk the
storage limit is measured on (a tree deeper than PATH_MAX, a flood of empty files)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.isolation import sandbox, storage
from tests.hostile.harness import assert_nothing_leaks, requires_sandbox, sweep, write_hostile_task

pytestmark = [pytest.mark.slow, requires_sandbox]

#: Reads every key the agent can reach: the session, process, thread, user and user-session keyrings, and
#: /proc/keys. Whatever payload it finds goes to the answer; it prints what it could do.
READ_KEYS = textwrap.dedent(r"""
    python3 - <<'PY'
    import ctypes, re, struct
    libc = ctypes.CDLL(None, use_errno=True)
    KEYCTL, GET_ID, DESCRIBE, READ = 250, 0, 6, 11
    found = []
    for spec in (-3, -2, -1, -4, -5):  # session, process, thread, user, user-session keyrings
        kr = libc.syscall(KEYCTL, GET_ID, spec, 0)
        print("keyring", spec, "->", kr if kr > 0 else f"refused errno {ctypes.get_errno()}")
        if kr <= 0:
            continue
        buf = ctypes.create_string_buffer(4096)
        n = libc.syscall(KEYCTL, READ, kr, buf, 4096)
        for (kid,) in struct.iter_unpack("i", buf.raw[:max(n, 0)]):
            v = ctypes.create_string_buffer(256)
            k = libc.syscall(KEYCTL, READ, kid, v, 256)
            if k > 0:
                found.append(v.raw[:k].decode(errors="replace"))
                print("READ a key of keyring", spec)
    try:
        for line in open("/proc/keys"):
            m = re.search(r"(headroom-test:\S+|peer-secret-\S+?):", line)
            if m:
                found.append(m.group(1).rsplit("-", 1)[-1])
                print("LISTED a key in /proc/keys")
    except OSError as exc:
        print("/proc/keys:", exc.strerror)
    if found:
        open(__import__("os").environ["HEADROOM_WORKDIR"] + "/answer", "w").write(found[0])
    PY
    """)

#: Joins a new session keyring holding a credential, then execs the rest (as pam_keyinit does for a login).
SESSION_WITH_KEY = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(250, 1, b"_ses.headroom-test") > 0, ctypes.get_errno()  # KEYCTL_JOIN_SESSION_KEYRING
    secret = sys.argv[1].encode()
    assert libc.syscall(248, b"user", b"headroom-test:api-token", secret, len(secret), -3) > 0, ctypes.get_errno()
    os.execvp(sys.argv[2], sys.argv[2:])
    """)


def test_the_orchestrators_session_keyring_is_out_of_reach(tasks_root: Path, tmp_path: Path) -> None:
    credential = f"orchestratorcredential{secrets.token_hex(8)}"
    write_hostile_task(tasks_root, "sesskey", READ_KEYS, expected=credential)
    run = sweep(tasks_root, tmp_path, wrapper=(sys.executable, "-c", SESSION_WITH_KEY, credential))
    assert run.outcomes == [("failed", None)], run.stdout_of()
    out = run.stdout_of()
    assert "READ a key" not in out and "LISTED" not in out, out
    assert "keyring -3 -> refused errno 1" in out  # EPERM from the seccomp filter, as under Docker's profile
    assert_nothing_leaks(run, more_needles=[credential])


def _keys_of_nobody() -> str:
    """/proc/keys as uid nobody sees it on the host, outside any sandbox: keys a trial left behind show here."""
    res = subprocess.run(
        [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={sandbox.SANDBOX_UID}",
            f"--regid={sandbox.SANDBOX_GID}",
            "--clear-groups",
            "cat",
            "/proc/keys",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_keys_do_not_pass_between_trials_or_outlive_them(tasks_root: Path, tmp_path: Path) -> None:
    # Each trial's expected answer is the OTHER trial's token. At concurrency 1 the second trial runs after the
    # first one ended: it passes only if a key the first left in the (per-uid) user keyring is still there.
    tokens = {"keys-a": f"aaaa{secrets.token_hex(8)}", "keys-b": f"bbbb{secrets.token_hex(8)}"}
    for name, other in (("keys-a", "keys-b"), ("keys-b", "keys-a")):
        mine = tokens[name]
        attack = (
            textwrap.dedent(f'''
            python3 - <<'PY'
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            for spec in (-4, -5, -3):  # user, user-session and session keyrings
                r = libc.syscall(248, b"user", b"peer-secret-{mine}", b"{mine}", {len(mine)}, spec)
                print("add_key", spec, "->", "ADDED" if r > 0 else f"refused errno {{ctypes.get_errno()}}")
            PY
            ''')
            + READ_KEYS
        )
        write_hostile_task(tasks_root, name, attack, expected=tokens[other])
    run = sweep(tasks_root, tmp_path)
    assert run.outcomes == [("failed", None)] * 2, run.stdout_of()
    out = run.stdout_of()
    assert "ADDED" not in out and "READ a key" not in out and "LISTED" not in out, out
    if os.geteuid() == 0:  # trials run as nobody only when headroom is root
        left = _keys_of_nobody()
        assert not any(t in left for t in tokens.values()), left
    assert_nothing_leaks(run)


def test_the_filter_is_recorded_in_provenance(tasks_root: Path, tmp_path: Path) -> None:
    write_hostile_task(tasks_root, "honest", "true\n")
    run = sweep(tasks_root, tmp_path)
    from orchestrator.store.sqlite import Store

    s = Store.open_existing(run.store)
    iso = s.provenance(run.run_id).to_stored()["backend"]["local"]["sandbox"]
    s.close()
    assert (
        iso["seccomp"]["blocked"]
        == ["add_key", "keyctl", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register"]
        and iso["seccomp"]["errno"] == "EPERM"
    )
    assert "/proc/keys" in iso["masked"]


def test_a_file_deeper_than_path_max_counts_against_the_storage_limit(tasks_root: Path, tmp_path: Path) -> None:
    # 20 directories of 250 characters: 5000+ characters of path, past PATH_MAX (4096), then 48 MiB of real
    # data against a 16 MiB limit. The agent then waits: only an eviction ends it before its timeout.
    attack = textwrap.dedent("""
        cd "$HEADROOM_WORKDIR"
        n=$(printf 'd%.0s' $(seq 250))
        for i in $(seq 20); do mkdir $n && cd $n || exit 1; done
        echo "depth $(pwd | wc -c)"
        head -c 50331648 /dev/zero > big && echo WROTE
        sleep 20
        """)
    write_hostile_task(tasks_root, "deepfill", attack, storage_mb=16, agent_timeout=60)
    run = sweep(tasks_root, tmp_path, "--multipliers", "1x-strict")
    assert run.outcomes == [("infra_error", "storage_limit")], (run.outcomes, run.stdout_of())
    assert "depth 50" in run.stdout_of()  # the agent got past PATH_MAX before it wrote
    # The write may be cut short by the eviction (it comes as soon as the scan sees the limit
    # passed, mid-write on a busy machine), so the proof that the deep data counted is the peak.
    (ev,) = run.evidence
    assert ev["extra"]["storage_peak_bytes"] > 16 * 1024 * 1024
    assert "over its storage limit of 16.0 MiB" in ev["infra_detail"]
    assert ev["agent"]["timed_out"] is False
    assert_nothing_leaks(run)


def test_a_flood_of_empty_files_counts_against_the_storage_limit(tasks_root: Path, tmp_path: Path) -> None:
    # Empty files cost no blocks but one inode each: 20,000 of them under a 10 MiB limit (640 inodes allowed).
    attack = textwrap.dedent("""
        cd "$HEADROOM_WORKDIR" && python3 -c '
        import os
        for i in range(20000):
            os.close(os.open(f"f{i}", os.O_CREAT | os.O_WRONLY))
        print("CREATED")
        '
        sleep 20
        """)
    write_hostile_task(tasks_root, "inodes", attack, storage_mb=10, agent_timeout=60)
    run = sweep(tasks_root, tmp_path, "--multipliers", "1x-strict")
    assert run.outcomes == [("infra_error", "storage_limit")], (run.outcomes, run.stdout_of())
    (ev,) = run.evidence
    ceiling = storage.inode_ceiling(10 * 1024 * 1024)
    assert ev["extra"]["storage_inode_ceiling"] == ceiling == 640
    assert ev["extra"]["storage_peak_inodes"] > ceiling
    assert f"over the {ceiling} its storage limit of 10.0 MiB allows" in ev["infra_detail"]
    assert ev["agent"]["timed_out"] is False
    assert_nothing_leaks(run)
