"""The trial's environment as one long-lived sandbox, for an external agent's exec channel.

One bubblewrap sandbox (the agent step's view: the task without its tests, ``/app``,
the logs dir, a fresh HOME and /tmp, the environment's network) runs a small process
server (:data:`SERVER`, the system's ``python3 -S -I``), started inside the trial's
cgroup. Each exec is a child of that server: the same namespaces (a process started in
the background by one exec is there for the next), the same cgroup (memory, CPU,
pids), nothing of the host. The server talks to headroom over its stdin and stdout
only, one JSON line per request and per reply, so nothing in the sandbox can reach
the channel except through headroom. Its own memory (a Python interpreter without
site, about 8 MiB) is counted against the trial, as a container's keep-alive is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

from orchestrator.agents.exec import wire
from orchestrator.agents.exec.target import MAX_OUTPUT, ExecResult
from orchestrator.errors import EnvironmentGone
from orchestrator.isolation import hostenv
from orchestrator.isolation.cgroups import TrialCgroup
from orchestrator.isolation.process import kill_tree

#: After a command's main process exits, how long its output may keep flowing (a background child holding it).
DRAIN_S = 2.0
#: The process server; it runs inside the sandbox, so it imports nothing of headroom.
SERVER = r"""
import base64, json, os, signal, subprocess, sys, threading, time
CAP, DRAIN = int(sys.argv[1]), float(sys.argv[2])
out_lock = threading.Lock()
def reply(msg):
    line = json.dumps(msg) + "\n"
    with out_lock:
        sys.stdout.write(line); sys.stdout.flush()
def pump(stream, keep, count):
    while True:
        b = stream.read(65536)
        if not b:
            return
        count[0] += len(b)
        if sum(map(len, keep)) < CAP:
            keep.append(b)
def one(req):
    rid = req.get("id")
    t0 = time.monotonic()
    try:
        data = base64.b64decode(req["stdin"]) if req.get("stdin") else None
        env = dict(os.environ); env.update(req.get("env") or {})
        p = subprocess.Popen(req["argv"], cwd=req.get("cwd") or None, env=env,
                             stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except Exception as e:
        n = type(e).__name__
        code = 127 if n in ("FileNotFoundError", "NotADirectoryError") else 126
        msg = f"{req['argv'][0]}: {e}\n".encode()
        reply({"id": rid, "exit_code": code, "stderr": base64.b64encode(msg).decode(), "stderr_bytes": len(msg),
               "duration_s": time.monotonic() - t0}); return
    outs, errs, on, en = [], [], [0], [0]
    ts = [threading.Thread(target=pump, args=(p.stdout, outs, on), daemon=True),
          threading.Thread(target=pump, args=(p.stderr, errs, en), daemon=True)]
    for t in ts: t.start()
    if data is not None:
        def feed():
            try:
                p.stdin.write(data); p.stdin.close()
            except OSError:
                pass
        threading.Thread(target=feed, daemon=True).start()
    timed_out = False
    try:
        p.wait(timeout=req.get("timeout_s"))
    except subprocess.TimeoutExpired:
        timed_out = True
        try: os.killpg(p.pid, signal.SIGKILL)
        except OSError: pass
        p.wait()
    for t in ts: t.join(DRAIN)
    rc = p.returncode
    reply({"id": rid, "exit_code": None if (rc < 0 or timed_out) else rc, "signal": -rc if rc < 0 and not timed_out else None,
           "timed_out": timed_out, "duration_s": time.monotonic() - t0,
           "stdout": base64.b64encode(b"".join(outs)[:CAP]).decode(), "stderr": base64.b64encode(b"".join(errs)[:CAP]).decode(),
           "stdout_bytes": on[0], "stderr_bytes": en[0]})
reply({"ready": True})
for line in sys.stdin:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    threading.Thread(target=one, args=(req,), daemon=True).start()
"""


#: Joins the trial's cgroup(s), then execs the server: not one instruction of it runs outside the limits.
JOIN_CGROUP = (
    'for f in $HEADROOM_CG_PROCS; do echo $$ > "$f" || { echo "headroom: cannot join cgroup $f" >&2; exit 111; }; done; '
    'unset HEADROOM_CG_PROCS; exec "$@"'
)


def python() -> str:
    """The system's interpreter: the sandbox sees only the host's system dirs, never a venv."""
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(cand, os.X_OK):
            return cand
    found = shutil.which("python3")
    if found is None:
        raise EnvironmentGone("no python3 in the system directories: the local exec channel needs one")
    return found


class SandboxEnvironment:
    """An :class:`~orchestrator.agents.exec.target.ExecTarget` on the local backend."""

    def __init__(
        self,
        argv_for: Callable[[list[str], Mapping[str, str]], list[str]],
        *,
        env: Mapping[str, str],
        cwd: Path,
        cgroup: TrialCgroup | None,
        stderr_path: Path,
        on_spawn: Callable[[int], None] | None = None,
    ) -> None:
        # The task's env tables are in ``env``: what would make a host-side process (the cgroup wrapper, setpriv,
        # bwrap) run the task's code goes to the server only, inside its sandbox (hostenv), and from it to each exec.
        env, inside = hostenv.split(env)
        command = argv_for([python(), "-S", "-I", "-c", SERVER, str(MAX_OUTPUT), str(DRAIN_S)], inside)
        if cgroup is not None:
            env["HEADROOM_CG_PROCS"] = " ".join(str(p) for p in cgroup.procs_files())
            command = ["/bin/sh", "-c", JOIN_CGROUP, "headroom-join", *command]
        self.cgroup = cgroup
        self._err = stderr_path.open("wb")
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            start_new_session=True,
        )
        if on_spawn:
            on_spawn(self.proc.pid)
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, tuple[threading.Event, list[dict]]] = {}
        self._ready = threading.Event()
        self._gone: str | None = None
        self._reader = threading.Thread(target=self._read, name="sandbox-exec-reader", daemon=True)
        self._reader.start()

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        if not self._ready.wait(timeout_s) or self._gone:
            raise EnvironmentGone(self._gone or f"the environment did not start within {timeout_s:.0f} s")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("ready"):
                self._ready.set()
                continue
            with self._lock:
                slot = self._waiting.pop(msg.get("id"), None)
            if slot is not None:
                slot[1].append(msg)
                slot[0].set()
        rc = self.proc.wait()
        tail = ""
        try:
            tail = Path(self._err.name).read_bytes()[-500:].decode("utf-8", "replace").strip().splitlines()[-1:][0]
        except (OSError, IndexError):
            pass
        with self._lock:
            self._gone = f"the trial's environment ended (exit {rc}){': ' + tail if tail else ''}"
            waiting, self._waiting = self._waiting, {}
        self._ready.set()
        for event, _ in waiting.values():
            event.set()

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float | None = None,
        user: str | None = None,
    ) -> ExecResult:
        event, box = threading.Event(), cast("list[dict]", [])
        started = time.monotonic()
        with self._lock:
            if self._gone:
                return ExecResult(exit_code=None, error=self._gone)
            self._next += 1
            rid = self._next
            self._waiting[rid] = (event, box)
            req = {
                "id": rid,
                "argv": list(argv),
                "cwd": cwd,
                "env": dict(env or {}),
                "timeout_s": timeout_s,
                "stdin": wire.b64(stdin) if stdin is not None else None,
            }
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps(req).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError as exc:
                self._waiting.pop(rid, None)
                return ExecResult(exit_code=None, error=f"the trial's environment is gone: {exc}")
        # The server enforces the timeout; this bound only covers a server that stopped answering.
        event.wait(None if timeout_s is None else timeout_s + 30)
        if not box:
            with self._lock:
                self._waiting.pop(rid, None)
                gone = self._gone
            if gone:
                return ExecResult(exit_code=None, error=gone, duration_s=time.monotonic() - started)
            return ExecResult(exit_code=None, timed_out=True, duration_s=time.monotonic() - started)
        msg = box[0]
        return ExecResult(
            exit_code=msg.get("exit_code"),
            signal=msg.get("signal"),
            timed_out=bool(msg.get("timed_out")),
            duration_s=float(msg.get("duration_s") or 0.0),
            stdout=wire.unb64(msg.get("stdout")),
            stderr=wire.unb64(msg.get("stderr")),
            stdout_bytes=int(msg.get("stdout_bytes") or 0),
            stderr_bytes=int(msg.get("stderr_bytes") or 0),
        )

    def stop(self) -> None:
        """Everything in the environment ends: the server, every process it started (the cgroup's, or the session's)."""
        kill_tree(self.proc.pid, self.cgroup)
        kill_tree(self.proc.pid, None)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._reader.join(5)
        for f in (self.proc.stdin, self._err):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
