"""Real trials under real kernel limits (cgroup v1 or v2, whichever this machine has)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine.classify import classify
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.engine.sweep import prepare, run, start
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.outcome import Outcome
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import load_tasks
from tests.taskfactory import HOG, requires_cgroups, write_task

pytestmark = [pytest.mark.cgroup, requires_cgroups]


def run_all(root: Path, configs: list[str], enforcement: str = "auto", **kw):
    tasks = {t.id: t for t in load_tasks(root)}
    exp = Experiment(tasks_dir=str(root), configurations=configs, attempts=1, **kw)
    backend = LocalBackend(enforcement)  # type: ignore[arg-type]
    try:
        results = {}
        for trial in plan(exp, list(tasks.values())):
            facts = backend.run(build_launch("test", trial, 0, tasks[trial.task_id], exp))
            results[trial.config.label] = (facts, classify(facts))
        return backend.abilities.enforcement, results
    finally:
        backend.close()


def test_memory_hog_is_oom_killed_at_its_limit_and_passes_unbounded(tasks_root: Path) -> None:
    write_task(tasks_root, "hog", solve=HOG.format(mb=100), memory_mb=64)
    mechanism, res = run_all(tasks_root, ["1x-strict", "unbounded"])
    assert mechanism.startswith("cgroup-")
    strict_facts, strict = res["1x-strict"]
    assert (strict.outcome, strict.reason) == (Outcome.INFRA_ERROR, "oom_killed")
    assert strict_facts.agent and strict_facts.agent.oom_kills >= 1
    assert "oom_kill counter" in (strict_facts.agent.oom_evidence or "")  # the kernel said so, not exit 137
    assert strict_facts.verifier is None  # an OOM-killed container is not graded
    unb_facts, unb = res["unbounded"]
    assert unb.outcome is Outcome.PASSED
    assert unb_facts.peak_memory_bytes is not None and unb_facts.peak_memory_bytes > 100 * 1024 * 1024
    assert strict_facts.peak_memory_bytes is not None and strict_facts.peak_memory_bytes <= 64 * 1024 * 1024


def test_oom_is_detected_from_the_cgroup_even_when_the_agent_exits_zero(tasks_root: Path) -> None:
    # The agent swallows its child's SIGKILL and exits 0: exit codes alone would call this a pass.
    write_task(tasks_root, "swallow", solve=HOG.format(mb=100).rstrip() + ' || true\ntouch "$HEADROOM_WORKDIR/out"\n')
    _, res = run_all(tasks_root, ["1x-strict"])
    facts, verdict = res["1x-strict"]
    assert facts.agent is not None and facts.agent.exit_code == 0
    assert (verdict.outcome, verdict.reason) == (Outcome.INFRA_ERROR, "oom_killed")


CPU_BURN = "python3 -c \"import time\nt=time.process_time()\nwhile time.process_time()-t < 0.4: pass\nopen('$HEADROOM_WORKDIR/out','w').write('ok')\"\n"


def test_cpu_bound_task_slows_under_a_quota(tasks_root: Path) -> None:
    write_task(tasks_root, "burn", solve=CPU_BURN, cpus=0.25)
    _, res = run_all(tasks_root, ["1x-strict", "unbounded"])
    strict, unb = res["1x-strict"][0], res["unbounded"][0]
    assert res["1x-strict"][1].outcome is Outcome.PASSED and res["unbounded"][1].outcome is Outcome.PASSED
    assert strict.cpu_time_s and strict.cpu_time_s >= 0.4
    assert strict.agent and unb.agent
    # 0.4 s of CPU at a 0.25-core quota cannot take less than 1.6 s of wall time, however idle the machine.
    assert strict.agent.duration_s > 1.4
    # The kernel's own account: the quota throttled the strict trial, and nothing throttled the unbounded one.
    assert strict.extra.cpu_throttling is not None and (strict.extra.cpu_throttling.nr_throttled or 0) > 0
    assert unb.extra.cpu_throttling is not None and (unb.extra.cpu_throttling.nr_throttled or 0) == 0


def test_timeout_kills_the_whole_process_tree(tasks_root: Path) -> None:
    marker = f"{300 + os.getpid() % 1000}.{time.time_ns() % 10**6}"  # a sleep no other process runs
    # A grandchild in its own session (setsid) escapes a process-group kill, not the cgroup.
    solve = f"setsid sleep {marker} &\nsleep {marker}\n"
    write_task(tasks_root, "hang", solve=solve, agent_timeout=1)
    t0 = time.monotonic()
    _, res = run_all(tasks_root, ["unbounded"])
    facts, verdict = res["unbounded"]
    assert verdict.outcome is Outcome.TIMEOUT
    assert facts.agent is not None and facts.agent.timed_out
    assert time.monotonic() - t0 < 30
    time.sleep(0.1)
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", marker] and _alive(p.pid)]


def _alive(pid: int) -> bool:
    """Running or sleeping; a zombie is dead (it waits only for its new parent to reap it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_rlimit_fallback_caps_memory_and_says_so(tasks_root: Path) -> None:
    write_task(tasks_root, "hog", solve=HOG.format(mb=100), memory_mb=64)
    mechanism, res = run_all(tasks_root, ["1x-strict", "unbounded"], enforcement="rlimit")
    assert mechanism == "rlimit"
    facts, verdict = res["1x-strict"]
    assert facts.enforcement == "rlimit"
    # The cap bit (the hog could not allocate, so wrote nothing), but without a cgroup no kernel
    # said "OOM": the workload's MemoryError is its own text, so no OOM is claimed.
    assert "MemoryError" in facts.agent.stderr_tail
    assert facts.agent.oom_kills == 0 and facts.agent.oom_evidence is None
    assert verdict.outcome is Outcome.FAILED
    assert res["unbounded"][1].outcome is Outcome.PASSED


def test_rlimit_mode_never_takes_an_oom_claim_from_agent_text(tasks_root: Path) -> None:
    write_task(
        tasks_root,
        "liar",
        solve='echo "fatal: out of memory" >&2; echo "MemoryError" >&2\n'
        'echo "std::bad_alloc: Cannot allocate memory" >&2; exit 1\n',
    )
    _, res = run_all(tasks_root, ["1x-strict"], enforcement="rlimit")
    facts, verdict = res["1x-strict"]
    assert "out of memory" in facts.agent.stderr_tail
    assert facts.agent.oom_kills == 0
    assert verdict.outcome is Outcome.FAILED  # graded on its work, as any other failing agent


def test_each_trial_gets_its_own_workdir_removed_after(tasks_root: Path) -> None:
    # Passes only in an empty work dir: a second trial that saw the first one's files would fail.
    write_task(tasks_root, "where", solve='[ -z "$(ls -A "$HEADROOM_WORKDIR")" ] && touch "$HEADROOM_WORKDIR/out"\n')
    tasks = {t.id: t for t in load_tasks(tasks_root)}
    exp = Experiment(tasks_dir=str(tasks_root), configurations=["1x-strict", "unbounded"], attempts=1)
    backend = LocalBackend()
    try:
        for trial in plan(exp, list(tasks.values())):
            assert (
                classify(backend.run(build_launch("test", trial, 0, tasks[trial.task_id], exp))).outcome
                is Outcome.PASSED
            )
        backend.removal.drain()  # work dirs go off the trial's path, on the removal's own thread
        assert sorted(p.name for p in backend.workroot.iterdir()) in ([], ["tasks"])  # only the read-only task copy
        assert backend.removal.failed == []
    finally:
        backend.close()
    assert not backend.workroot.exists()


def test_secrets_handed_to_the_agent_never_reach_the_store(
    tasks_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-abcdefghijklmnop1234567890"
    monkeypatch.setenv("DEMO_API_KEY", secret)
    write_task(
        tasks_root,
        "leaky",
        solve="true\n",
        test='echo "verifier saw ${DEMO_API_KEY:-unset}"\n'
        'if [ -f "$HEADROOM_WORKDIR/out" ]; then echo 1; else echo 0; fi > "$HEADROOM_LOGS_DIR/reward.txt"\n',
    )
    agent = (
        f'echo "my key is $DEMO_API_KEY"; echo "$DEMO_API_KEY" >&2; touch "$HEADROOM_WORKDIR/out" # --token={secret}'
    )
    exp = Experiment(
        tasks_dir=str(tasks_root),
        configurations=["unbounded"],
        attempts=1,
        agent={"command": agent, "env_passthrough": ["DEMO_API_KEY"]},
    )
    store = Store(tmp_path / "s.db")
    backend = LocalBackend()
    try:
        run_id, tasks = start(exp, prepare(exp), store, backend)
        run(store, run_id, exp, tasks, backend)
    finally:
        backend.close()
    assert store.trial_frame(run_id)["outcome"].tolist() == ["passed"]  # the agent did get the key
    (evidence,) = store.evidence(run_id, store.planned(run_id)[0].trial_id)
    assert "verifier saw unset" in evidence["verifier"]["stdout_tail"]  # the verifier did not
    dump = "\n".join(line for line in store.db.iterdump())
    assert "my key is" in dump
    assert secret not in dump
