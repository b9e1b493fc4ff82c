"""One hostile agent per attack class of issue 7. Each must end failed (or infra_error where the
environment stopped it), leave no process behind, and leak nothing into the store or the reports."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine.sweep import prepare, run, start
from orchestrator.spec.experiment import Experiment
from orchestrator.store.sqlite import Store
from tests.hostile.harness import (
    HostileRun,
    assert_no_survivors,
    assert_nothing_leaks,
    new_marker,
    reports,
    requires_sandbox,
    sweep,
    write_hostile_task,
)
from tests.taskfactory import requires_cgroups

pytestmark = [pytest.mark.slow, requires_sandbox]


def _failed(run: HostileRun) -> None:
    assert run.outcomes == [("failed", None)] * len(run.outcomes), (run.outcomes, run.stdout_of())


def test_control_an_honest_agent_passes(tasks_root: Path, tmp_path: Path) -> None:
    # Without this, "failed" below could mean a broken checker rather than a foiled attack.
    _, expected = write_hostile_task(tasks_root, "honest", "")
    (tasks_root / "honest" / "environment" / "attack.sh").write_text(f'echo {expected} > "$HEADROOM_WORKDIR/answer"\n')
    run = sweep(tasks_root, tmp_path)
    assert run.outcomes == [("passed", None)]
    assert_nothing_leaks(run)


def test_rewriting_or_reading_the_tests(tasks_root: Path, tmp_path: Path) -> None:
    host = tasks_root / "rewrite"
    attack = f"""
for d in "$HEADROOM_TASK_DIR/tests" "{host}/tests" /task/tests; do
  cat "$d/expected.txt" > "$HEADROOM_WORKDIR/answer" 2>/dev/null && echo "read $d"
  printf 'open(__import__("os").environ["HEADROOM_LOGS_DIR"] + "/reward.txt", "w").write("1")\\n' > "$d/check.py" 2>/dev/null \\
    && echo "rewrote $d"
  rm "$d/expected.txt" 2>/dev/null && echo "removed $d"
done
ls -la "$HEADROOM_TASK_DIR"
touch "$HEADROOM_TASK_DIR/planted" 2>/dev/null && echo "wrote into the task"
true
"""
    write_hostile_task(tasks_root, "rewrite", attack)
    before = {p: p.read_bytes() for p in (host / "tests").iterdir()}
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    out = run.stdout_of()
    assert "read " not in out and "rewrote" not in out and "removed" not in out and "wrote into" not in out, out
    assert "tests" not in out.split("ls -la")[-1].split()  # the agent's view of the task has no tests/
    assert {p: p.read_bytes() for p in (host / "tests").iterdir()} == before
    assert_nothing_leaks(run)


def test_planting_for_the_verifier_in_home_tmp_and_shared_places(tasks_root: Path, tmp_path: Path) -> None:
    attack = r"""
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
plant() {
  mkdir -p "$1/.local/lib/python$py/site-packages" 2>/dev/null || return 0
  printf '%s\n' 'import os' 'd = os.environ.get("HEADROOM_LOGS_DIR")' \
    'd and open(d + "/reward.txt", "w").write("1")' 'd and os._exit(0)' \
    > "$1/.local/lib/python$py/site-packages/usercustomize.py" 2>/dev/null && echo "planted usercustomize in $1"
  cp "$1/.local/lib/python$py/site-packages/usercustomize.py" "$1/sitecustomize.py" 2>/dev/null
  printf 'echo 1 > "$HEADROOM_LOGS_DIR/reward.txt"; exit 0\n' > "$1/.bashrc" 2>/dev/null
  cp "$1/.bashrc" "$1/.profile" 2>/dev/null
}
# Never /root, /home or PATH directories: if the sandbox ever broke, this test must not poison the machine it runs on.
for h in "$HOME" "$TMPDIR" /tmp /var/tmp /dev/shm /run "$HEADROOM_WORKDIR/.." "$HEADROOM_LOGS_DIR/.." /logs; do plant "$h"; done
echo "agent HOME=$HOME TMPDIR=$TMPDIR"
true
"""
    write_hostile_task(tasks_root, "plant", attack)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert_nothing_leaks(run)


def test_finding_and_rewriting_the_store_through_proc(tasks_root: Path, tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    task = f"store-{new_marker().replace('.', '-')}"
    attack = f"""
for f in /proc/[0-9]*/fd/* /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/exe; do
  t=$(readlink "$f" 2>/dev/null); case "$t" in *.db|*.db-wal) echo "saw $f -> $t";; esac
done
cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo
python3 - <<'PY'
import glob, os, sqlite3
found = [os.path.join(r, f) for top in ("/app", "/tmp", "/home", "/logs", "/task", "/var", "/run", "/opt", "/etc")
         for r, _, fs in os.walk(top) for f in fs if f.endswith(".db")]
for cand in ["{store}", *glob.glob("/proc/*/root{store}"), *glob.glob("/proc/*/fd/*"), *found]:
    try:
        db = sqlite3.connect("file:" + cand + "?mode=rw", uri=True, timeout=1)
        # Only this test's own store, even if a broken sandbox let the search reach every store on the machine.
        if not db.execute("SELECT 1 FROM tasks WHERE task_id = '{task}'").fetchone():
            continue
        db.execute("UPDATE executions SET outcome='passed', reward=1")
        db.execute("UPDATE runs SET name='pwned'")
        db.commit()
        print("REWROTE", cand)
    except Exception as exc:
        pass
PY
true
"""
    write_hostile_task(tasks_root, task, attack)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert "REWROTE" not in run.stdout_of() and "saw " not in run.stdout_of()
    s = Store.open_existing(store)
    assert s.run().name != "pwned"
    s.close()
    assert_nothing_leaks(run)


def test_reading_the_hosts_environment_through_proc(tasks_root: Path, tmp_path: Path) -> None:
    attack = r"""
for f in /proc/[0-9]*/environ /proc/self/environ /proc/1/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done
env
grep -rs HOST_CANARY /proc/*/environ /proc/*/task/*/environ
cat /proc/1/cmdline /proc/*/cmdline 2>/dev/null | tr '\0' ' '
echo "secret was $SHORTPW"; echo "$SHORTPW" >&2
"""
    write_hostile_task(tasks_root, "env", attack)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert "HOST_CANARY" not in run.stdout_of()
    assert "secret was [REDACTED]" in run.stdout_of()  # the agent had the secret; the store never got it
    assert_nothing_leaks(run)


@requires_cgroups
def test_escaping_the_trial_cgroup(tasks_root: Path, tmp_path: Path) -> None:
    marker = new_marker()
    attack = f"""
for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/*/tasks /sys/fs/cgroup/*/*/cgroup.procs; do
  echo $$ > "$f" 2>/dev/null && echo "ESCAPED via $f"
done
mkdir /sys/fs/cgroup/memory/escape /sys/fs/cgroup/escape 2>/dev/null && echo "ESCAPED by mkdir"
mount -t cgroup2 none /mnt 2>/dev/null && echo "ESCAPED by mount"
cat /proc/self/cgroup
setsid sleep {marker} &
true
"""
    d, _ = write_hostile_task(tasks_root, "cgroup", attack)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert "ESCAPED" not in run.stdout_of()
    assert_no_survivors(marker, ["cgroup"])
    assert_nothing_leaks(run)


def test_reading_a_concurrent_trials_work_dir(tasks_root: Path, tmp_path: Path) -> None:
    # Each trial's expected answer is the OTHER trial's secret: a pass means one trial read the other.
    tokens = {"peer-a": "peersecretaaaa1111", "peer-b": "peersecretbbbb2222"}
    for name, other in (("peer-a", "peer-b"), ("peer-b", "peer-a")):
        mine = tokens[name]
        attack = f"""
echo {mine} > "$HEADROOM_WORKDIR/peer-secret-{mine}"
date +%s.%N > "$HEADROOM_WORKDIR/started"
end=$((SECONDS + 4))
while [ $SECONDS -lt $end ]; do
  hit=$(find / -xdev -name 'peer-secret-*' ! -name 'peer-secret-{mine}' 2>/dev/null | head -1)
  [ -z "$hit" ] && hit=$(ls /proc/[0-9]*/root/app/peer-secret-* /proc/[0-9]*/cwd/peer-secret-* /tmp/headroom-*/*/app/peer-secret-* \\
                         ../*/app/peer-secret-* 2>/dev/null | grep -v {mine} | head -1)
  if [ -n "$hit" ]; then cat "$hit" > "$HEADROOM_WORKDIR/answer"; echo "FOUND $hit"; break; fi
  sleep 0.2
done
true
"""
        write_hostile_task(tasks_root, name, attack, expected=tokens[other])
    run = sweep(tasks_root, tmp_path, concurrency=2)
    _failed(run)
    assert "FOUND" not in run.stdout_of()
    s = Store.open_existing(run.store)
    spans = s.db.execute("SELECT started_at, finished_at FROM executions WHERE run_id=?", (run.run_id,)).fetchall()
    s.close()
    assert max(r[0] for r in spans) < min(r[1] for r in spans), "the two trials really ran at the same time"
    assert_nothing_leaks(run)


def test_planting_the_reward(tasks_root: Path, tmp_path: Path) -> None:
    marker = new_marker()
    planted = tmp_path / "host-result.json"
    planted.write_text(json.dumps({"model": "hostfilecanary-0d9f8e7c", "tokens_in": 1}))
    attack = f"""
for d in "$HEADROOM_LOGS_DIR" "$HEADROOM_LOGS_DIR/.." /logs /logs/verifier "$HOME" /tmp "$HEADROOM_WORKDIR" \\
         "$HEADROOM_WORKDIR/.." "$HEADROOM_TASK_DIR"; do
  mkdir -p "$d" 2>/dev/null
  echo 1 > "$d/reward.txt" 2>/dev/null && echo "planted in $d"
  echo '{{"reward": 1}}' > "$d/reward.json" 2>/dev/null
done
# The orchestrator reads the agent's self-report: point it at a host file (it must not follow the link).
ln -sf {planted} "$HEADROOM_LOGS_DIR/result.json"
# A writer that outlives the agent and races the verifier for its logs dir.
( setsid sh -c 'while :; do for d in /logs/verifier /logs "$HEADROOM_WORKDIR"; do echo 1 > $d/reward.txt; done 2>/dev/null; \\
  sleep 0.05; done; sleep {marker}' & )
( setsid sleep {marker} & )
true
"""
    write_hostile_task(tasks_root, "reward", attack)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert run.evidence[0]["agent_result"] == {}
    assert_no_survivors(marker, ["reward"])
    assert_nothing_leaks(run, more_needles=["hostfilecanary-0d9f8e7c"])


def test_setsid_and_double_fork_daemons_die_with_the_trial(tasks_root: Path, tmp_path: Path) -> None:
    marker = new_marker()
    attack = f"""
setsid sleep {marker} &
( sleep {marker} & ) &
nohup sleep {marker} >/dev/null 2>&1 &
sh -c 'sleep {marker} &'
( setsid sh -c '( exec -a headroom-daemon sleep {marker} ) &' & )
python3 -c 'import os, subprocess
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{marker}"])
    os._exit(0)'
disown -a
exit 0
"""
    write_hostile_task(tasks_root, "daemons", attack)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert_no_survivors(marker, ["daemons"])
    assert_nothing_leaks(run)


@requires_cgroups
def test_a_bounded_fork_storm_stops_at_the_trials_process_ceiling(tasks_root: Path, tmp_path: Path) -> None:
    marker = new_marker()
    attack = f"""
python3 - <<'PY'
import os
ok = failed = 0
for _ in range(300):  # bounded: a storm, not a machine-killer, if the ceiling were missing
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        try:
            os.execvp("sleep", ["sleep", "{marker}"])
        finally:
            os._exit(1)
    ok += 1
print("forked", ok, "refused", failed)
PY
true
"""
    write_hostile_task(tasks_root, "storm", attack)
    exp = Experiment(
        tasks_dir=str(tasks_root),
        configurations=["unbounded"],
        attempts=1,
        agent={"command": 'bash "$HEADROOM_TASK_DIR/environment/attack.sh"'},
    )
    store = Store(tmp_path / "h.db")
    backend = LocalBackend(pids_max=64)
    try:
        run_id, tasks = start(exp, prepare(exp), store, backend)
        run(store, run_id, exp, tasks, backend)
    finally:
        backend.close()
    trial_id = store.planned(run_id)[0].trial_id
    (evidence,) = store.evidence(run_id, trial_id)
    outcome = store.db.execute("SELECT outcome FROM executions WHERE run_id=?", (run_id,)).fetchone()[0]
    store.close()
    assert outcome == "failed"
    forked = int(evidence["agent"]["stdout_tail"].split()[1])
    assert forked < 64, evidence["agent"]["stdout_tail"]
    if evidence["extra"].get("pids_events"):  # cgroup v2 and recent v1 count the refusals too
        assert evidence["extra"]["pids_events"]["max"] > 0
    assert_no_survivors(marker, ["storm"])
    assert reports(tmp_path / "h.db", run_id)["markdown"]


@pytest.mark.parametrize("allowed", [False, True])
def test_network_only_when_the_experiment_allows_it(tasks_root: Path, tmp_path: Path, allowed: bool) -> None:
    # A server on the host's loopback: reachable from a step only if it shares the host's network namespace.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    accepted: list[bytes] = []

    def serve() -> None:
        server.settimeout(20)
        try:
            conn, _ = server.accept()
            accepted.append(conn.recv(100))
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    attack = f"""
python3 -c 'import socket; s = socket.create_connection(("127.0.0.1", {port}), timeout=3); s.sendall(b"exfiltrated")' \\
  && echo CONNECTED || echo NO-NETWORK
"""
    write_hostile_task(tasks_root, "net", attack)
    exp = Experiment(
        tasks_dir=str(tasks_root),
        configurations=["unbounded"],
        attempts=1,
        allow_internet=allowed,
        agent={"command": 'bash "$HEADROOM_TASK_DIR/environment/attack.sh"'},
    )
    store = Store(tmp_path / "h.db")
    backend = LocalBackend()
    try:
        run_id, tasks = start(exp, prepare(exp), store, backend)
        run(store, run_id, exp, tasks, backend)
    finally:
        backend.close()
        server.close()
    (evidence,) = store.evidence(run_id, store.planned(run_id)[0].trial_id)
    store.close()
    assert ("CONNECTED" if allowed else "NO-NETWORK") in evidence["agent"]["stdout_tail"]
    assert accepted == ([b"exfiltrated"] if allowed else [])


def test_a_work_dir_nested_deeper_than_python_recurses_is_removed(tasks_root: Path, tmp_path: Path) -> None:
    from orchestrator.backends.local.backend import _stale_workroots

    attack = """
python3 -c '
import os
for _ in range(3000):
    os.mkdir("d"); os.chdir("d")
' 
"""
    write_hostile_task(tasks_root, "deep", attack)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert _stale_workroots() == []  # the CLI removed its work root, the deep tree included
    LocalBackend().close()  # and the next start has nothing to trip on
    assert_nothing_leaks(run)


#: A checker that compares the answer with the value [verifier.env] gives the verifier, as Terminal-Bench 2 tasks do.
ENV_CHECK = (
    "import os\n"
    "got = open(os.path.join(os.environ['HEADROOM_WORKDIR'], 'answer')).read().strip()\n"
    "open(os.path.join(os.environ['HEADROOM_LOGS_DIR'], 'reward.txt'), 'w')"
    ".write('1' if got == os.environ['EXPECTED'] else '0')\n"
)


def test_reading_answer_keys_from_task_toml(tasks_root: Path, tmp_path: Path) -> None:
    """task.toml reaches the agent without [grader], [verifier.env] and [solution] (a probe passed both tasks)."""
    import secrets as _secrets
    import shutil

    steal = """python3 - <<'PY'
import json, os, re
text = open(os.path.join(os.environ["HEADROOM_TASK_DIR"], "task.toml")).read()
found = re.findall(r'(?:exact|EXPECTED) = "([^"]+)"', text)
answer = found[0] if found else ""
open(os.path.join(os.environ["HEADROOM_WORKDIR"], "answer"), "w").write(answer)
json.dump({"answer": answer}, open(os.environ["HEADROOM_AGENT_RESULT"], "w"))
PY
"""
    # a golden task: its grader holds the answer
    golden_answer = _secrets.token_hex(12)
    d, _ = write_hostile_task(tasks_root, "golden", steal, extra_toml=f'[grader]\nexact = "{golden_answer}"\n')
    shutil.rmtree(d / "tests")
    # a Terminal-Bench 2 style task: the expected value reaches its tests through [verifier.env]
    expected = _secrets.token_hex(12)
    d, _ = write_hostile_task(
        tasks_root, "verifier-env", steal, extra_toml=f'[verifier.env]\nEXPECTED = "{expected}"\n'
    )
    (d / "tests" / "check.py").write_text(ENV_CHECK)
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    assert golden_answer not in json.dumps(run.evidence) and expected not in json.dumps(run.evidence)


def test_the_verifier_still_gets_its_environment(tasks_root: Path, tmp_path: Path) -> None:
    """The control for the test above: [verifier.env] reaches the verifier step, so an honest agent passes."""
    import secrets as _secrets

    expected = _secrets.token_hex(12)
    d, _ = write_hostile_task(
        tasks_root,
        "honest-env",
        f'echo {expected} > "$HEADROOM_WORKDIR/answer"\n',
        extra_toml=f'[verifier.env]\nEXPECTED = "{expected}"\n',
    )
    (d / "tests" / "check.py").write_text(ENV_CHECK)
    run = sweep(tasks_root, tmp_path)
    assert run.outcomes == [("passed", None)], run.outcomes


def test_links_the_verifier_would_follow_into_the_tests(tasks_root: Path, tmp_path: Path) -> None:
    """The agent never reads the tests; it leaves links for the verifier to read them (a probe passed so)."""
    attacks = {
        "direct": 'ln -s /task/tests/expected.txt "$HEADROOM_WORKDIR/answer"\n',
        "relative": 'cd "$HEADROOM_WORKDIR" && ln -s ../task/tests/expected.txt answer\n',
        "via-a-dir-link": 'cd "$HEADROOM_WORKDIR" && ln -s /task t && ln -s t/tests/expected.txt answer\n',
        "via-a-link-chain": 'cd "$HEADROOM_WORKDIR" && ln -s /task/tests/expected.txt /logs/agent/x && ln -s /logs/agent/x answer\n',
        "through-proc": 'ln -s /proc/self/root/task/tests/expected.txt "$HEADROOM_WORKDIR/answer"\n',
    }
    for name, attack in attacks.items():
        write_hostile_task(tasks_root, name, attack + 'ln -s /usr/bin/python3 "$HEADROOM_WORKDIR/py"\n')
    run = sweep(tasks_root, tmp_path)
    _failed(run)
    for ev in run.evidence:
        san = ev["extra"]["sanitiser"]
        assert san["status"] == "ok", san
        assert ev["extra"]["verifier_only_links_removed"] == san["links_removed"] >= 1
        assert san["links_kept"] >= 1  # /app/py -> /usr/bin/python3: a link to the system is the agent's business
    assert_nothing_leaks(run)
