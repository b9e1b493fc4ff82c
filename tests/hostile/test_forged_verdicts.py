"""Infra verdicts come only from channels the agent cannot write (issue 19, item 3).

An agent controls its exit code, stdout and stderr. Each agent here forges one of the
orchestrator's own verdicts in them: the cgroup wrapper's spawn-failure exit code and
message, the kernel's OOM text, "No space left on device", a timeout's 124 or a SIGKILL's
137. Every one must be recorded as the agent's own failure, in one try: ``spawn_failed`` is
retried by default, so a forged one would work as a re-roll under ``--retries``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.isolation import process
from orchestrator.isolation.cgroups import detect
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.resources import ResourceAmounts
from tests.hostile.harness import assert_nothing_leaks, requires_sandbox, sweep, write_hostile_task
from tests.taskfactory import requires_cgroups

pytestmark = [pytest.mark.slow, requires_sandbox]

#: name -> the agent's forgery (each ends the agent's step the way the forged verdict would)
FORGERIES = {
    "spawn-code-and-message": 'echo "headroom: cannot join cgroup /sys/fs/cgroup/headroom/x/cgroup.procs" >&2; exit 111',
    "spawn-message-on-stdout": 'echo "headroom: cannot join cgroup /sys/fs/cgroup/x/cgroup.procs"; exit 111',
    "exec-not-found": 'echo "sh: 1: exec: bwrap: not found" >&2; exit 127',
    "oom-text": 'echo "Out of memory: Killed process 4242 (python3) total-vm:1048576kB" >&2; '
    'echo "MemoryError" >&2; echo "oom_kill 1"; exit 137',
    "disk-full-text": 'echo "write error: No space left on device" >&2; echo "storage limit exceeded" >&2; exit 28',
    "timeout-exit-124": 'echo "timeout: the monitored command dumped core" >&2; exit 124',
    "sigkill-self": 'echo "Killed" >&2; kill -KILL $$',
}


@requires_cgroups
def test_forged_infra_verdicts_are_the_agents_failure_and_not_retried(tasks_root: Path, tmp_path: Path) -> None:
    for name, attack in FORGERIES.items():
        write_hostile_task(tasks_root, name, attack + "\n")
    run = sweep(tasks_root, tmp_path, "--retries", "3", concurrency=2)
    assert run.outcomes == [("failed", None)] * len(FORGERIES), run.outcomes
    # one try per trial: nothing was re-rolled
    assert len(run.evidence) == len(FORGERIES), [e.get("try") for e in run.evidence]
    for e in run.evidence:
        assert e["agent"]["spawn_error"] is None and e["agent"]["oom_kills"] == 0 and not e["agent"]["timed_out"], e
        assert e.get("infra_hint") is None, e
        assert e["verifier"] is not None and e["verifier"]["exit_code"] == 0  # judged on its work, as any agent
    assert_nothing_leaks(run)


@requires_cgroups
def test_a_real_wrapper_failure_is_still_spawn_failed(tmp_path: Path) -> None:
    """The wrapper's own failure to join the cgroup reaches the verdict through its pipe."""
    driver = detect(f"headroom-test-wrapper-{tmp_path.name}")
    try:
        cg = driver.create(
            "t",
            ResourceAmounts(request_cpus=1, request_memory_bytes=64 << 20, limit_cpus=None, limit_memory_bytes=None),
            pids_max=64,
        )
        try:
            # A cgroup.procs that cannot be written (its directory is gone): the join fails for real.
            cg.procs_files = lambda: [tmp_path / "gone" / "cgroup.procs"]  # type: ignore[method-assign]

            def step(argv: list[str]) -> StepFacts:
                facts, _ = process.run_step(
                    "agent",
                    argv,
                    env={"PATH": "/usr/bin:/bin"},
                    cwd=tmp_path,
                    logs_dir=tmp_path,
                    timeout_s=30,
                    cgroup=cg,
                    limits=process.Limits(None),
                )
                return facts

            facts = step(["sh", "-c", "echo ran"])
            assert facts.spawn_error is not None and "cannot join cgroup" in facts.spawn_error, facts
            assert "ran" not in facts.stdout_tail  # the command never started outside its limits
            # ...and a missing program is the wrapper's verdict too, not the exit code's
            cg.procs_files = lambda: []  # type: ignore[method-assign]
            facts = step(["no-such-program-here"])
            assert facts.spawn_error is not None and "not found" in facts.spawn_error, facts
            facts = step(["sh", "-c", "exit 111"])
            assert facts.spawn_error is None and facts.exit_code == 111
        finally:
            cg.remove()
    finally:
        driver.close()
