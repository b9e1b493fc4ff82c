"""The hostile harness, external-agent variant: a host-side agent attacks from its own sandbox on the host.

Each class is what a hostile submitter's host-side agent tried on main (issue 29): read the task's tests
through their host path, read headroom's ``/proc/PID/environ`` and command line (the gateway's upstream
key, the experiment file, a host variable never handed over), leave a process that rewrites the store
after the sweep, steal a concurrent try's gateway key from its ``/proc/PID/environ``, and outlive its
step. Every case must end ``failed``, on the local backend and on Docker (the agent runs on the host
whatever the backend), with nothing secret in any stored byte, in any form (:func:`transformed`).

The agent is one command for every task (``bash "$HEADROOM_TASK_ID.sh"`` in its own directory,
``agent.path``); the attacks are given the host paths they aim at (``@TASKS@``, ``@STORE@``): the submitter
is assumed to know them. The model provider is a scripted fake on loopback (it cannot run here).
"""

from __future__ import annotations

import hashlib
import re
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from orchestrator.store.sqlite import Store
from tests.agents.fake_model import FakeModel, Reply
from tests.hostile.harness import (
    HostileRun,
    assert_no_survivors,
    assert_nothing_leaks,
    new_marker,
    requires_sandbox,
    sweep,
    write_hostile_task,
)

pytestmark = [pytest.mark.slow, requires_sandbox]

UPSTREAM_KEY = "sk-hostile-upstream-" + hashlib.sha256(b"issue 29").hexdigest()[:24]
WRONG = "$HEADROOM_EXEC -- bash -c 'echo wrong > answer'\n"

READ_TESTS = WRONG + textwrap.dedent("""\
    for f in @TASKS@/$HEADROOM_TASK_ID/tests/expected.txt /proc/1/root@TASKS@/$HEADROOM_TASK_ID/tests/expected.txt \\
             $(find / -name expected.txt -not -path '/proc/*' 2>/dev/null | head -50); do
      tok=$(cat "$f" 2>/dev/null) && [ -n "$tok" ] && echo "read $f" && $HEADROOM_EXEC -- bash -c "echo $tok > answer"
    done
    echo "tasks-visible=$(ls @TASKS@ 2>/dev/null | wc -l)"
    """)
PROC_ENVIRON = WRONG + textwrap.dedent("""\
    loot="$HEADROOM_LOGS_DIR/loot.txt"
    seen=0
    for p in /proc/[0-9]*; do
      tr '\\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q -e 'orchestrator sweep' -e 'headroom sweep' && seen=$((seen+1))
      env=$(tr '\\0' '\\n' < "$p/environ" 2>/dev/null)
      printf '%s\\n' "$env" | rev >> "$loot"
      printf '%s\\n' "$env" | base64 -w0 >> "$loot"
      printf '%s\\n' "$env" | grep -e UP_HOSTILE -e HOST_CANARY | rev
      for a in $(tr '\\0' ' ' < "$p/cmdline" 2>/dev/null); do [ -f "$a" ] && cat "$a" >> "$loot"; done
    done
    echo "headroom-processes=$seen"
    cat ~/.kube/config /root/.kube/config /var/run/docker.sock /etc/kubernetes/admin.conf >> "$loot" 2>&1
    echo "own-environ-has-upstream=$(env | grep -c UP_HOSTILE)"
    """)
REWRITE_STORE = WRONG + textwrap.dedent("""\
    write='import sqlite3; c = sqlite3.connect("@STORE@", timeout=1); c.execute("UPDATE executions SET outcome=?", ("passed",)); c.commit()'
    python3 -c "$write" 2>&1 | tail -1 | sed 's/^/now: /'
    setsid nohup bash -c "while :; do python3 -c '$write' 2>/dev/null; sleep 0.2; done; : @MARKER@" >/dev/null 2>&1 &
    (nohup bash -c "trap '' TERM HUP; while :; do python3 -c '$write' 2>/dev/null; sleep 0.2; done; : @MARKER@" >/dev/null 2>&1 &) &
    """)
SURVIVE = WRONG + textwrap.dedent("""\
    (setsid nohup sleep @MARKER@ >/dev/null 2>&1 &) &
    nohup bash -c "trap '' TERM HUP INT; sleep @MARKER@" >/dev/null 2>&1 & disown
    bash -c '( ( sleep @MARKER@ ) & ) &'
    setsid bash -c 'sleep 3; $HEADROOM_EXEC -- bash -c "echo late > answer"; sleep @MARKER@' >/dev/null 2>&1 < /dev/null &
    """)
STEAL_KEY = WRONG + textwrap.dedent("""\
    mine="$HEADROOM_MODEL_API_KEY"; stolen=""
    for i in $(seq 60); do
      for p in /proc/[0-9]*; do
        k=$(tr '\\0' '\\n' < "$p/environ" 2>/dev/null | sed -n 's/^HEADROOM_MODEL_API_KEY=//p')
        [ -n "$k" ] && [ "$k" != "$mine" ] && stolen="$k"
      done
      [ -n "$stolen" ] && break
      sleep 0.25
    done
    echo "stolen=${#stolen}"
    if [ -n "$stolen" ]; then
      for i in 1 2 3 4 5; do
        python3 - "$stolen" <<'PY'
    import json, os, sys, urllib.request
    req = urllib.request.Request(os.environ["HEADROOM_MODEL_BASE_URL"] + "/v1/chat/completions",
        data=json.dumps({"model": "fake-model-1", "messages": [{"role": "user", "content": "x" * 4000}]}).encode(),
        headers={"Authorization": "Bearer " + sys.argv[1], "Content-Type": "application/json"})
    print(urllib.request.urlopen(req, timeout=10).status)
    PY
      done
    fi
    """)
VICTIM = WRONG + "sleep 15\n"
WRONG = "$HEADROOM_EXEC -- bash -c 'echo wrong > answer'\n"
#: The agent's own bounds (agent.host_limits, orchestrator/agents/host_bounds.py), small so the classes below meet them.
HOST_LIMITS = {"memory_mb": 192, "pids": 64, "disk_mb": 16}
FORK_BOMB = WRONG + textwrap.dedent("""\
    python3 - <<'PY'
    import os, time
    kids = 0
    while True:  # every child forks on too: the tree grows until the kernel refuses
        try:
            if os.fork() == 0:
                kids = 0
                continue
            kids += 1
        except OSError:
            break
    time.sleep(1)
    PY
    echo "bomb-ended"
    """)
MEMORY_HOG = WRONG + textwrap.dedent("""\
    python3 -c 'b = bytearray(1 << 30); print("allocated", len(b))'
    echo "hog-ended rc=$?"
    """)
DISK_FILLER = WRONG + textwrap.dedent("""\
    for d in "$HOME" /tmp /dev/shm "$HEADROOM_LOGS_DIR"; do
      dd if=/dev/zero of="$d/fill" bs=1M count=64 2>&1 | grep -o 'No space left on device' | head -1 | sed "s|^|$d: |"
      [ "$d" = "$HEADROOM_LOGS_DIR" ] || rm -f "$d/fill"
    done
    dd if=/dev/zero of="$HEADROOM_LOGS_DIR/more" bs=1M count=1 2>&1 | grep -o 'No space left on device' | head -1
    echo "filler-ended"
    """)


#: The external-agent corpus: every backend runs each class (check_classes: local and Docker here, Pods in
#: tests/cluster/test_realnode_external_agent.py), and each must end ``failed``. Add a class here to add it everywhere.
CLASSES = {
    "ext-read-tests": READ_TESTS,
    "ext-proc-environ": PROC_ENVIRON,
    "ext-rewrite-store": REWRITE_STORE,
    "ext-survive-step": SURVIVE,
    "ext-fork-bomb": FORK_BOMB,
    "ext-memory-hog": MEMORY_HOG,
    "ext-disk-filler": DISK_FILLER,
}


def assert_bounds_held(got: dict[str, dict]) -> None:
    """The bound classes met the agent's own bounds, each named in its step's termination reason (as evidence:
    the verdict stays the agent's failure)."""
    agent = {k: g["evidence"].get("agent") or {} for k, g in got.items()}
    why = {k: a.get("termination_reason") or "" for k, a in agent.items()}
    out = {k: a.get("stdout_tail", "") for k, a in agent.items()}
    limits = HOST_LIMITS
    assert re.search(
        rf"\d+ forks refused at the host agent's ceiling of {limits['pids']} processes", why["ext-fork-bomb"]
    )
    assert "bomb-ended" in out["ext-fork-bomb"], out["ext-fork-bomb"]
    assert f"OOM-killed at the host agent's memory limit of {limits['memory_mb']} MiB" in why["ext-memory-hog"], why
    assert "allocated" not in out["ext-memory-hog"] and "hog-ended rc=137" in out["ext-memory-hog"]
    # every private dir and the logs dir is full at its size, in the kernel (ENOSPC at once, not after a poll):
    # the host's disk is not touched, and the agent went on to its end, a wrong answer
    for d in ("/home/agent", "/tmp", "/dev/shm", "/logs/agent"):
        assert f"{d}: No space left on device" in out["ext-disk-filler"], out["ext-disk-filler"]
    assert "No space left on device\nfiller-ended" in out["ext-disk-filler"], out["ext-disk-filler"]
    assert (
        f"its logs dir filled the host agent's bound of {limits['disk_mb']:.1f} MiB (a tmpfs: writes past it failed "
        "with ENOSPC)" in why["ext-disk-filler"]
    ), why
    assert agent["ext-disk-filler"].get("exit_code") == 0 and not agent["ext-disk-filler"].get("signal")


def write_agent(tmp_path: Path, tasks_root: Path, attacks: dict[str, str], marker: str, cpus: float = 1) -> Path:
    """The tasks (each asking for ``cpus``), and the agent's own directory with one attack per task."""
    agent = tmp_path / "agent"
    agent.mkdir()
    for name, attack in attacks.items():
        write_hostile_task(tasks_root, name, WRONG, agent_timeout=60, cpus=cpus)
        text = attack.replace("@TASKS@", str(tasks_root)).replace("@STORE@", str(tmp_path / "h.db"))
        (agent / f"{name}.sh").write_text(text.replace("@MARKER@", marker))
    return agent


def external_sweep(
    tmp_path: Path,
    tasks_root: Path,
    attacks: dict[str, str],
    *args: str,
    fake: FakeModel,
    marker: str,
    extra: dict | None = None,
    cpus: float = 1,
) -> HostileRun:
    agent = write_agent(tmp_path, tasks_root, attacks, marker, cpus)
    exp = tmp_path / "exp.yaml"
    spec = {
        "agent": {"kind": "external", "path": str(agent), "host_limits": HOST_LIMITS},
        "gateway": {
            "openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP_HOSTILE"},
            "prices": {"fake-model-1": {"input": 3.0, "output": 15.0}},
        },
    }
    exp.write_text(yaml.safe_dump({**spec, **(extra or {})}))
    return sweep(
        tasks_root,
        tmp_path,
        "--agent",
        "external",
        "--experiment",
        str(exp),
        *args,
        concurrency=len(attacks),
        timeout=600,
        agent_command='bash "$HEADROOM_TASK_ID.sh"',
        env={"UP_HOSTILE": UPSTREAM_KEY},
    )


def by_task(run: HostileRun) -> dict[str, dict]:
    s = Store.open_existing(run.store)
    try:
        tasks = {t.trial_id: t.task_id for t in s.planned(run.run_id)}
        rows = s.db.execute(
            "SELECT trial_id, outcome, reason FROM executions WHERE run_id=? AND final=1", (run.run_id,)
        ).fetchall()
        out = {}
        for r in rows:
            ev = s.evidence(run.run_id, r["trial_id"])[-1]
            out[tasks[r["trial_id"]]] = {"verdict": (r["outcome"], r["reason"]), "evidence": ev}
        return out
    finally:
        s.close()


def digest(store: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(store.parent.glob(store.name + "*"))}


def check_classes(
    tmp_path: Path, tasks_root: Path, *args: str, isolation: str, extra: dict | None = None, cpus: float = 1
) -> None:
    marker = new_marker()
    attacks = CLASSES
    with FakeModel([Reply("nothing to say")], openai_key=UPSTREAM_KEY) as fake:
        run = external_sweep(tmp_path, tasks_root, attacks, *args, fake=fake, marker=marker, extra=extra, cpus=cpus)
    assert_no_survivors(marker, list(attacks))
    after = digest(run.store)
    got = by_task(run)
    # Every class ends the agent's own failure: a wrong answer, or (seen once on Docker under CI's load, with the
    # bound classes' fork bomb and memory hog in the same sweep) a state the harness could not judge. Both are
    # `failed`; neither is infra, harness or a pass.
    verdicts = {t: g["verdict"] for t, g in got.items()}
    assert set(verdicts) == set(attacks), got
    assert all(v[0] == "failed" and v[1] in (None, "unjudged_state") for v in verdicts.values()), got
    out = {t: (g["evidence"].get("agent") or {}).get("stdout_tail", "") for t, g in got.items()}
    assert "tasks-visible=0" in out["ext-read-tests"] and "read " not in out["ext-read-tests"]
    assert "headroom-processes=0" in out["ext-proc-environ"], out["ext-proc-environ"]
    assert "own-environ-has-upstream=0" in out["ext-proc-environ"]
    assert "now: " in out["ext-rewrite-store"]  # its write failed at once (and its survivors' later: below)
    assert_bounds_held(got)
    assert_nothing_leaks(run, more_needles=[UPSTREAM_KEY], isolation=isolation)
    assert "host agent in its own sandbox" in run.proc.stdout + "".join(_markdown(run))
    time.sleep(3)  # what a survivor would do after the sweep, had it survived: nothing changed the store
    assert digest(run.store) == after


def _markdown(run: HostileRun) -> list[str]:
    from tests.hostile.harness import reports

    return [reports(run.store, run.run_id)["markdown"]]


def check_key_theft(tmp_path: Path, tasks_root: Path, *args: str, extra: dict | None = None, cpus: float = 1) -> None:
    attacks = {"ext-steal-key": STEAL_KEY, "ext-victim": VICTIM}
    with FakeModel([Reply("billed")], openai_key=UPSTREAM_KEY) as fake:
        run = external_sweep(
            tmp_path, tasks_root, attacks, *args, fake=fake, marker=new_marker(), extra=extra, cpus=cpus
        )
        assert fake.seen == []  # no call reached the provider, on anyone's key
    got = by_task(run)
    assert {t: g["verdict"] for t, g in got.items()} == {t: ("failed", None) for t in attacks}
    thief = (got["ext-steal-key"]["evidence"].get("agent") or {}).get("stdout_tail", "")
    assert "stolen=0" in thief, thief
    for t in attacks:
        usage = got[t]["evidence"]["model_usage"]
        assert usage["calls"] == 0 and usage["tokens_in"] == 0, (t, usage)
    assert_nothing_leaks(run, more_needles=[UPSTREAM_KEY], isolation=None)


def test_host_agent_attacks_fail_on_the_local_backend(tmp_path: Path, tasks_root: Path) -> None:
    check_classes(tmp_path, tasks_root, isolation="namespaces")


def test_a_host_agent_cannot_steal_a_concurrent_trys_key_on_the_local_backend(tmp_path: Path, tasks_root: Path) -> None:
    check_key_theft(tmp_path, tasks_root)


@pytest.mark.docker
def test_host_agent_attacks_fail_on_the_docker_backend(docker_env, docker_host: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.hostile.test_backends_agree import corpus_image

    image = {"image": corpus_image(docker_env)}
    for name, check in (("classes", check_classes), ("theft", check_key_theft)):
        d = tmp_path / name
        (d / "tasks").mkdir(parents=True)
        if check is check_classes:
            check_classes(d, d / "tasks", "--backend", "docker", isolation="container", extra=image)
        else:
            check_key_theft(d, d / "tasks", "--backend", "docker", extra=image)
