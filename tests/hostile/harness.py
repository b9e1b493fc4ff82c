"""Run hostile agents through the real CLI and check that nothing they did reached a result.

A hostile task's verifier passes only if ``$HEADROOM_WORKDIR/answer`` holds a
token kept in ``tests/expected.txt``, which an agent must never see. So an agent
that passes has cheated: read the tests, rewritten them, planted something for
the verifier, forged the reward, or reached another trial. Every attack ships as
``environment/attack.sh`` in its task and runs as ``--agent-command``.

After each run:

* no process the attack started is alive (found by a marker in its command line
  or by the task id in its environment), zombies aside;
* the canaries (a host variable never given to the agent, and a short secret
  handed over with ``--agent-env``) appear nowhere: not in the store file and its
  WAL (raw bytes), not in the CLI's output, not in any report format.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from orchestrator.agentio.redact import transformed
from orchestrator.artifacts import reader
from orchestrator.errors import SandboxUnavailable
from orchestrator.isolation import sandbox
from orchestrator.report import document, render, terminal
from orchestrator.store.sqlite import Store
from tests.evidence_check import assert_fits_schema

try:
    sandbox.probe()
    SANDBOX = True
except SandboxUnavailable:
    SANDBOX = False
#: The corpus attacks for real: without the sandbox it would damage this checkout (e.g. shadow python3 in .venv).
requires_sandbox = pytest.mark.skipif(not SANDBOX, reason="bubblewrap sandbox unavailable (scripts/install-sandbox.sh)")

CHECK = textwrap.dedent("""\
    import os
    expected = open(os.path.join(os.environ["HEADROOM_TASK_DIR"], "tests", "expected.txt")).read().strip()
    try:
        got = open(os.path.join(os.environ["HEADROOM_WORKDIR"], "answer")).read().strip()
    except OSError:
        got = ""
    open(os.path.join(os.environ["HEADROOM_LOGS_DIR"], "reward.txt"), "w").write("1" if got == expected else "0")
    """)
TEST_SH = 'python3 "$HEADROOM_TASK_DIR/tests/check.py"\n'


def new_marker() -> str:
    """A `sleep` argument no other process on this machine uses: how survivors are found."""
    return f"{900000 + secrets.randbelow(99999)}.{secrets.randbelow(10**6)}"


def write_hostile_task(
    root: Path,
    name: str,
    attack: str,
    *,
    expected: str | None = None,
    memory_mb: int = 128,
    agent_timeout: float = 30,
    extra_toml: str = "",
    storage_mb: int | None = None,
    cpus: float = 1,
) -> tuple[Path, str]:
    """A task whose agent is ``attack``; returns (task dir, the expected answer). ``cpus``: its request (a
    2-CPU test node fits one 1-CPU trial pod at a time, so the Pod tests ask for less where CPU is not the point)."""
    expected = expected or secrets.token_hex(12)
    # storage_mb: Harbor's default (10 GiB) unless a test sets it; only limited configurations enforce it.
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "environment").mkdir()
    (d / "task.toml").write_text(
        textwrap.dedent(f"""\
        version = "1.0"
        [environment]
        cpus = {cpus:g}
        memory_mb = {memory_mb}
        storage_mb = {storage_mb or 10240}
        [agent]
        timeout_sec = {agent_timeout}
        [verifier]
        timeout_sec = 30
        [provenance]
        source = "headroom hostile corpus"
        """)
        + extra_toml
    )
    (d / "instruction.md").write_text("Write the expected token to $HEADROOM_WORKDIR/answer.\n")
    (d / "tests" / "test.sh").write_text(TEST_SH)
    (d / "tests" / "check.py").write_text(CHECK)
    (d / "tests" / "expected.txt").write_text(expected + "\n")
    (d / "environment" / "attack.sh").write_text(attack)
    return d, expected


@dataclass
class HostileRun:
    proc: subprocess.CompletedProcess[str]
    store: Path
    run_id: str
    canaries: list[str]
    outcomes: list[tuple[str, str | None]] = field(default_factory=list)
    evidence: list[dict] = field(default_factory=list)

    def stdout_of(self, step: str = "agent") -> str:
        return "\n".join((e.get(step) or {}).get("stdout_tail", "") for e in self.evidence)


def canary_env() -> tuple[dict[str, str], list[str]]:
    """A host variable the agent never gets, and a short named secret it does get (shorter than 8 chars)."""
    host = f"hostcanary{secrets.token_hex(10)}"
    short = "q@~w!" + secrets.choice("ABCDEFGH")  # 6 chars, none of them base64 or hex: no chance match
    return {"HOST_CANARY": host, "SHORTPW": short}, [host, short]


def sweep(
    tasks_root: Path,
    tmp_path: Path,
    *args: str,
    concurrency: int = 1,
    timeout: float = 300,
    wrapper: tuple[str, ...] = (),
    agent_command: str = 'bash "$HEADROOM_TASK_DIR/environment/attack.sh"',
    env: dict[str, str] | None = None,
) -> HostileRun:
    """Run the CLI on ``tasks_root``; ``wrapper`` is a command prefix that execs it (e.g. to set up its keyring);
    ``env``: more host variables (a gateway's upstream key)."""
    canary, canaries = canary_env()
    env = {**canary, **(env or {})}
    store = tmp_path / "h.db"
    cmd = [
        *wrapper,
        sys.executable,
        "-m",
        "orchestrator",
        "sweep",
        str(tasks_root),
        "--multipliers",
        "unbounded",
        "--attempts",
        "1",
        "--concurrency",
        str(concurrency),
        "--agent-command",
        agent_command,
        "--agent-env",
        "SHORTPW",
        "--store",
        str(store),
        "--format",
        "none",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr
    s = Store.open_existing(store)
    try:
        run_id = s.run().run_id
        rows = s.db.execute(
            "SELECT trial_id, outcome, reason FROM executions WHERE run_id=? AND final=1 ORDER BY trial_id", (run_id,)
        ).fetchall()
        outcomes = [(r["outcome"], r["reason"]) for r in rows]
        assert len(outcomes) == len(s.planned(run_id)), "every trial has exactly one final result"
        evidence = [e for r in rows for e in s.evidence(run_id, r["trial_id"])]
        for row in evidence:
            assert_fits_schema(row)  # whatever the agent did, its try's evidence fits the one schema
    finally:
        s.close()
    return HostileRun(proc, store, run_id, canaries, outcomes, evidence)


def reports(store: Path, run_id: str) -> dict[str, str]:
    """Every report format, rendered as the CLI renders them."""
    s = Store.open_existing(store)
    try:
        doc = document.build(s, run_id)
        buf = io.StringIO()
        terminal.print_report(doc, Console(file=buf, width=200, color_system=None))
        out = {"table": buf.getvalue()}
        for fmt in ("json", "markdown", "html"):
            out[fmt] = render.render_text(doc, fmt)
        json.loads(out["json"])
        return out
    finally:
        s.close()


def stored_bytes(store: Path) -> dict[str, bytes]:
    """Every byte a run stored: the store's files as they are on disk (.db, -wal, -shm), and each artifact
    decompressed (a compressed artifact hides its text from a search of the file)."""
    blobs = {p.name: p.read_bytes() for p in store.parent.glob(store.name + "*")}
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        if reader.has_artifacts(db):
            for (sha,) in db.execute("SELECT DISTINCT sha256 FROM artifacts WHERE sha256 IS NOT NULL"):
                blobs[f"artifact {sha[:12]}"] = reader.read(db, sha)
    finally:
        db.close()
    return blobs


def assert_nothing_leaks(
    run: HostileRun,
    *,
    more_needles: list[str] = (),  # type: ignore[assignment]
    isolation: str | None = "namespaces",
) -> None:
    """No canary, and no secret of ``more_needles`` in any form an agent could have put it in (reversed, upper
    case, hex, base64: :func:`transformed`), is in a stored byte, the CLI's output or a report."""
    needles = [form for n in [*run.canaries, *more_needles] for form in transformed(n)]
    blobs = stored_bytes(run.store)
    assert run.store.name in blobs
    texts = {"cli stdout": run.proc.stdout, "cli stderr": run.proc.stderr, **reports(run.store, run.run_id)}
    for needle in needles:
        for name, blob in blobs.items():
            assert needle.encode() not in blob, f"{needle!r} found in {name}"
        for name, text in texts.items():
            assert needle not in text, f"{needle!r} found in the {name}"
    if isolation is not None:
        assert f"**{isolation}**" in texts["markdown"]  # the report says what isolation was in force


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def survivors(marker: str | None = None, task_ids: list[str] = ()) -> list[psutil.Process]:  # type: ignore[assignment]
    """Live processes carrying ``marker`` in their command line or one of ``task_ids`` in their environment."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            hit = marker is not None and marker in cmd
            if not hit and task_ids:
                env = p.environ()
                hit = env.get("HEADROOM_TASK_ID") in task_ids
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if hit and p.pid != os.getpid() and _alive(p):
            found.append(p)
    return found


def assert_no_survivors(marker: str | None, task_ids: list[str], grace_s: float = 2.0) -> None:
    deadline = time.monotonic() + grace_s
    while (left := survivors(marker, task_ids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, [(p.pid, p.info.get("cmdline")) for p in left]
