"""Run one step as a process tree, inside a cgroup or under rlimits, with a hard timeout."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from orchestrator.agentio import redact
from orchestrator.isolation import hostenv
from orchestrator.isolation.cgroups import TrialCgroup
from orchestrator.spec.facts import StepFacts

# The end of a step's output, with slack: settle() redacts it whole, then cuts it to
# redact.TAIL_BYTES, so a secret printed across the cut never leaves a piece behind.
TAIL_BYTES = redact.TAIL_BYTES + redact.TAIL_SLACK

# The child joins the trial's cgroup(s) before exec'ing the real command, so not one
# instruction of the workload runs outside its limits. A shell does this instead of
# preexec_fn, which is unsafe in a threaded parent. Its verdict travels on a pipe only it holds,
# never in the step's exit code or output, which the workload writes too: an agent exiting 111
# with the wrapper's message on stderr once got infra_error(spawn_failed), a retried verdict,
# i.e. a re-roll. That pipe's write end is the wrapper's fd 0: it writes "joined" there, then
# replaces its fd 0 with the step's input (opened by path, $1) before exec, so the workload never
# holds the pipe. With fd 0 (not a number past 9) the wrapper can be dash, which starts faster
# than bash and, unlike bash, runs nothing its environment names (BASH_ENV, exported functions).
# $2, when set, is a file the step gets open on fd 3 (a sandboxed step's seccomp program: one
# open file per step, so concurrent steps never share a read offset), saving the process that
# opened it before. The cgroup files are iterated in a function with a local variable, so an
# exported variable of the step's own (``f``, say) reaches the workload unchanged. dash passes on
# only variables whose names are shell names: the others (``a-b``, ``x.y``, which Docker and
# Kubernetes pass) are given to the workload by ``env`` after the wrapper (:func:`hostenv.split`, which also
# keeps a shell's start-up variables and the loader's from every host-side helper), and the wrapper checks
# the real program ($3) either way.
_JOIN = (
    '_hr_join() { local f; for f in $HEADROOM_CG_PROCS; do { echo $$ > "$f"; } 2>/dev/null '
    '|| { echo "cannot join cgroup $f" >&0; exit 111; }; done; }; _hr_join; unset -f _hr_join; '
    "unset HEADROOM_CG_PROCS; "
    '[ -r "$1" ] || { echo "cannot open the step\'s input" >&0; exit 127; }; '
    '[ -z "$2" ] || [ -r "$2" ] || { echo "cannot open $2 for fd 3" >&0; exit 127; }; '
    'command -v "$3" >/dev/null 2>&1 || { echo "cannot run $3: not found" >&0; exit 127; }; '
    'echo joined >&0; if [ -n "$2" ]; then exec 3<"$2"; fi; exec 0<"$1"; shift 3; exec "$@"'
)
JOINED = "joined"
#: The wrapper's shell: dash where there is one (see _JOIN), else the system's sh.
_SH = shutil.which("dash") or "/bin/sh"
#: The fd on which ``run_step(fd3=...)`` opens a file for the step.
FD3 = 3
#: Opens a file on FD3, then execs the rest: ``fd3`` for a step without a cgroup wrapper, and the sandboxes'
#: seccomp program where no wrapper opened it (:mod:`.sandbox`, :mod:`orchestrator.agents.host_sandbox`).
OPEN_FD3 = f'exec {FD3}<"$1" || exit 127; shift; exec "$@"'
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


def _wait(
    proc: subprocess.Popen[bytes], timeout_s: float, cgroup: TrialCgroup | None, on_spawn: Callable[[int], None] | None
) -> tuple[bool, Any]:
    """Wait for the step's main process (killing the tree at the timeout), then end what it left.

    Returns (timed out, the main process's rusage)."""
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
    return timed_out.is_set(), rusage


def _read_verdict(fd: int) -> str:
    """What the wrapper wrote on its pipe (its write end is closed by now: it exec'd or exited)."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
            if sum(map(len, chunks)) > 4096:
                break
    except BlockingIOError:
        pass
    return b"".join(chunks).decode("utf-8", "replace")


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
    stdin: bytes | None = None,
    pass_fds: tuple[int, ...] = (),
    fd3: str | None = None,
) -> tuple[StepFacts, dict[str, float | int | None]]:
    """Run ``argv`` to completion or timeout; return its facts and resource usage. ``pass_fds``: descriptors the
    step inherits at their numbers (the host agent's hand-over socket). ``fd3``: a file the step is started with
    open for reading on fd 3 (:data:`FD3`), a fresh open file of its own. ``env``'s workload-only variables
    (:func:`hostenv.split`) reach ``argv`` through ``env`` in front of it, never a helper of ours: a caller whose
    ``argv`` is a sandbox's takes them out first and has the sandbox set them (``Sandbox.argv(setenv=...)``)."""
    if fd3 is not None and FD3 in pass_fds:
        raise ValueError(f"fd {FD3} is both passed and opened for the step")
    out_path, err_path = logs_dir / f"{name}.stdout", logs_dir / f"{name}.stderr"
    in_path = logs_dir / f"{name}.stdin"
    if stdin is not None:
        in_path.write_bytes(stdin)  # a file, not a pipe: a step that never reads it cannot block us
    step_in = str(in_path) if stdin is not None else os.devnull
    # what only the workload may see goes around every helper in front of it (hostenv): by ``env`` right before
    # ``argv``, so a caller whose ``argv`` starts with a sandbox's host-side tools gives those to the sandbox itself
    env, workload_only = hostenv.split(env)
    deferred = hostenv.env_argv(workload_only)
    if cgroup is not None:
        files = [str(p) for p in cgroup.procs_files()]
        if any(" " in f for f in files):
            raise RuntimeError(f"cgroup path with a space: {files}")
        env["HEADROOM_CG_PROCS"] = " ".join(files)
        verdict_r, verdict_w = os.pipe()
        wrapped = [_SH, "-c", _JOIN, "headroom-join", step_in, fd3 or "", argv[0], *deferred, *argv]
        oom_before = cgroup.oom_kills()
    else:
        verdict_r = verdict_w = -1
        wrapped = [*deferred, *argv]
        if limits.memory_bytes is not None:
            wrapped = [sys.executable, "-S", "-c", _RLIMIT, str(limits.memory_bytes), *wrapped]
        if fd3 is not None:
            wrapped = [_SH, "-c", OPEN_FD3, "headroom-fd3", fd3, *wrapped]
        oom_before = 0
    facts = StepFacts(name=name)
    started = time.monotonic()
    try:
        with (
            out_path.open("wb") as out,
            err_path.open("wb") as err,
            open(step_in, "rb") if verdict_w < 0 else contextlib.nullcontext(verdict_w) as inp,
        ):
            try:
                proc = subprocess.Popen(
                    wrapped,
                    cwd=cwd,
                    env=env,
                    # the cgroup wrapper's fd 0 is its verdict pipe; it opens the step's input itself
                    stdin=inp,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    pass_fds=pass_fds,
                )
            except OSError as exc:
                facts.spawn_error = f"{type(exc).__name__}: {exc}"
                return facts, {}
            finally:
                if verdict_w >= 0:
                    os.close(verdict_w)  # the wrapper holds the only write end now
            timed_out, rusage = _wait(proc, timeout_s, cgroup, on_spawn)
        wrapper_said = _read_verdict(verdict_r) if verdict_r >= 0 else ""
    finally:
        if verdict_r >= 0:
            os.close(verdict_r)
    facts.duration_s = time.monotonic() - started
    facts.timed_out = timed_out
    rc = proc.returncode
    if rc < 0:
        facts.signal = -rc
    else:
        facts.exit_code = rc
    facts.stdout_tail = _tail(out_path)
    facts.stderr_tail = _tail(err_path)
    if cgroup is not None:
        # Only the wrapper's pipe says whether the step started; the exit code and stderr are the workload's.
        if wrapper_said.splitlines()[:1] != [JOINED] and not facts.timed_out:
            facts.spawn_error = (wrapper_said.strip() or f"the step's wrapper ended before starting it (exit {rc})")[
                :500
            ]
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
