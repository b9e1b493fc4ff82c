"""Verdicts decided by channel (classify, settle): pure functions, no sandbox.

* a verifier that ran on the agent's state and left no usable reward is the agent's failure, however it ended;
* a golden task's answer that is missing or not text is the agent's failure;
* ``agent_not_found`` comes only from headroom's own check (``agent_unresolved``), never from the agent's exit code;
* the check's program word and its answer are read conservatively: what cannot be told runs unchecked.
"""

from __future__ import annotations

import pytest

from orchestrator.contract import agent_check
from orchestrator.engine.classify import classify
from orchestrator.engine.settle import settle
from orchestrator.spec.experiment import RetryPolicy
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.grader import GoldenGrader
from orchestrator.spec.outcome import HarnessReason, ModelReason, Outcome

RETRY = RetryPolicy(max_retries=3)


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


def test_a_verifier_that_ran_on_the_agents_state_and_left_no_usable_reward_is_the_agents_failure() -> None:
    """Rule 6 of classify: exit 0 without a reward, or a malformed one, is no different from a crash once the verifier
    has read the agent's state (an answer that makes it raise inside `|| true`)."""
    clean = StepFacts(name="verifier", exit_code=0)
    for kw in ({}, {"reward_error": "malformed: abc"}, {"reward_error": "missing: no reward.txt or reward.json"}):
        v = classify(_facts(verifier=clean, verifier_on_agent_state=True, **kw))
        assert (v.outcome, v.reason) == (Outcome.FAILED, ModelReason.VERIFIER_BROKEN), kw
    # the same facts from a verifier never given the agent's state stay the harness's
    assert classify(_facts(verifier=clean)).reason is HarnessReason.REWARD_MISSING
    assert classify(_facts(verifier=clean, reward_error="malformed: abc")).reason is HarnessReason.REWARD_MALFORMED
    assert classify(_facts(verifier=clean, verifier_on_agent_state=True, reward=0.0)).outcome is Outcome.FAILED
    assert classify(_facts(verifier=clean, verifier_on_agent_state=True, reward=1.0)).outcome is Outcome.PASSED
    # a verifier that could not be spawned is headroom's, whatever the agent left
    spawn = StepFacts(name="verifier", spawn_error="ENOENT")
    assert classify(_facts(verifier=spawn, verifier_on_agent_state=True)).reason is HarnessReason.VERIFIER_CRASHED


@pytest.mark.parametrize("result", [{}, {"answer": None}, {"answer": 42}, {"answer": ["a"]}, {"answer": {"x": 1}}])
def test_a_golden_answer_missing_or_not_text_is_the_agents_failure(result: dict[str, object]) -> None:
    golden = _facts(
        verifier=StepFacts(name="verifier", skipped="no tests/: a golden task, its grader decides"), agent_result=result
    )
    s = settle(
        golden, reward_threshold=1.0, retry=RETRY, finished_before=0, secrets=[], grader=GoldenGrader(exact="42")
    )
    assert (s.verdict.outcome, s.verdict.reason) == (Outcome.FAILED, ModelReason.NO_ANSWER), s.verdict
    assert s.final and s.facts.reward is None and s.facts.reward_error
    ok = settle(
        golden.model_copy(update={"agent_result": {"answer": "42"}}),
        reward_threshold=1.0,
        retry=RETRY,
        finished_before=0,
        secrets=[],
        grader=GoldenGrader(exact="42"),
    )
    assert ok.verdict.outcome is Outcome.PASSED


def test_agent_not_found_comes_only_from_headrooms_check() -> None:
    forged = StepFacts(name="agent", exit_code=127, stderr_tail="bash: my-agent: command not found\n")
    v = classify(
        _facts(agent=forged, verifier=StepFacts(name="verifier", exit_code=0), reward=0.0, verifier_on_agent_state=True)
    )
    assert (v.outcome, v.reason) == (Outcome.FAILED, None)
    checked = _facts(agent=StepFacts(name="agent", skipped="agent_not_found: x"), agent_unresolved="x: not found")
    assert classify(checked).reason is HarnessReason.AGENT_NOT_FOUND
    # a golden grader never turns headroom's finding into the agent's failure
    s = settle(
        checked, reward_threshold=1.0, retry=RETRY, finished_before=0, secrets=[], grader=GoldenGrader(exact="42")
    )
    assert (s.verdict.outcome, s.verdict.reason) == (Outcome.HARNESS_ERROR, HarnessReason.AGENT_NOT_FOUND)
    assert s.final  # not an infra reason: never retried


@pytest.mark.parametrize(
    ("command", "word"),
    [
        ("my-agent --task x", "my-agent"),
        ("/opt/a/run.sh; touch x", "/opt/a/run.sh"),
        ('X=1 Y="a b" env python3 -c "x"', "python3"),
        ("exec nohup ~/run.sh", "~/run.sh"),
        ('"$HOME/bin/tool" && x', "$HOME/bin/tool"),
        ('"/opt/a b/run"', "/opt/a b/run"),
        ("cd /app && make", "cd"),
        ("$(echo true) && x", None),  # only known by running it
        ("`which x`", None),
        ("(cd a && b)", None),
        ("${X:-/bin/true}", None),  # an expansion with a default: not expanded by the check
        ("env -i x", None),
        ("'unterminated", None),
        ("", None),
        # what only the trial's shell knows: left unchecked, never refused
        ("./agent-*.sh --go", None),  # a glob
        ("./ag{1,2}", None),  # a brace expansion
        ("'$HOME/run.sh'", None),  # quoted: literal to the shell, which shlex does not show
        ('"~/run.sh"', None),
        ('"$HOME"/run.sh', "$HOME/run.sh"),  # a `$` in double quotes is expanded
        ("PATH=/opt/bin:$PATH my-agent", None),  # bash looks the program up on that PATH
        ("exec -a name ./run.sh", None),  # options to a wrapper
        ("2>/dev/null ./run.sh", None),  # a redirection first
    ],
)
def test_the_program_word(command: str, word: str | None) -> None:
    t = agent_check.target(command)
    assert (t.program if t else None) == word


@pytest.mark.parametrize(
    ("command", "script"),
    [
        ("python3 agent.py --go", "agent.py"),
        ("OPENAI_MODEL=x python3 -u -B $HEADROOM_TASK_DIR/agent.py", "$HEADROOM_TASK_DIR/agent.py"),
        ("bash -ex ./run.sh", "./run.sh"),
        ("node -- x.js", "x.js"),
        ("python3 -m agent", None),  # a module, code, stdin: no script file
        ("bash -c 'x'", None),
        ("python3 -W ignore x.py", None),  # an option that takes an argument: the script cannot be told
        ("node --require r x.js", None),
        ("python3 ./agent*.py", None),
        ("./run.sh x.py", None),  # not an interpreter
    ],
)
def test_the_interpreters_script(command: str, script: str | None) -> None:
    t = agent_check.target(command)
    assert t is not None and t.script == script


def test_only_the_checks_own_not_found_stops_the_agent() -> None:
    assert agent_check.parse(
        "agent_check=not_found\nagent_check_detail=/x: no such file\n", exit_code=0, timed_out=False, spawn_error=None
    ) == agent_check.Check("not_found", "/x: no such file")
    for out, code, timed_out, spawn in (
        ("agent_check=not_found\n", 0, True, None),
        ("agent_check=not_found\n", 0, False, "ENOENT"),
        ("agent_check=not_found\n", 2, False, None),
        ("", 0, False, None),
        ("agent_check=maybe\n", 0, False, None),
    ):
        assert agent_check.parse(out, exit_code=code, timed_out=timed_out, spawn_error=spawn).status == "unchecked"
