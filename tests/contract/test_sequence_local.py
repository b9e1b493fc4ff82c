"""The contract's sequence on the real local backend: the setup phase, the verdicts it gives, the step runner.

Real bubblewrap sandboxes (skipped without them); the launches are built by the engine's own
``build_launch`` from tasks on disk.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.backends.local.runner import LocalRunner
from orchestrator.contract import phases, sanitiser
from orchestrator.contract.runner import StepRunner
from orchestrator.engine.classify import classify
from orchestrator.engine.launch import build_launch
from orchestrator.engine.settle import settle
from orchestrator.spec.experiment import AgentSpec, Experiment, RetryPolicy
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.launch import Launch, SetupLaunch
from orchestrator.spec.outcome import HarnessReason, InfraReason, ModelReason, Outcome
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.trial import Trial
from orchestrator.tasks.loader import load_tasks
from tests.hostile.harness import requires_sandbox
from tests.taskfactory import write_task

pytestmark = [requires_sandbox]


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    b = LocalBackend(enforcement="rlimit", isolation="sandbox")
    yield b
    b.close()


def _launch(root: Path, command: str, setup: SetupLaunch | None = None) -> Launch:
    # The agent succeeds only if the setup phase left its tool in the agent's HOME.
    write_task(root, "t", solve="true\n")
    [task] = load_tasks(root)
    exp = Experiment(tasks_dir=str(root), agent=AgentSpec(kind="command", command=command))
    trial = Trial(trial_id="t-1", task_id="t", config=ResourceConfig.parse("unbounded"), attempt=0, seed=1, order=0)
    return build_launch("r", trial, 0, task, exp).model_copy(update={"agent_setup": setup})


def test_the_setup_phase_installs_into_the_agents_home(backend: LocalBackend, tmp_path: Path) -> None:
    setup = SetupLaunch(
        shell='mkdir -p "$HOME/bin" && printf "#!/bin/sh\\ntouch \\"$HEADROOM_WORKDIR/out\\"\\n" '
        '> "$HOME/bin/tool" && chmod +x "$HOME/bin/tool"',
        timeout_s=20,
    )
    facts = backend.run(_launch(tmp_path, '"$HOME/bin/tool"', setup))
    assert classify(facts).outcome is Outcome.PASSED, (facts.agent, facts.infra_detail)
    assert facts.extra.agent_setup is not None and facts.extra.agent_setup.exit_code == 0


@pytest.mark.parametrize("shell", ["exit 3", "sleep 30"])
def test_a_failed_setup_is_an_infra_error_and_the_agent_never_runs(
    backend: LocalBackend, tmp_path: Path, shell: str
) -> None:
    setup = SetupLaunch(shell=shell, timeout_s=1)
    facts = backend.run(_launch(tmp_path, 'touch "$HEADROOM_WORKDIR/out"', setup))
    v = classify(facts)
    assert (v.outcome, v.reason) == (Outcome.INFRA_ERROR, InfraReason.AGENT_SETUP_FAILED), facts.infra_detail
    assert facts.agent is None and facts.verifier is None


def test_the_sequence_ends_a_try_where_the_phase_definition_says(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_try reads each phase's endings from phases.DEFINITION: a setup that may exit non-zero (a definition
    without the EXIT ending) no longer ends the try, and the agent runs; nothing in the sequence had to change."""
    setup = SetupLaunch(shell="exit 3", timeout_s=20)
    d = phases.get(phases.Phase.AGENT_SETUP)
    lenient = dataclasses.replace(
        d, ends=(phases.Ending((phases.Failure.SPAWN, phases.Failure.TIMEOUT), "agent_setup_failed", ""),)
    )
    monkeypatch.setattr(phases, "DEFINITION", tuple(lenient if x is d else x for x in phases.DEFINITION))
    facts = backend.run(_launch(tmp_path, 'touch "$HEADROOM_WORKDIR/out"', setup))
    assert facts.extra.agent_setup is not None and facts.extra.agent_setup.exit_code == 3
    assert facts.infra_hint is None and facts.agent is not None and facts.agent.exit_code == 0
    assert classify(facts).outcome is Outcome.PASSED, (facts.agent, facts.verifier)


def test_the_verifier_runs_without_the_agents_variables(backend: LocalBackend, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HR_TEST_SECRET", "s3cr3t-value")
    write_task(
        tmp_path,
        "t",
        solve="true\n",
        test=(
            'env > "$HEADROOM_LOGS_DIR/env.txt"; '
            '{ [ "$PYTHONSAFEPATH" = 1 ] && [ -z "${HR_TEST_SECRET:-}" ] && [ -z "${PYTHONPATH:-}" ]; } '
            '&& echo 1 > "$HEADROOM_LOGS_DIR/reward.txt" || echo 0 > "$HEADROOM_LOGS_DIR/reward.txt"\n'
        ),
    )
    [task] = load_tasks(tmp_path)
    exp = Experiment(
        tasks_dir=str(tmp_path),
        agent=AgentSpec(kind="command", command="export PYTHONPATH=/app; true", env_passthrough=["HR_TEST_SECRET"]),
    )
    trial = Trial(trial_id="t-1", task_id="t", config=ResourceConfig.parse("unbounded"), attempt=0, seed=1, order=0)
    facts = backend.run(build_launch("r", trial, 0, task, exp))
    assert classify(facts).outcome is Outcome.PASSED, facts.verifier


def test_the_local_runner_is_a_step_runner() -> None:
    assert issubclass(LocalRunner, StepRunner)


def _facts(**kw: object) -> TrialFacts:
    base = dict(
        enforcement="rlimit",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="BestEffort",
        agent=StepFacts(name="agent", exit_code=0),
    )
    return TrialFacts(**{**base, **kw})  # type: ignore[arg-type]


def test_agent_made_states_are_the_agents_failure_never_a_harness_error() -> None:
    crashed = StepFacts(name="verifier", exit_code=1)
    hung = StepFacts(name="verifier", timed_out=True, signal=9)
    assert classify(_facts(agent_fault="unlistable")).reason is ModelReason.UNJUDGED_STATE
    assert classify(_facts(verifier=crashed, verifier_on_agent_state=True)).reason is ModelReason.VERIFIER_BROKEN
    assert classify(_facts(verifier=hung, verifier_on_agent_state=True, reward=1.0)).outcome is Outcome.FAILED
    # without the agent's state handed over (a backend that did not run the contract), as before
    assert classify(_facts(verifier=crashed)).reason is HarnessReason.VERIFIER_CRASHED
    # a verifier that could not start is the harness's, whatever the agent left
    spawn = StepFacts(name="verifier", spawn_error="ENOENT")
    assert classify(_facts(verifier=spawn, verifier_on_agent_state=True)).outcome is Outcome.HARNESS_ERROR


def _agent(tmp_path: Path, command: str, prepare: str = "") -> Launch:
    """A task whose agent is ``command``; ``prepare`` (the setup phase) lays out what the command needs."""
    write_task(tmp_path, "t", solve="true\n")
    [task] = load_tasks(tmp_path)
    exp = Experiment(tasks_dir=str(tmp_path), agent=AgentSpec(kind="command", command=command))
    trial = Trial(trial_id="t-1", task_id="t", config=ResourceConfig.parse("unbounded"), attempt=0, seed=1, order=0)
    setup = SetupLaunch(shell=prepare, timeout_s=20) if prepare else None
    return build_launch("r", trial, 0, task, exp).model_copy(update={"agent_setup": setup})


#: agent command, what the setup phase leaves in the agent's HOME, and a word the evidence names
UNRESOLVED = {
    "missing-path": ("/opt/my-agent/run.sh", "", "no such file"),
    "missing-name": ("my-agent --task x", "", "command not found"),
    "not-executable": ('"$HOME/run.sh"', 'printf "#!/bin/sh\\ntrue\\n" > "$HOME/run.sh"', "not executable"),
    "a-folder": ("$HOME/run", 'mkdir -p "$HOME/run"', "is a directory"),
    "missing-interpreter": (
        'VAR=1 "$HOME/run.sh" arg',
        'printf "#!/opt/py/bin/python9\\n" > "$HOME/run.sh"; chmod +x "$HOME/run.sh"',
        "interpreter is missing: #!/opt/py/bin/python9",
    ),
    "missing-env-interpreter": (
        "exec ~/run.sh",
        'printf "#!/usr/bin/env python9\\n" > "$HOME/run.sh"; chmod +x "$HOME/run.sh"',
        "interpreter is not on the PATH: python9",
    ),
    # without -S the kernel hands env "sh -e" as one word, which env cannot find
    "env-without-split": (
        "~/run.sh",
        'printf "#!/usr/bin/env sh -e\\ntrue\\n" > "$HOME/run.sh"; chmod +x "$HOME/run.sh"',
        "interpreter is not on the PATH: sh -e",
    ),
    "windows-line-ending": (
        "~/run.sh",
        'printf "#!/bin/sh\\r\\ntrue\\r\\n" > "$HOME/run.sh"; chmod +x "$HOME/run.sh"',
        "carriage return",
    ),
    # an interpreter's script, checked by the same script as the sweep's preflight (in the sandbox, the try's HOME)
    "missing-python-script": ('python3 -u "$HOME/agent.py" --go', "", "agent script not found: /"),
    "missing-shell-script": ("bash -x ~/run.sh", "", "agent script not found: /"),
}


@pytest.mark.parametrize("case", sorted(UNRESOLVED))
def test_an_agent_whose_program_does_not_resolve_never_starts(backend: LocalBackend, tmp_path: Path, case: str) -> None:
    """headroom's own check, in the sandbox before the agent gets control: harness_error(agent_not_found)."""
    command, prepare, words = UNRESOLVED[case]
    facts = backend.run(_agent(tmp_path, f'{command}; touch "$HEADROOM_WORKDIR/out"', prepare))
    v = classify(facts)
    assert (v.outcome, v.reason) == (Outcome.HARNESS_ERROR, HarnessReason.AGENT_NOT_FOUND), (facts.extra, facts.agent)
    assert words in (facts.agent_unresolved or ""), facts.agent_unresolved
    assert facts.agent is not None and facts.agent.skipped and facts.agent.exit_code is None  # it never ran
    assert (
        facts.verifier is None and facts.extra.agent_check is not None and facts.extra.agent_check.status == "not_found"
    )


@pytest.mark.parametrize(
    "command",
    [
        '"$HOME/tool" && touch "$HEADROOM_WORKDIR/out"',  # a variable the check expands in the sandbox
        'cd "$HEADROOM_WORKDIR" && touch out',  # a builtin
        "X=1 env python3 -c \"open('/app/out', 'w')\"",  # assignments and env before the program
        '$(echo true) && touch "$HEADROOM_WORKDIR/out"',  # cannot be told without running it: unchecked, it runs
        'sh "$HOME/tool" && touch "$HEADROOM_WORKDIR/out"',  # an interpreter's script that is there
    ],
)
def test_an_agent_whose_program_resolves_runs(backend: LocalBackend, tmp_path: Path, command: str) -> None:
    prepare = 'printf "#!/usr/bin/env sh\\nexit 0\\n" > "$HOME/tool"; chmod +x "$HOME/tool"'
    facts = backend.run(_agent(tmp_path, command, prepare))
    assert classify(facts).outcome is Outcome.PASSED, (facts.extra.agent_check, facts.agent)
    assert facts.extra.agent_check is None or facts.extra.agent_check.status in ("ok", "unchecked")


def test_an_agent_that_says_not_found_after_it_started_is_judged_on_its_work(
    backend: LocalBackend, tmp_path: Path
) -> None:
    """Exit 127 and a shell's words on stderr, from the agent itself: its own channel, so evidence only."""
    facts = backend.run(_agent(tmp_path, 'echo "bash: my-agent: command not found" >&2; exit 127'))
    v = classify(facts)
    assert (v.outcome, v.reason) == (Outcome.FAILED, None), v
    assert facts.agent_unresolved is None and facts.extra.agent_check is not None
    assert facts.extra.agent_check.status == "ok"
    settled = settle(facts, reward_threshold=1.0, retry=RetryPolicy(max_retries=3), finished_before=0, secrets=[])
    assert settled.final and settled.facts.extra.agent_not_found is not None
    assert settled.facts.extra.agent_not_found.exit_code == 127


@pytest.mark.parametrize("isolation", ["sandbox", "none"])
def test_an_honest_tree_skips_the_sanitiser_script_and_a_link_still_runs_it(tmp_path: Path, isolation: str) -> None:
    """The host walk (issue 32) answers for a tree holding nothing to judge; a link in it brings the script back,
    which removes a link into the tests and the verifier never reads them through it."""
    # A work root of its own: by default every LocalBackend of a process shares /tmp/headroom-<pid>, and closing
    # this one would remove the module's backend's from under the tests that follow.
    b = LocalBackend(enforcement="rlimit", isolation=isolation, run_name=f"headroom-seq-{uuid.uuid4().hex[:12]}")  # type: ignore[arg-type]
    try:
        honest = b.run(_launch(tmp_path / "honest", 'mkdir -p "$HEADROOM_WORKDIR/d" && touch "$HEADROOM_WORKDIR/out"'))
        assert classify(honest).outcome is Outcome.PASSED, (honest.agent, honest.agent_fault)
        assert honest.extra.sanitiser is not None and honest.extra.sanitiser.status == "ok"
        assert honest.extra.sanitiser.detail == sanitiser.QUICK_DETAIL
        linked = b.run(
            _launch(
                tmp_path / "linked",
                'touch "$HEADROOM_WORKDIR/out" && ln -s "$HEADROOM_TASK_DIR/tests/test.sh" "$HEADROOM_WORKDIR/peek"',
            )
        )
        san = linked.extra.sanitiser
        assert san is not None and san.status == "ok" and san.detail is None, san
        assert san.links_removed == 1 and linked.extra.verifier_only_links_removed == 1
        assert classify(linked).outcome is Outcome.PASSED
    finally:
        b.close()


def _lose_the_sanitisers_output(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """A runtime that loses a step's output (a CPU-starved Docker daemon closed the sanitiser's exec stream without
    its verdict, once in a suite run) cannot be made to on demand: the real runner runs the real script in its
    sandbox, and its output is then dropped. Returns the exit codes of the runs whose output was dropped."""
    real = LocalRunner.run
    dropped: list[int | None] = []

    def run(self: LocalRunner, argv: list[str], **kw: object) -> StepFacts:
        facts = real(self, argv, **kw)  # type: ignore[arg-type]
        if kw["name"] == phases.Phase.SANITISE:
            dropped.append(facts.exit_code)
            return facts.model_copy(update={"stdout_tail": ""})
        return facts

    monkeypatch.setattr(LocalRunner, "run", run)
    return dropped


def test_a_sanitiser_verdict_lost_on_its_way_is_the_runtimes_failure_never_the_agents(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dropped = _lose_the_sanitisers_output(monkeypatch)
    # a link into the tests, so the script runs (an honest tree gets the host walk's verdict) and has work to do
    agent = 'touch "$HEADROOM_WORKDIR/out" && ln -s "$HEADROOM_TASK_DIR/tests/test.sh" "$HEADROOM_WORKDIR/peek"'
    facts = backend.run(_launch(tmp_path, agent))
    assert dropped == [0]  # the script finished cleanly, its verdict written: only the output was lost
    v = classify(facts)
    assert (v.outcome, v.reason) == (Outcome.INFRA_ERROR, InfraReason.API_ERROR), (facts.agent_fault, v)
    assert facts.agent_fault is None and facts.verifier is None  # the verifier never ran on an unjudged tree
    assert facts.infra_detail is not None and "sanitiser" in facts.infra_detail
    assert facts.extra.sanitiser is not None and facts.extra.sanitiser.status == "crashed"
