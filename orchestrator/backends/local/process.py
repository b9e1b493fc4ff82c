"""Run one step as a process tree, inside a cgroup or under rlimits, with a hard timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from orchestrator import redact
from orchestrator.backends.local.cgroups import TrialCgroup
from orchestrator.spec.facts import StepFacts

# The end of a step's output, with slack: settle() redacts it whole, then cuts it to
# redact.TAIL_BYTES, so a secret printed across the cut never leaves a piece behind.
TAIL_BYTES = redact.TAIL_BYTES + redact.TAIL_SLACK

# The child joins the trial's cgroup(s) before exec'ing the real command, so not one
# instruction of the workload runs outside its limits. A shell does this instead of
# preexec_fn, which is unsafe in a threaded parent.
_JOIN = (
    'for f in $HEADROOM_CG_PROCS; do echo $$ > "$f" || { echo "headroom: cannot join cgroup $f" >&2; exit 111; }; done; '
    'unset HEADROOM_CG_PROCS; exec "$@"'
)
_RLIMIT = (
    "import os, resource, sys\n"
    "n = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_DATA, (n, n))\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


@dataclass
class Limits:
    """What to enforce on a step when there is no cgroup."""

    memory_bytes: int | None


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def kill_tree(pid: int, cgroup: TrialCgroup | None) -> None:
    """Kill everything the step started: the cgroup when there is one, else the session."""
    if cgroup is not None:
        cgroup.kill_all()
        return
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        children = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for c in children:
        try:
            c.kill()
        except psutil.Error:
            pass


def run_step(
    name: str,
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    logs_dir: Path,
    timeout_s: float,
    cgroup: TrialCgroup | None,
    limits: Limits,
    on_spawn: Callable[[int], None] | None = None,
) -> tuple[StepFacts, dict[str, float | int | None]]:
    """Run ``argv`` to completion or timeout; return its facts and resource usage."""
    out_path, err_path = logs_dir / f"{name}.stdout", logs_dir / f"{name}.stderr"
    env = dict(env)
    if cgroup is not None:
        files = [str(p) for p in cgroup.procs_files()]
        if any(" " in f for f in files):
            raise RuntimeError(f"cgroup path with a space: {files}")
        env["HEADROOM_CG_PROCS"] = " ".join(files)
        wrapped = ["/bin/sh", "-c", _JOIN, "headroom-join", *argv]
        oom_before = cgroup.oom_kills()
    else:
        wrapped = list(argv)
        if limits.memory_bytes is not None:
            wrapped = [sys.executable, "-S", "-c", _RLIMIT, str(limits.memory_bytes), *argv]
        oom_before = 0
    facts = StepFacts(name=name)
    started = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        try:
            proc = subprocess.Popen(
                wrapped, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
            )
        except OSError as exc:
            facts.spawn_error = f"{type(exc).__name__}: {exc}"
            return facts, {}
        if on_spawn:
            on_spawn(proc.pid)
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            kill_tree(proc.pid, cgroup)

        timer = threading.Timer(timeout_s, on_timeout)
        timer.daemon = True
        timer.start()
        try:
            _, status, rusage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        # The main process is gone; like a container, the step ends for everything it started.
        kill_tree(proc.pid, cgroup)
    facts.duration_s = time.monotonic() - started
    facts.timed_out = timed_out.is_set()
    rc = proc.returncode
    if rc < 0:
        facts.signal = -rc
    else:
        facts.exit_code = rc
    facts.stdout_tail = _tail(out_path)
    facts.stderr_tail = _tail(err_path)
    if cgroup is not None:
        if rc == 111 and "headroom: cannot join cgroup" in facts.stderr_tail:
            facts.spawn_error = facts.stderr_tail.strip().splitlines()[-1]
        facts.oom_kills = cgroup.oom_kills() - oom_before
        if facts.oom_kills:
            facts.oom_evidence = f"{cgroup.version} oom_kill counter"
        usage: dict[str, float | int | None] = {}
    else:
        # Without a cgroup there is no kernel OOM verdict to read: an exhausted RLIMIT_DATA makes
        # allocations fail inside the workload, and what the workload prints about it is its own
        # text, which an agent controls. So no OOM is ever claimed here.
        usage = {
            "peak_memory_bytes": rusage.ru_maxrss * 1024,
            "cpu_time_s": rusage.ru_utime + rusage.ru_stime,
        }
    return facts, usage
