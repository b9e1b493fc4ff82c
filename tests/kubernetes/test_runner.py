"""The in-pod runner and warden, run for real (dash, a PID namespace, a memory cgroup).

See ``runner_harness.py`` for what stands in for the pod. These tests check the
in-container contract: the agent's processes are gone before the tests arrive, an
agent cannot plant a reward or tests, step timeouts, the container cgroup's OOM
counter, secrets for the agent only, and the 4 KiB termination message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.backends.kubernetes import message
from orchestrator.backends.kubernetes.signals import Context, observe
from orchestrator.engine.classify import classify
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.tasks.files import bundle
from orchestrator.tasks.loader import load_tasks
from tests.taskfactory import write_task

from .runner_harness import RunResult, cgroup_usable, run_pod

pytestmark = [pytest.mark.cgroup, pytest.mark.skipif(cgroup_usable() is not None, reason=str(cgroup_usable()))]
REPO = Path(__file__).resolve().parents[2]


def run(tmp: Path, tasks_dir: Path, task_id: str, command: str | None = None, **kw: object) -> RunResult:
    agent = {"kind": "command", "command": command} if command else {"kind": "oracle"}
    if "secret" in kw:
        agent["env_passthrough"] = ["HEADROOM_TEST_SECRET"]
    exp = Experiment(tasks_dir=str(tasks_dir), tasks=[task_id], configurations=["unbounded"], attempts=1, agent=agent)
    tasks = load_tasks(tasks_dir, [task_id])
    launch = build_launch("run-r", plan(exp, tasks)[0], 0, tasks[0], exp)
    extra = dict(kw.pop("extra_env", {}) or {})  # type: ignore[call-overload]
    if "secret" in kw:
        extra["HEADROOM_TEST_SECRET"] = str(kw.pop("secret"))
    res = run_pod(tmp, launch, bundle(task_id, tasks[0].path, tasks[0].digest), extra_env=extra, **kw)  # type: ignore[arg-type]
    assert len(res.message.encode()) <= message.MAX_MESSAGE_BYTES
    return res


def judged(res: RunResult) -> tuple[object, object]:
    pod = {
        "metadata": {"name": "p"},
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "task",
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": res.message}},
                }
            ],
        },
    }
    from orchestrator.spec.resources import ResourceAmounts

    obs = observe(
        pod,
        [],
        Context(
            now=0,
            amounts=ResourceAmounts(request_cpus=1, request_memory_bytes=1, limit_cpus=None, limit_memory_bytes=None),
        ),
    )
    assert obs.facts is not None
    v = classify(obs.facts)
    return v.outcome, v.reason


def test_a_bundled_task_passes_with_the_oracle(tmp_path: Path) -> None:
    res = run(tmp_path, REPO / "tasks", "csv-report")
    assert res.report is not None and res.report.complete, res.stdout
    assert res.report.reward() == (1.0, None)
    assert judged(res) == (Outcome.PASSED, None)
    assert res.report.fields["memcg"] in ("v1", "v2") and int(res.report.fields["agent_peak"]) > 0
    assert "tail of" in res.stdout  # the log tail the backend keeps as evidence


# The marker is made before the planted test.sh: the watching loop must never see a test.sh
# without it unless the real tests arrived (it used to race the plant itself).
PLANT = r"""
( while :; do
    ls "$HR_ROOT/tests" "$HR_ROOT/headroom/handoff" >> "$HEADROOM_WORKDIR/seen" 2>&1
    [ -e "$HR_ROOT/tests/test.sh" ] && [ ! -e "$HR_ROOT/tests/planted" ] && echo leak >> "$HEADROOM_WORKDIR/leak"
    sleep 0.05
  done ) > /dev/null 2>&1 &
setsid sh -c 'sleep 1000' > /dev/null 2>&1 &
mkdir -p "$HR_ROOT/logs/verifier" && echo 1 > "$HR_ROOT/logs/verifier/reward.txt"
touch "$HR_ROOT/tests/planted"; echo 'echo 1 > "$HEADROOM_LOGS_DIR/reward.txt"' > "$HR_ROOT/tests/test.sh"
mkdir -p "$HR_ROOT/headroom/run/vtask/tests" 2>/dev/null
exit 0
"""


def test_agent_processes_are_gone_before_the_tests_arrive_and_plants_do_not_count(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(
        tasks,
        "plant",
        solve="exit 0\n",
        test='[ -e "$HEADROOM_WORKDIR/leak" ] && echo LEAKED; echo 0 > "$HEADROOM_LOGS_DIR/reward.txt"\n',
    )
    res = run(tmp_path, tasks, "plant", command=PLANT)
    assert res.report is not None and res.report.complete, res.stdout
    assert res.report.reward() == (0.0, None)  # the real verifier's reward, not the planted 1
    app = res.root / "app"
    assert not (app / "leak").exists(), "an agent process saw the tests"
    assert (app / "seen").exists()  # the background loop did run during the agent step
    assert "LEAKED" not in res.stdout
    assert not (res.root / "tests" / "planted").exists()  # /tests was emptied before the handover


def test_a_step_timeout_kills_the_agent_and_skips_the_verifier(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "slow", solve="exit 0\n", agent_timeout=1)
    res = run(tmp_path, tasks, "slow", command="sleep 60")
    assert res.report is not None
    assert res.report.fields["agent_timeout"] == "1" and res.report.fields["verifier_skipped"] == "agent_timeout"
    assert judged(res) == (Outcome.TIMEOUT, None)
    assert int(res.report.fields["agent_cs"]) < 1000


#: Kills itself 30 ms before its 2 s deadline, by the clock the runner measures with (uptime, from the
#: step's own start time): inside the 50 ms the old rule (exit > 128 near the deadline) took for a timeout.
FORGE_TIMEOUT = r"""read -r st < /proc/$$/stat; set -- ${st##*) }; target=$((${20} + 200 - 3))
while :; do read -r up _ < /proc/uptime; now=$(( ${up%.*} * 100 + 1${up#*.} - 100 )); [ $now -ge $target ] && break; done
kill -KILL $$"""


def test_an_exit_137_at_the_deadline_is_not_a_timeout(tmp_path: Path) -> None:
    """Only the runner's own watcher makes a timeout: an agent that kills itself just before its
    deadline (exit 137, which once passed for one) is judged on its work like any other."""
    tasks = tmp_path / "tasks"
    write_task(tasks, "forger", solve="exit 0\n", agent_timeout=2)
    res = run(tmp_path, tasks, "forger", command=FORGE_TIMEOUT)
    assert res.report is not None, res.stdout
    f = res.report.fields
    assert f["agent_exit"] == "137" and f["agent_timeout"] == "0", f
    assert "verifier_exit" in f  # graded
    assert judged(res) == (Outcome.FAILED, None)


def test_cpu_time_and_throttling_are_read_around_each_step(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "spin", solve="exit 0\n")
    spin = 'python3 -c "import time; t = time.process_time() + 0.6\nwhile time.process_time() < t: pass"'
    res = run(tmp_path, tasks, "spin", command=spin)
    assert res.report is not None, res.stdout
    f = res.report.fields
    # the spin's 0.6 s of CPU is in the container cgroup's counter (the runner's own sh adds a little)
    assert int(f["agent_cpu_us"]) >= 600_000, f
    assert int(f["verifier_cpu_us"]) >= 0
    assert res.report.cpu_time_s() == (int(f["agent_cpu_us"]) + int(f["verifier_cpu_us"])) / 1e6
    periods, throttled, usec = (int(x) for x in f["agent_cpu_thr"].split(","))
    assert periods >= 0 and throttled >= 0 and usec >= 0  # no quota here: counted, not necessarily rising


def test_the_container_cgroup_oom_counter_is_read_around_the_step(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "hog", solve="exit 0\n")
    hog = 'python3 -c "b = bytearray(400 * 1024 * 1024); print(len(b))"'
    res = run(tmp_path, tasks, "hog", command=hog, memory_limit=64 * 1024 * 1024)
    assert res.report is not None, res.stdout
    f = res.report.fields
    assert int(f["agent_oom1"]) > int(f["agent_oom0"]) == 0, f
    assert f["verifier_skipped"] == "agent_oom"
    assert judged(res) == (Outcome.INFRA_ERROR, InfraReason.OOM_KILLED)


def test_a_warden_started_after_the_try_ended_exits_instead_of_holding_the_pod(tmp_path: Path) -> None:
    """An agent OOM-killed at once ends the runner before the kubelet starts the warden: the warden
    finds no process at its first look and must still exit (it waited for the pod's deadline, and the
    pod kept its requests on the node). The harness's timeout is the deadline here."""
    tasks = tmp_path / "tasks"
    write_task(tasks, "hog", solve="exit 0\n")
    hog = 'python3 -c "b = bytearray(400 * 1024 * 1024); print(len(b))"'
    res = run(tmp_path, tasks, "hog", command=hog, memory_limit=64 * 1024 * 1024, start="warden_late", timeout=60)
    assert res.returncode == 0, res.stdout
    assert res.report is not None and res.report.fields["verifier_skipped"] == "agent_oom", res.stdout
    assert (res.root / "headroom" / "run" / "runner.started").exists()


def test_a_warden_that_starts_before_the_runner_waits_for_it(tmp_path: Path) -> None:
    """No process and no start marker: the runner has not started yet (its container still starting),
    so the warden stays and hands the tests over when asked."""
    res = run(tmp_path, REPO / "tasks", "csv-report", start="runner_late")
    assert res.report is not None and res.report.complete, res.stdout
    assert res.report.reward() == (1.0, None)


def test_secrets_reach_the_agent_and_never_the_verifier(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(
        tasks,
        "sec",
        solve="exit 0\n",
        test='echo "${HEADROOM_TEST_SECRET:-unset}" > "$HEADROOM_WORKDIR/verifier_saw"; '
        'echo 1 > "$HEADROOM_LOGS_DIR/reward.txt"\n',
    )
    res = run(
        tmp_path,
        tasks,
        "sec",
        command='echo "$HEADROOM_TEST_SECRET" > "$HEADROOM_WORKDIR/agent_saw"',
        secret="s3cret-value",
        extra_env={"HR_SECRET_NAMES": "HEADROOM_TEST_SECRET"},
    )
    assert (res.root / "app" / "agent_saw").read_text().strip() == "s3cret-value"
    assert (res.root / "app" / "verifier_saw").read_text().strip() == "unset"


def test_tests_are_withheld_while_a_process_the_runner_cannot_kill_lives(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "stray", solve="exit 0\n")
    res = run(tmp_path, tasks, "stray", command="exit 0", stray=True)
    assert res.report is not None
    assert res.report.fields["verifier_skipped"] == "tests_withheld"
    assert "sleep" in res.report.fields["detail"]
    assert not (res.root / "tests" / "test.sh").exists()


def test_tests_that_do_not_match_the_manifest_are_not_run(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "mm", solve="exit 0\n")
    res = run(tmp_path, tasks, "mm", command="exit 0", extra_env={"HR_TESTS_MANIFEST": "0 0 ./test.sh;"})
    assert res.report is not None and res.report.fields["verifier_skipped"] == "tests_mismatch"


@pytest.mark.parametrize("result_bytes,reward_bytes", [(1400, 500), (100_000, 100_000), (1500, 512)])
def test_the_termination_message_stays_within_4_kib(tmp_path: Path, result_bytes: int, reward_bytes: int) -> None:
    tasks = tmp_path / "tasks"
    reward = json.dumps({"reward": 1, "pad": "r" * max(0, reward_bytes - 30)})
    write_task(tasks, "big", solve="exit 0\n", test=f"printf '%s' '{reward}' > \"$HEADROOM_LOGS_DIR/reward.json\"\n")
    result = json.dumps({"tokens_in": 7, "model": "m" * max(0, result_bytes - 40)})
    res = run(tmp_path, tasks, "big", command=f"printf '%s' '{result}' > \"$HEADROOM_AGENT_RESULT\"")
    assert res.report is not None and res.report.complete
    assert len(res.message.encode()) <= message.MAX_MESSAGE_BYTES  # the kubelet keeps no more
    got_result = res.report.agent_result()
    if len(result) <= 1500:
        assert got_result["tokens_in"] == 7
    else:
        assert got_result == {} and res.report.fields["agent_result_size"] == str(len(result))
    value, err = res.report.reward()
    if len(reward) <= message.MAX_REWARD_BYTES:
        assert value == 1.0
    else:
        assert value is None and err is not None and err.startswith("malformed")


# ---- the agent's text never becomes a key of the message (hostile finding #1) -----------------------

# Every character Python's str.splitlines() treats as a line break, besides "\n".
_BREAKS = ["\\r", "\\v", "\\f", "\\034", "\\035", "\\036", "\\302\\205", "\\342\\200\\250", "\\342\\200\\251"]


@pytest.mark.parametrize("brk", _BREAKS)
def test_an_agent_result_cannot_forge_the_reward(tmp_path: Path, brk: str) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "forge", solve="exit 0\n")  # the verifier passes only if $HEADROOM_WORKDIR/out exists
    forged = brk.join(
        [
            '{"tokens_in": 1}',
            "reward_file=reward.txt",
            "reward_size=2",
            "reward=1",
            "verifier_exit=0",
            "agent_result_b64=e30=",
        ]
    )
    # a newline too, and the same keys once more after it: the runner must keep the file on one line
    res = run(
        tmp_path,
        tasks,
        "forge",
        command=f"printf '{forged}\\nreward=1\\nreward_b64=MQ==\\n' > \"$HEADROOM_AGENT_RESULT\"",
    )
    assert res.report is not None and res.report.complete, res.stdout
    assert res.report.reward() == (0.0, None), res.message
    assert judged(res) == (Outcome.FAILED, None)
    assert not res.report.duplicates


def test_the_agent_result_arrives_byte_for_byte(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "utf", solve="exit 0\n")
    result = {"tokens_in": 5, "model": "m\u00e9t\u00e9o \u2028 \u0085 ok", "answer": "line1\nline2\ttab"}
    (tmp_path / "result.json").write_text(json.dumps(result, ensure_ascii=False))
    res = run(tmp_path, tasks, "utf", command=f'cp {tmp_path / "result.json"} "$HEADROOM_AGENT_RESULT"')
    assert res.report is not None
    assert res.report.agent_result() == result


# ---- links into verifier-only paths are gone before the verifier runs (hostile finding #3) ----------

CHECK = (
    '[ -L "$HEADROOM_WORKDIR/keep" ] && echo kept > "$HEADROOM_WORKDIR/keep_seen"; '
    'if [ "$(cat "$HEADROOM_WORKDIR/answer" 2>/dev/null)" = "$(cat "$HEADROOM_TASK_DIR/tests/expected.txt")" ]; '
    'then echo 1; else echo 0; fi > "$HEADROOM_LOGS_DIR/reward.txt"\n'
)


def _hidden_answer_task(tasks: Path, name: str) -> None:
    d = write_task(
        tasks, name, solve='cp "$HEADROOM_TASK_DIR/solution/answer.txt" "$HEADROOM_WORKDIR/answer"\n', test=CHECK
    )
    (d / "tests" / "expected.txt").write_text("hidden-4f1c\n")
    (d / "solution" / "answer.txt").write_text("hidden-4f1c\n")


LINKS = {
    "absolute": 'ln -s "$HR_ROOT/tests/expected.txt" answer',
    "relative": "ln -s ../tests/expected.txt answer",
    "dotdot through a missing folder": 'ln -s "$HR_ROOT/nowhere/../tests/expected.txt" answer',
    "through a folder link": 'ln -s / rootlink && ln -s "rootlink$HR_ROOT/tests/expected.txt" answer',
    "a chain": 'ln -s "$HR_ROOT/tests/expected.txt" hop1 && ln -s hop1 hop2 && ln -s "$PWD/hop2" answer',
    "the runner's task copy": 'ln -s "$HR_ROOT/headroom/run/vtask/tests/expected.txt" answer',
    "the warden's handoff": 'ln -s "$HR_ROOT/headroom/handoff/tests/expected.txt" answer',
    "the tests folder itself": 'ln -s "$HR_ROOT/tests" t && ln -s t/expected.txt answer',
}


@pytest.mark.parametrize("how", list(LINKS))
def test_a_link_to_the_hidden_tests_is_removed_before_the_verifier(tmp_path: Path, how: str) -> None:
    tasks = tmp_path / "tasks"
    _hidden_answer_task(tasks, "peek")
    agent = (
        f'cd "$HEADROOM_WORKDIR" && mkdir data && echo x > data/f && ln -s data/f keep && {LINKS[how]} && '
        'mkdir -p "deep/a b" && ln -s "$HR_ROOT/logs/verifier/reward.txt" "deep/a b/r" && '
        'ln -s "$HR_ROOT/tests/expected.txt" "$HEADROOM_LOGS_DIR/peek"'
    )
    res = run(tmp_path, tasks, "peek", command=agent)
    assert res.report is not None and res.report.complete, res.stdout
    assert res.report.reward() == (0.0, None), res.message
    removed = int(res.report.fields["verifier_only_links_removed"])
    assert removed >= 3  # answer, deep/a b/r, the one in /logs/agent (and hops of a chain)
    assert res.report.evidence().verifier_only_links_removed == str(removed)
    assert (res.root / "app" / "keep_seen").exists()  # a link within the work dir stays


def test_the_oracle_may_link_to_its_solution_and_no_other_agent_may(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    _hidden_answer_task(tasks, "sol")
    link = 'ln -s "$HR_ROOT/solution/answer.txt" "$HEADROOM_WORKDIR/answer"'
    agent = run(tmp_path / "agent", tasks, "sol", command=link)
    assert agent.report is not None and agent.report.fields["verifier_only_links_removed"] == "1"
    assert agent.report.reward() == (0.0, None)

    d = tasks / "sol" / "solution" / "solve.sh"
    d.write_text(link + "\n")
    oracle = run(tmp_path / "oracle", tasks, "sol")
    assert oracle.report is not None and oracle.report.fields["verifier_only_links_removed"] == "0"
    assert oracle.report.reward() == (1.0, None)


def _path_without(tmp: Path, *missing: str) -> str:
    """A PATH of one folder linking every program of this PATH but ``missing`` (an image without them)."""
    import os

    bindir = tmp / "bin"
    bindir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            src = Path(d) / name
            if name not in missing and not (bindir / name).exists() and os.access(src, os.X_OK):
                (bindir / name).symlink_to(src)
    return str(bindir)


def test_without_base64_or_readlink_the_fallbacks_hold_and_every_link_goes(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    _hidden_answer_task(tasks, "bare")
    forged = "\\v".join(['{"tokens_in": 4}', "reward_file=reward.txt", "reward_size=2", "reward=1"])
    agent = (
        f'printf \'{forged}\\n\' > "$HEADROOM_AGENT_RESULT"; cd "$HEADROOM_WORKDIR" && '
        'ln -s / r && ln -s "r$HR_ROOT/tests/expected.txt" answer'
    )
    res = run(
        tmp_path,
        tasks,
        "bare",
        command=agent,
        extra_env={"HR_RUNNER_PATH": _path_without(tmp_path, "base64", "readlink")},
    )
    assert res.report is not None and res.report.complete, res.stdout
    assert "agent_result" in res.report.fields and "agent_result_b64" not in res.report.fields
    assert res.report.reward() == (0.0, None), res.message
    # Without readlink the sanitiser cannot have the system resolve a link: it judges none and removes
    # both (r -> / and the answer); removing a link the agent made is never the verifier's loss.
    assert res.report.fields["verifier_only_links_removed"] == "2"
    assert res.report.fields["sanitise"] == "ok"


def test_a_secret_printed_across_the_log_tail_cut_is_redacted_before_the_cut(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "straddle", solve="exit 0\n")
    key = "Zq7-Wk9-Hh2-Pp4-Jj6-Tt8-Vv1-Ff3"  # 31 characters
    # the last 2048 bytes of stdout start 15 characters before the key's end
    agent = 'echo "key $HEADROOM_TEST_SECRET"; head -c 2032 /dev/zero | tr "\\0" x; echo'
    res = run(
        tmp_path, tasks, "straddle", command=agent, secret=key, extra_env={"HR_SECRET_NAMES": "HEADROOM_TEST_SECRET"}
    )
    log = res.stdout.split("===== tail of ", 1)[1]
    assert log.startswith(f"{res.root}/logs/agent/stdout.txt") and "x" * 2000 in log
    assert not [key[i : i + 4] for i in range(len(key) - 3) if key[i : i + 4] in log], log[:200]


def _external(tmp: Path, tasks_dir: Path, task_id: str, word: str | None) -> RunResult:
    """An external agent's pod: the host's side is this thread, which writes its word once the runner is ready."""
    import threading
    import time

    run_dir = tmp / "pod" / "headroom" / "agent-run"

    def host() -> None:
        deadline = time.monotonic() + 60
        while not (run_dir / "agent.ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if word is not None:
            (run_dir / "agent.done").write_text(word + "\n")

    exp = Experiment(
        tasks_dir=str(tasks_dir),
        tasks=[task_id],
        configurations=["unbounded"],
        attempts=1,
        agent={"kind": "external", "command": "python3 my_agent.py"},
    )
    tasks = load_tasks(tasks_dir, [task_id])
    launch = build_launch("run-r", plan(exp, tasks)[0], 0, tasks[0], exp)
    t = threading.Thread(target=host, daemon=True)
    t.start()
    res = run_pod(tmp, launch, bundle(task_id, tasks[0].path, tasks[0].digest))
    t.join()
    return res


def test_an_external_agents_phase_waits_for_the_hosts_word_then_the_verifier_runs(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "ext", solve="exit 0\n")
    res = _external(tmp_path, tasks, "ext", "exit 3")
    assert res.report is not None
    assert res.report.fields["agent_external"] == "exit"
    assert "verifier_exit" in res.report.fields and "verifier_skipped" not in res.report.fields
    # The phase ended before the sweep: every later exec is refused (exec_target.WRAPPER checks this).
    assert (res.root / "headroom" / "agent-run" / "agent.ended").is_dir()
    assert "python3 my_agent.py" not in res.stdout  # the agent's command never ran in the pod


def test_an_external_agents_timeout_on_the_host_skips_the_verifier(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "ext", solve="exit 0\n")
    res = _external(tmp_path, tasks, "ext", "timeout")
    assert res.report is not None
    assert res.report.fields["agent_external"] == "timeout" and res.report.fields["verifier_skipped"] == "agent_timeout"
