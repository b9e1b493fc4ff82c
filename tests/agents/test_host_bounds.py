"""The bounds of a host-side (external) agent's process tree (orchestrator/agents/host_bounds.py), with real cgroups
and real bubblewrap: a fork bomb, a memory hog and a disk filler each end their own try as the agent's failure
(never an infra error a score leaves out), the host keeps its pids, memory and disk, and a process the agent
leaves is in the agent's own cgroup while the step runs and gone after it.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

from orchestrator.agents import host_bounds
from orchestrator.artifacts import names
from orchestrator.spec.resources import MIB
from orchestrator.store.sqlite import Store
from tests.agents.test_external_agent import artifacts
from tests.hostile.harness import (
    assert_no_survivors,
    new_marker,
    reports,
    requires_sandbox,
    sweep,
    write_hostile_task,
)
from tests.hostile.test_external_agents import (
    DISK_FILLER,
    FORK_BOMB,
    HOST_LIMITS,
    MEMORY_HOG,
    WRONG,
    assert_bounds_held,
    by_task,
)
from tests.taskfactory import requires_cgroups

pytestmark = [pytest.mark.slow, requires_sandbox, requires_cgroups]

SURVIVOR = WRONG + "(setsid nohup sleep @MARKER@ >/dev/null 2>&1 &) &\nsleep 4\n"


def _cgroup_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return ""


def test_a_host_agents_fork_bomb_memory_hog_and_disk_filler_end_its_own_try(tmp_path: Path) -> None:
    marker = new_marker()
    tasks_root, agent = tmp_path / "tasks", tmp_path / "agent"
    agent.mkdir()
    attacks = {
        "ext-fork-bomb": FORK_BOMB,
        "ext-memory-hog": MEMORY_HOG,
        "ext-disk-filler": DISK_FILLER,
        "ext-survivor": SURVIVOR,
    }
    for name, attack in attacks.items():
        write_hostile_task(tasks_root, name, WRONG, agent_timeout=90)
        (agent / f"{name}.sh").write_text(attack.replace("@MARKER@", marker))
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"agent": {"kind": "external", "path": str(agent), "host_limits": HOST_LIMITS}}))
    before = {p.pid for p in psutil.process_iter()}
    seen: dict[int, str] = {}
    done = threading.Event()

    def watch() -> None:  # the survivor, from the host: which cgroup holds it while the step runs
        while not done.is_set():
            for p in psutil.process_iter(["cmdline"]):
                if marker in " ".join(p.info["cmdline"] or []) and p.pid not in seen:
                    seen[p.pid] = _cgroup_of(p.pid)
            time.sleep(0.2)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        run = sweep(
            tasks_root,
            tmp_path,
            "--agent",
            "external",
            "--experiment",
            str(exp),
            concurrency=2,
            timeout=600,
            agent_command='bash "$HEADROOM_TASK_ID.sh"',
        )
    finally:
        done.set()
        t.join()
    assert_no_survivors(marker, list(attacks))
    got = by_task(run)
    # the agent's failure, graded: never infra_error(oom_killed) nor a storage eviction, never a pass
    assert {k: g["verdict"] for k, g in got.items()} == {k: ("failed", None) for k in attacks}, got
    assert_bounds_held(got)
    assert not (got["ext-survivor"]["evidence"].get("agent") or {}).get("termination_reason")
    # what the filler wrote to its logs dir is kept (copied out of its tmpfs), and no more than the bound
    db = sqlite3.connect(run.store)
    try:
        trial = next(t for t, task in _tasks(db).items() if task == "ext-disk-filler")
        kept = artifacts(db, trial)
    finally:
        db.close()
    line = reports(run.store, run.run_id)["markdown"]
    assert re.search(r"memory 192 MiB by cgroup v\d, 64 processes by cgroup v\d, HOME, /tmp, /dev/shm and logs", line)
    fill = kept.get(f"{names.LOGS_PREFIX}/fill", b"")
    assert 0 < len(fill) <= HOST_LIMITS["disk_mb"] * MIB, sorted(kept)

    # the survivor ran in the agent's own cgroup (the try's, under this sweep's headroom-agents-PID parent) ...
    assert seen, "the survivor was never seen running"
    assert all(re.search(r"pids:/.*headroom-agents-\d+/", cg) for cg in seen.values()), seen
    sweep_pid = {int(m) for cg in seen.values() for m in re.findall(r"headroom-agents-(\d+)/", cg)}
    # ... and is gone with it: no process of the sweep is left, nor any cgroup of its agents
    assert not [p for p in psutil.process_iter() if p.pid not in before and p.pid in seen]
    for mount in ("pids", "memory"):
        for pid in sweep_pid:
            assert not (Path("/sys/fs/cgroup") / mount / f"headroom-agents-{pid}").exists() or not [
                d for d in (Path("/sys/fs/cgroup") / mount / f"headroom-agents-{pid}").iterdir() if d.is_dir()
            ]


def _tasks(db: sqlite3.Connection) -> dict[str, str]:
    return {r[0]: r[1] for r in db.execute("SELECT trial_id, task_id FROM trials")}


#: The CLI with the host agents' cgroup driver standing in for a host that cannot delegate cgroups (this machine
#: can): everything else is real, the local backend's own cgroups included.
NO_AGENT_CGROUP = (
    "import sys; from orchestrator.agents import host_bounds\n"
    "host_bounds._driver.append('no writable cgroup for host agents: (the test stands in for such a host)')\n"
    "sys.argv = ['headroom', *sys.argv[sys.argv.index('orchestrator') + 1:]]\n"
    "from orchestrator.cli import main; main()"
)
#: A fork bomb of bounded size (4 children a level, 4 levels: 340 processes at most, were the ceiling gone), so a
#: broken ceiling fails this test without taking the shared machine: every refused fork is noted in /tmp.
BOUNDED_BOMB = WRONG + textwrap.dedent("""\
    python3 - <<'PY'
    import os, time
    depth = 0
    while depth < 4:
        child = False
        for _ in range(4):
            try:
                if os.fork() == 0:
                    child = True
                    break
            except OSError:
                open("/tmp/refused", "a").write("x")
                break
        if not child:  # a parent stops after its four, or at its first refused fork
            break
        depth += 1
    time.sleep(2)
    PY
    sleep 3
    echo "bomb-ended refused=$(wc -c < /tmp/refused 2>/dev/null || echo 0)"
    """)


def test_without_a_cgroup_a_host_agents_fork_bomb_meets_rlimit_nproc(tmp_path: Path) -> None:
    tasks_root, agent = tmp_path / "tasks", tmp_path / "agent"
    agent.mkdir()
    write_hostile_task(tasks_root, "ext-fork-bomb", WRONG, agent_timeout=90)
    (agent / "ext-fork-bomb.sh").write_text(BOUNDED_BOMB)
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"agent": {"kind": "external", "path": str(agent), "host_limits": HOST_LIMITS}}))
    run = sweep(
        tasks_root,
        tmp_path,
        "--agent",
        "external",
        "--experiment",
        str(exp),
        timeout=600,
        wrapper=(sys.executable, "-c", NO_AGENT_CGROUP),
        agent_command='bash "$HEADROOM_TASK_ID.sh"',
    )
    got = by_task(run)["ext-fork-bomb"]
    # the agent's own failure (a wrong answer), never an infra error
    assert got["verdict"] == ("failed", None), got
    out = (got["evidence"].get("agent") or {}).get("stdout_tail", "")
    m = re.search(r"bomb-ended refused=(\d+)", out)
    assert m and int(m.group(1)) > 0, out  # forks were refused well before the bomb's own 340
    bounds = Store.open_existing(run.store).provenance(run.run_id).to_stored()["agent_sandbox"]["bounds"]
    assert bounds["enforcement"] == "rlimit" and bounds["pids"] == HOST_LIMITS["pids"], bounds
    assert bounds["applied"]["pids"].startswith("RLIMIT_NPROC"), bounds
    line = reports(run.store, run.run_id)["markdown"]  # the report says what applied, from the provenance
    assert "memory 192 MiB by RLIMIT_DATA, 64 processes by RLIMIT_NPROC (per uid)" in line, line


def test_the_agents_cgroups_of_a_dead_headroom_are_reaped(tmp_path: Path) -> None:
    """A headroom killed with -9 leaves its agents' cgroup parent; the next one's driver kills and removes it."""
    code = textwrap.dedent("""\
        import os, subprocess, sys
        from pathlib import Path
        from orchestrator.agents import host_bounds
        from orchestrator.spec.launch import HostLimits
        b = host_bounds.open_bounds("t", HostLimits(), Path(sys.argv[1]), None)
        p = subprocess.Popen(["bash", "-c", 'for f in $CG; do echo $$ > $f; done; exec sleep 600'],
                             env={**os.environ, "CG": " ".join(map(str, b.cgroup.procs_files()))},
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import time
        procs = [Path(f) for f in b.cgroup.procs_files()]
        while not all(str(p.pid) in f.read_text().split() for f in procs):  # joined every hierarchy
            time.sleep(0.01)
        print(p.pid, os.getpid(), flush=True)
        os.kill(os.getpid(), 9)
        """)
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    left_pid, dead = map(int, res.stdout.split())
    assert psutil.pid_exists(left_pid)
    driver = host_bounds.driver()
    assert not isinstance(driver, str), driver
    reaped = [*driver.reaped, *driver.reap_stale()]  # at its start, if it started only now, else now
    assert any(f"headroom-agents-{dead}/" in r for r in reaped), reaped
    deadline = time.monotonic() + 5
    while psutil.pid_exists(left_pid) and psutil.Process(left_pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the leftover process survived its cgroup's reaping"
        time.sleep(0.05)
