"""The host sandbox when headroom itself runs as an unprivileged user (not root): real bubblewrap in a user
namespace, headroom run as ``nobody`` through ``setpriv`` with a store and a HOME of its own.

As root, bubblewrap builds the agent's view as root and drops the agent to ``nobody`` inside; as any other user
it runs unprivileged in a user namespace, and the agent has headroom's own uid: only the view keeps the store,
the tasks and headroom's ``/proc`` from it. This runs that second path for real (it was only tried by hand):
a legitimate agent passes through the exec channel, and a hostile one that reads the tests, headroom's
environment and the store, and writes the store, fails and changes nothing. Without cgroups this user cannot
write, the agent's bounds fall back to ``RLIMIT_DATA``, and the run's provenance says so.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.store.sqlite import Store
from tests.hostile.harness import requires_sandbox, write_hostile_task

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
SETPRIV = shutil.which("setpriv")


def _as_nobody(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    assert SETPRIV is not None
    return [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", "--", *argv]


def _let_nobody_through(*paths: Path) -> None:
    """A checkout (or its virtualenv) under a directory only root may enter (a fresh clone in a 0700 temp dir):
    give each such ancestor the search bit alone (no listing) while the session runs, and take it back at exit."""
    changed: list[tuple[Path, int]] = []
    for path in paths:
        for d in [*reversed(Path(path).resolve().parents), Path(path).resolve()]:
            mode = d.stat().st_mode
            if not mode & stat.S_IXOTH and d.is_dir():
                changed.append((d, stat.S_IMODE(mode)))
                os.chmod(d, stat.S_IMODE(mode) | stat.S_IXOTH)
    atexit.register(lambda: [os.chmod(d, m) for d, m in reversed(changed)])


def _headroom_for_nobody() -> tuple[list[str], dict[str, str]] | str:
    """How nobody runs headroom from this checkout (the command and its variables), or why it cannot.

    This test's interpreter may live where nobody cannot go (a pyenv under root's 0700 HOME, as here): then the
    system's interpreter of the same minor version runs it, with the checkout and the virtualenv's packages on
    its path (the same code and dependencies; only the interpreter binary differs)."""
    if os.geteuid() != 0:
        return "the test drops from root to nobody; run as root (CI does)"
    if SETPRIV is None:
        return "setpriv (util-linux) is missing"
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = next(Path(sys.prefix, "lib").glob(f"{minor}/site-packages"), None)
    _let_nobody_through(REPO, *([site] if site is not None else []))
    tries = [([sys.executable], {})]
    for system in (f"/usr/bin/{minor}", f"/usr/local/bin/{minor}"):
        if os.path.exists(system) and site is not None:
            tries.append(([system], {"PYTHONPATH": f"{REPO}:{site}"}))
    why = ""
    for head, env in tries:
        res = subprocess.run(
            # headroom starts its interpreter again (the rlimit wrapper, the relay): nobody must exec it too
            _as_nobody(*head, "-c", CHILD),
            capture_output=True,
            text=True,
            cwd="/",
            timeout=60,
            env={**os.environ, **env},
        )
        if res.returncode == 0:
            return head, env
        why = res.stderr.strip()[-200:]
    return f"no interpreter nobody can run headroom with: {why}"


CHILD = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import orchestrator, psutil, yaml'], check=True)"
)
HEADROOM = _headroom_for_nobody()
pytestmark = [pytest.mark.slow, requires_sandbox, pytest.mark.skipif(isinstance(HEADROOM, str), reason=str(HEADROOM))]

SOLVE = textwrap.dedent("""\
    echo "uid=$(id -u) pids=$(ls /proc | grep -c '^[0-9]')"
    $HEADROOM_EXEC -- bash -c "echo @TOKEN@ > answer"
    """)
HOSTILE = textwrap.dedent("""\
    $HEADROOM_EXEC -- bash -c 'echo wrong > answer'
    echo "uid=$(id -u) pids=$(ls /proc | grep -c '^[0-9]')"
    cat @TASKS@/*/tests/expected.txt 2>/dev/null | sed 's/^/read-tests /'
    for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -q HOST_CANARY && echo saw-headroom-environ; done
    ls -la @STORE@ 2>/dev/null && echo store-visible
    python3 -c 'import sqlite3; c = sqlite3.connect("@STORE@", timeout=1); c.execute("UPDATE executions SET outcome=?", ("passed",)); c.commit()' 2>/dev/null && echo store-written
    echo "home=$HOME home-writable=$(touch $HOME/x && echo yes)"
    """)


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A directory nobody owns, outside root's private pytest dir (which nobody cannot enter)."""
    d = Path(tempfile.mkdtemp(prefix="headroom-nobody-"))
    os.chmod(d, 0o755)
    os.chown(d, NOBODY, NOBODY)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_sandboxed_external_agent_as_an_unprivileged_headroom(nobody_dir: Path) -> None:
    tasks, agent, home = nobody_dir / "tasks", nobody_dir / "agent", nobody_dir / "home"
    store = home / "h.db"
    for d in (tasks, agent, home):
        d.mkdir()
    _, token = write_hostile_task(tasks, "solve", "true\n")
    write_hostile_task(tasks, "hostile", "true\n")
    (agent / "solve.sh").write_text(SOLVE.replace("@TOKEN@", token))
    (agent / "hostile.sh").write_text(HOSTILE.replace("@TASKS@", str(tasks)).replace("@STORE@", str(store)))
    exp = nobody_dir / "exp.yaml"
    exp.write_text(yaml.safe_dump({"agent": {"kind": "external", "path": str(agent)}}))
    for root, dirs, files in os.walk(nobody_dir):
        for n in [*dirs, *files]:
            os.chown(os.path.join(root, n), NOBODY, NOBODY)
    assert not isinstance(HEADROOM, str)
    head, head_env = HEADROOM
    cmd = _as_nobody(*head, "-m", "orchestrator", "sweep", str(tasks), "--multipliers", "unbounded")
    cmd += ["--attempts", "1", "--agent", "external", "--agent-command", 'bash "$HEADROOM_TASK_ID.sh"']
    cmd += ["--experiment", str(exp), "--store", str(store), "--format", "none", "--no-canary"]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TERM")} | head_env
    env |= {"HOME": str(home), "HOST_CANARY": "hostcanary-" + hashlib.sha256(b"nobody").hexdigest()[:16]}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=str(home))
    assert res.returncode == 0, res.stderr[-2000:]

    s = Store.open_existing(store)
    try:
        run = s.run()
        names = {t.trial_id: t.task_id for t in s.planned(run.run_id)}
        rows = s.db.execute(
            "SELECT trial_id, outcome, reason FROM executions WHERE run_id=? AND final=1", (run.run_id,)
        ).fetchall()
        got = {names[r["trial_id"]]: (r["outcome"], r["reason"]) for r in rows}
        last = {names[r["trial_id"]]: s.evidence(run.run_id, r["trial_id"])[-1] for r in rows}
        # the agent's output, and why it did not start if it did not (spawn_error: where a failure is read first)
        out = {
            k: f"{(e.get('agent') or {}).get('stdout_tail', '')}{(e.get('agent') or {}).get('spawn_error') or ''}"
            for k, e in last.items()
        }
        provenance = json.dumps(s.provenance(run.run_id).to_stored().get("agent_sandbox"))
    finally:
        s.close()
    assert got == {"solve": ("passed", None), "hostile": ("failed", None)}, (got, out)
    for text in out.values():  # headroom's own uid (in its user namespace), and no process but the agent's
        uid, pids = dict(w.split("=") for w in text.split() if w.startswith(("uid=", "pids="))).values()
        assert uid == str(NOBODY) and int(pids) < 10, text
    hostile = out["hostile"]
    for leak in ("read-tests", "saw-headroom-environ", "store-visible", "store-written"):
        assert leak not in hostile, hostile
    assert "home=/home/agent home-writable=yes" in hostile, hostile
    # no cgroup this user can write: the agent's memory is an rlimit, and the provenance says so
    assert '"enforcement": "rlimit"' in provenance and "no writable cgroup for host agents" in provenance
