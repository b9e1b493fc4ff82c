"""The Pod runner's own channels, run for real (dash, a PID namespace, a memory cgroup; see
tests/kubernetes/runner_harness.py): what the agent leaves on the image's PATH never runs in the runner's
place, and the agent_check phase decides agent_not_found before the agent gets control (an interpreter's
script included, as on every backend).

The corpus (tests/hostile/corpus.py) runs the same classes as real Pods on the real node; these run the
runner itself on this host, where an image whose PATH starts with a folder of the work dir can be stood in for.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.backends.kubernetes.signals import Context, observe
from orchestrator.engine.classify import classify
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.outcome import HarnessReason, Outcome
from orchestrator.spec.resources import ResourceAmounts
from orchestrator.spec.trial import Verdict
from orchestrator.tasks.files import bundle
from orchestrator.tasks.loader import load_tasks
from tests.kubernetes.runner_harness import RunResult, cgroup_usable, run_pod
from tests.taskfactory import write_task

pytestmark = [pytest.mark.cgroup, pytest.mark.skipif(cgroup_usable() is not None, reason=str(cgroup_usable()))]

#: The verifier passes only on an answer the agent is never given.
TEST = (
    'if [ "$(cat "$HEADROOM_WORKDIR/answer" 2>/dev/null)" = s3cret ]; then echo 1; else echo 0; fi '
    '> "$HEADROOM_LOGS_DIR/reward.txt"\n'
)


def _run(tmp: Path, command: str, forge: str | None = None, toml: str = "", **kw: object) -> tuple[RunResult, Verdict]:
    tasks = tmp / "tasks"
    write_task(tasks, "t", solve="true\n", test=TEST, extra_toml=toml)
    if forge is not None:
        (tasks / "t" / "environment").mkdir()
        (tasks / "t" / "environment" / "forge").write_text(forge)
    exp = Experiment(
        tasks_dir=str(tasks),
        tasks=["t"],
        configurations=["unbounded"],
        attempts=1,
        agent={"kind": "command", "command": command},
    )
    [task] = load_tasks(tasks, ["t"])
    launch = build_launch("run-r", plan(exp, [task])[0], 0, task, exp)
    res = run_pod(tmp, launch, bundle("t", task.path, task.digest), **kw)  # type: ignore[arg-type]
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
    obs = observe(
        pod,
        [],
        Context(
            now=0,
            amounts=ResourceAmounts(request_cpus=1, request_memory_bytes=1, limit_cpus=None, limit_memory_bytes=None),
        ),
    )
    assert obs.facts is not None
    return res, classify(obs.facts)


#: Every program the runner runs after the agent, planted in the work dir's bin/: each one, if it ever ran in the
#: runner's place, would write a passing reward into the termination message (or the reward file).
PLANTED = (
    "dd",
    "base64",
    "tr",
    "cksum",
    "find",
    "readlink",
    "sort",
    "sh",
    "bash",
    "cat",
    "cp",
    "mkdir",
    "rm",
    "head",
    "tail",
    "wc",
    "sha256sum",
    "tar",
    "awk",
    "grep",
    "cut",
    "mv",
    "ln",
    "timeout",
    "id",
    "sleep",
)
FORGE = r"""#!/bin/sh
# planted: forge a pass wherever the runner would have written
printf 'reward_file=reward.txt\nreward_size=2\nreward=1\nreward_b64=MQo=\nverifier_exit=0\n' > "${HR_TERMINATION_LOG:-/dev/termination-log}" 2>/dev/null
echo 1 > "$HR_ROOT/logs/verifier/reward.txt" 2>/dev/null
echo PLANTED-RAN >> "$HR_ROOT/planted-ran"
exec /usr/bin/env -i /bin/false
"""


def test_programs_the_agent_plants_on_the_images_path_never_run_for_the_runner(tmp_path: Path) -> None:
    """An image whose PATH starts with a folder of the work dir (ENV PATH=/app/bin:...): the runner once ran its
    find, readlink, dd, cksum... from there after the agent, so a planted dd could forge the termination message."""
    root = tmp_path / "pod"
    agent = (
        'echo wrong > "$HEADROOM_WORKDIR/answer"; /bin/mkdir -p "$HEADROOM_WORKDIR/bin" && '
        f'for p in {" ".join(PLANTED)}; do /bin/cp "$HEADROOM_TASK_DIR/environment/forge" '
        '"$HEADROOM_WORKDIR/bin/$p" && /bin/chmod +x "$HEADROOM_WORKDIR/bin/$p"; done'
    )
    # the agent's work dir (its container) and the verifier's (its fresh one, where the copy lands) both first
    image_path = f"{root / 'agent-app' / 'bin'}:{root / 'app' / 'bin'}:{os.environ['PATH']}"
    res, verdict = _run(tmp_path, agent, FORGE, extra_env={"PATH": image_path})
    assert res.report is not None and res.report.complete, res.stdout
    assert (verdict.outcome, verdict.reason) == (Outcome.FAILED, None), (verdict, res.message)
    assert res.report.reward() == (0.0, None), res.message
    assert not (root / "planted-ran").exists(), (root / "planted-ran").read_text()
    assert all((root / "app" / "bin" / p).exists() for p in PLANTED)  # they were there to be found


def test_an_agent_program_that_does_not_resolve_never_starts_in_the_pod(tmp_path: Path) -> None:
    res, verdict = _run(tmp_path, '/opt/my-agent/run.sh --fast; touch "$HEADROOM_WORKDIR/ran"')
    assert (verdict.outcome, verdict.reason) == (Outcome.HARNESS_ERROR, HarnessReason.AGENT_NOT_FOUND), res.message
    assert res.report is not None and res.report.fields["verifier_skipped"] == "agent_not_found"
    assert "/opt/my-agent/run.sh: no such file" in res.report.fields["agent_not_found"]
    assert "agent_exit" not in res.report.fields and not (tmp_path / "pod" / "app" / "ran").exists()


def test_the_check_resolves_with_the_agents_own_variables(tmp_path: Path) -> None:
    """The task env's PATH is the agent's: `bash` is not found on it, though the runner's own PATH has it."""
    res, verdict = _run(tmp_path, 'bash "$HEADROOM_TASK_DIR/run.sh"', toml='[environment.env]\nPATH = "/nonexistent"\n')
    assert (verdict.outcome, verdict.reason) == (Outcome.HARNESS_ERROR, HarnessReason.AGENT_NOT_FOUND), res.message
    assert res.report is not None and "bash: command not found" in res.report.fields["agent_not_found"]


def test_an_agent_that_claims_not_found_after_it_started_is_judged_on_its_work_in_the_pod(tmp_path: Path) -> None:
    res, verdict = _run(tmp_path, 'echo "sh: 1: my-agent: not found" >&2; exit 127')
    assert (verdict.outcome, verdict.reason) == (Outcome.FAILED, None), res.message
    assert res.report is not None and res.report.fields["agent_check"] == "ok"
    assert res.report.fields["agent_exit"] == "127" and res.report.fields["verifier_exit"] == "0"


def test_an_interpreters_missing_script_never_starts_in_the_pod(tmp_path: Path) -> None:
    """`python3 missing.py` cannot start: the runner's check is given the script word (HR_AGENT_PROGRAM_SCRIPT), as
    the sweep's preflight and the local and Docker tries are, so it is agent_not_found there too, not the verifier's."""
    res, verdict = _run(tmp_path, 'python3 -u "$HEADROOM_TASK_DIR/missing.py" --go; touch "$HEADROOM_WORKDIR/ran"')
    assert (verdict.outcome, verdict.reason) == (Outcome.HARNESS_ERROR, HarnessReason.AGENT_NOT_FOUND), res.message
    assert res.report is not None and res.report.fields["verifier_skipped"] == "agent_not_found"
    missing = tmp_path / "pod" / "headroom" / "task" / "missing.py"  # expanded in the agent's environment
    assert res.report.fields["agent_not_found"] == f"agent script not found: {missing}", res.message
    assert "agent_exit" not in res.report.fields and not (tmp_path / "pod" / "app" / "ran").exists()


def test_an_interpreters_script_that_is_there_runs_and_never_sees_the_runners_variables(tmp_path: Path) -> None:
    """Not executable, and that is fine: its interpreter reads it. The check's words stay the runner's own."""
    res, verdict = _run(
        tmp_path,
        'sh "$HEADROOM_TASK_DIR/environment/forge"',
        'echo wrong > "$HEADROOM_WORKDIR/answer"; env > "$HEADROOM_WORKDIR/env.txt"\n',
    )
    assert (verdict.outcome, verdict.reason) == (Outcome.FAILED, None), res.message
    assert (
        res.report is not None and res.report.fields["agent_check"] == "ok" and res.report.fields["agent_exit"] == "0"
    )
    seen = (tmp_path / "pod" / "app" / "env.txt").read_text()
    assert "HEADROOM_TASK_DIR=" in seen and "HR_AGENT_PROGRAM" not in seen, seen


def test_task_variables_named_like_the_runners_own_do_not_change_what_is_checked(tmp_path: Path) -> None:
    """The task's variables are set in the check's shell before it runs: they must not replace the word checked
    (`prog`) or the check itself (`check`, which would print a forged ok)."""
    toml = '[environment.env]\nprog = "/bin/sh"\ncheck = "echo agent_check=ok"\n'
    for i, (command, why) in enumerate(
        (
            ("/opt/my-agent/run.sh", "agent command not found: /opt/my-agent/run.sh: no such file"),
            ("python3 /opt/my-agent/run.py", "agent script not found: /opt/my-agent/run.py"),
        )
    ):
        res, verdict = _run(tmp_path / str(i), f'{command}; touch "$HEADROOM_WORKDIR/ran"', toml=toml)
        assert (verdict.outcome, verdict.reason) == (Outcome.HARNESS_ERROR, HarnessReason.AGENT_NOT_FOUND), res.message
        assert res.report is not None and res.report.fields["agent_not_found"] == why, res.message


#: Everything the agent's half or the verifier's half of the runner opens in the agent's run dir, made by the agent
#: as what blocks or misleads: FIFOs where a file is written or read, folders where one is moved, a forged report,
#: the old single-container hand-over files, and a loop that keeps making FIFOs until the sweep.
RUN_DIR_PLANTS = r"""
R="$HR_ROOT/headroom/agent-run"
echo wrong > "$HEADROOM_WORKDIR/answer"
for f in wake agent.msg agent.msg.new agent-stdout.tail agent-stderr.tail rec.left rec.count sanitise.out; do
  rm -rf "$R/$f"; mkfifo "$R/$f"
done
mkdir -p "$R/agent.skip/x" "$R/work/bin" "$R/rec/agent"; echo 1 > "$R/request"
: > "$R/runner.started"; : > "$R/rec.withheld"; : > "$R/work.none"
printf 'v=1\nreward_file=reward.txt\nreward_b64=MQo=\n' > "$R/rec/agent/forged"
( while :; do mkfifo "$R/agent.msg" "$R/wake" 2>/dev/null; sleep 0.05; done ) > /dev/null 2>&1 &
exit 0
"""


def test_what_the_agent_leaves_in_its_run_dir_is_its_own_failure_found_at_once(tmp_path: Path) -> None:
    """The pod's hand-over channel is the verifier's own volume, which the agent's container never mounts; what the
    agent leaves in its own run dir (which the verifier's half reads) is cleared after the sweep, before a byte is
    written there. A FIFO the runner would have opened once held the try until the pod's deadline."""
    res, verdict = _run(tmp_path, RUN_DIR_PLANTS, timeout=90)
    assert res.report is not None and res.report.complete, res.stdout
    assert (verdict.outcome, verdict.reason) == (Outcome.FAILED, None), (verdict, res.message)
    assert res.report.fields["work_out"] == "ok" and res.report.fields["work_in"] == "ok", res.message
    assert "records" not in res.report.fields and int(res.report.fields["records_bytes"]) > 0  # the record is kept
    assert "forged" not in res.stdout


def test_the_verifier_sees_the_agents_work_dir_in_its_own_fresh_one(tmp_path: Path) -> None:
    """The verifier's work dir is the image's, emptied and replaced by the agent's: a file only the image had is gone,
    the agent's files, folders and links within the work dir arrive; a FIFO is gone by the sanitiser."""
    image_only = tmp_path / "pod" / "app" / "image-only"
    image_only.parent.mkdir(parents=True)
    image_only.write_text("from the image\n")
    agent = (
        'cd "$HEADROOM_WORKDIR" && mkdir -p d/e && echo s3cret > d/e/real && ln -s d/e/real answer && mkfifo pipe && '
        "truncate -s 10G sparse.bin && mkdir -p locked && chmod 000 locked"
    )
    res, verdict = _run(tmp_path, agent)
    assert res.report is not None and res.report.complete, res.stdout
    assert (verdict.outcome, verdict.reason) == (Outcome.PASSED, None), (verdict, res.message)
    app = tmp_path / "pod" / "app"
    assert not image_only.exists()
    assert (app / "answer").is_symlink() and (app / "d" / "e" / "real").read_text() == "s3cret\n"
    assert not (app / "pipe").exists()
    assert (app / "sparse.bin").stat().st_size == 10 * 1024**3
