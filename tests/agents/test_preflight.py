"""An agent that cannot start is refused before the sweep (checked for real where it runs), and one that turns out
not to start during the run keeps the evidence (extra.agent_not_found) while the verifier's verdict stands: the
agent writes its own exit code, so 126/127 cannot be a verdict."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine import preflight
from orchestrator.engine.classify import agent_not_found, classify
from orchestrator.engine.launch import build_launch
from orchestrator.errors import SpecError
from orchestrator.spec.experiment import AgentSpec, Experiment
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.outcome import HarnessReason, Outcome
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.trial import Trial
from orchestrator.tasks.loader import load_tasks
from tests.cli_run import headroom as run_cli
from tests.hostile.harness import requires_sandbox
from tests.taskfactory import write_task


@pytest.mark.parametrize(
    "command, why",
    [
        ("/nonexistent/my-agent.sh --task x", "agent command not found: /nonexistent/my-agent.sh"),
        ("OPENAI_MODEL=x python3 /nope/agent.py --model m", "agent script not found: /nope/agent.py"),
        ("bash -x ./missing.sh", "agent script not found: ./missing.sh"),
        ("env FOO=1 exec /nope/agent; echo done", "agent command not found: /nope/agent"),
        ("/nope/agent&& echo done", "agent command not found: /nope/agent"),
        # bash's own words for the error (shlex cannot split this one; bash -n says why it is not a command)
        ("echo 'unterminated", r"not valid bash \(line 1: unexpected EOF while looking for matching"),
        ("echo hi; (", r"not valid bash \(line 2: syntax error: unexpected end of file\)"),
        ("python3 -u /nope/agent.py", "agent script not found: /nope/agent.py"),  # an option without an argument first
        ("no-such-agent-9 --go", "agent command not found: no-such-agent-9: command not found on the agent's PATH"),
    ],
)
def test_the_host_probe_refuses_a_command_that_cannot_start(command: str, why: str) -> None:
    with pytest.raises(SpecError, match=why):
        preflight.check_on_host(command)


@pytest.mark.parametrize(
    "command",
    [
        "python3 -c 'print(1)'",
        "bash -c 'exit 3'",
        "X=1 env true",
        "python3 $HEADROOM_TASK_DIR/agent.py",
        f"{sys.executable} -m orchestrator --help",
        # the first program ends at an operator; what the shell expands is the trial's
        "true; echo done",
        "true&&echo done",
        "env -i true",
        "python3 ./agent*.py",
        "( cd /tmp && ./run.sh )",
        # valid bash that shlex cannot split: not checked, never refused for it
        "echo $'it\\'s' && true",
        # quoting shlex does not show ('$X', "~"), a PATH the program is looked up
        # on, a redirection first, an option that may take an argument: unchecked
        "'$HOME/nope' --go",
        '"~/nope"',
        "PATH=/nope:$PATH nope-agent",
        "2>/dev/null /nope/agent",
        "exec -a name /nope/agent",
        "python3 -W ignore /nope/agent.py",
        "node --require x /nope/agent.js",
    ],
)
def test_the_host_probe_passes_a_command_that_starts(command: str) -> None:
    preflight.check_on_host(command)  # what the command then does is the agent's business


def test_the_host_check_expands_home_and_variables_as_the_agents_shell_will(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An external agent gets this host's HOME and PATH: `~` and `$HOME` mean there what they mean to it. A variable
    only its try sets (`$HEADROOM_TASK_DIR`) is not known before the sweep: that word is not checked."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for command in ("~/bin/agent --go", '"$HOME/bin/agent" --go', "python3 ~/bin/agent"):
        with pytest.raises(SpecError, match=f"not found: {tmp_path}/bin/agent"):
            preflight.check_on_host(command)
    _script(tmp_path / "bin" / "agent", "#!/bin/sh\n")
    for command in ("~/bin/agent --go", '"$HOME/bin/agent" --go', "python3 ~/bin/agent"):
        assert preflight.check_on_host(command) is None  # checked, and it starts
    assert "not checked" in (preflight.check_on_host("$HEADROOM_TASK_DIR/agent --go") or "")
    assert "not checked" in (preflight.check_on_host("$(which agent)") or "")
    # the agent's own variables (the task's env) are the ones the host check expands
    with pytest.raises(SpecError, match="agent command not found: /srv/none/agent: no such file"):
        preflight.check_on_host("$AGENT_HOME/agent", preflight.host_env({"AGENT_HOME": "/srv/none"}))


def _script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    "name, text, mode, why",
    [
        # the shell would say "Permission denied" (126): not "not found"
        ("agent.sh", "#!/bin/sh\necho hi\n", 0o644, "the agent command is not executable: ./agent.sh"),
        (
            "agent.py",
            "#!/nonexistent/python9\nprint(1)\n",
            0o755,
            r"interpreter is missing: #!/nonexistent/python9 \(in ./agent.py\)",
        ),
        (
            "agent.py",
            "#!/usr/bin/env no-such-python9\nprint(1)\n",
            0o755,
            "interpreter is not on the PATH: no-such-python9",
        ),
        # without -S the kernel hands env "python3 -u" as one word, which env cannot find
        ("agent.py", "#!/usr/bin/env python3 -u\nprint(1)\n", 0o755, "interpreter is not on the PATH: python3 -u"),
        ("agent.sh", "#!/bin/sh\r\necho hi\r\n", 0o755, "carriage return"),
    ],
)
def test_the_host_probe_refuses_a_program_the_kernel_would_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, mode: int, why: str
) -> None:
    _script(tmp_path / name, text, mode)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=why):
        preflight.check_on_host(f"./{name} --task x")
    # and the shell agrees that it would not start (126: cannot execute, 127: not found)
    assert subprocess.run(["bash", "-c", f"./{name}"], capture_output=True).returncode in (126, 127)


def test_a_program_on_the_path_whose_interpreter_is_gone_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a console script left behind by a deleted venv: found on the PATH, cannot start
    _script(tmp_path / "bin" / "my-agent", "#!/tmp/deleted-venv/bin/python\nimport sys\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(SpecError, match=r"interpreter is missing: #!/tmp/deleted-venv/bin/python \(in my-agent\)"):
        preflight.check_on_host("my-agent --task x")


@pytest.mark.parametrize(
    "text",
    [
        "#!/bin/sh\necho hi\n",
        "#!/usr/bin/env python3\nprint(1)\n",
        "#!/usr/bin/env -S python3 -u\nprint(1)\n",
        "echo no shebang: the shell runs it\n",
    ],
)
def test_the_host_probe_passes_a_script_that_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    _script(tmp_path / "agent", text)
    monkeypatch.chdir(tmp_path)
    preflight.check_on_host("./agent --go")
    assert subprocess.run(["bash", "-c", "./agent"], capture_output=True).returncode == 0


def _sweep(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "sweep",
        str(tmp_path / "tasks"),
        "--multipliers",
        "3",
        "--attempts",
        "2",
        "--store",
        str(tmp_path / "h.db"),
        "--no-canary",
        "--format",
        "none",
        *args,
    )


def test_a_sweep_whose_agent_path_does_not_exist_is_refused_in_a_real_trial_environment(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    res = _sweep(tmp_path, "--agent", "command", "--agent-command", '/home/me/my-agent.sh --task "$HEADROOM_TASK_ID"')
    assert res.returncode == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "error: agent.command: agent command not found: /home/me/my-agent.sh: no such file (checked in a local"
    )
    assert "Traceback" not in res.stderr
    if (tmp_path / "h.db").exists():  # nothing was written: no run
        db = sqlite3.connect(tmp_path / "h.db")
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        db.close()


@pytest.mark.parametrize(
    "text, mode, why",
    [
        ('#!/bin/sh\ntouch "$HEADROOM_WORKDIR/out"\n', 0o644, "the agent command is not executable: /agent/run.sh"),
        ("#!/usr/bin/python9\n", 0o755, r"interpreter is missing: #!/usr/bin/python9 \(in /agent/run.sh\)"),
    ],
)
def test_an_installed_agent_that_cannot_start_is_refused_in_a_real_trial_environment(
    tmp_path: Path, text: str, mode: int, why: str
) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    _script(tmp_path / "my-agent" / "run.sh", text, mode)
    res = _sweep(
        tmp_path,
        "--experiment",
        str(_experiment(tmp_path, {"kind": "command", "command": "/agent/run.sh", "path": str(tmp_path / "my-agent")})),
    )
    assert res.returncode == 2, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert re.search(why, last) and "(checked in a local trial environment of task t)" in last, last


def test_an_installed_agent_that_starts_passes_the_probe_and_runs(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    _script(tmp_path / "my-agent" / "run.sh", '#!/usr/bin/env bash\ntouch "$HEADROOM_WORKDIR/out"\n')
    res = _sweep(
        tmp_path,
        "--experiment",
        str(_experiment(tmp_path, {"kind": "command", "command": "/agent/run.sh", "path": str(tmp_path / "my-agent")})),
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    assert [o for (o,) in db.execute("SELECT outcome FROM executions")] == ["passed"] * 2
    db.close()


def _experiment(tmp_path: Path, agent: dict) -> Path:
    spec = tmp_path / "exp.yaml"
    spec.write_text(yaml.safe_dump({"tasks_dir": str(tmp_path / "tasks"), "agent": agent}))
    return spec


def test_an_external_agent_is_probed_on_the_host(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    res = _sweep(tmp_path, "--agent", "external", "--agent-command", "python3 ./my_agent.py")
    assert res.returncode == 2 and "agent script not found: ./my_agent.py (checked on this host" in res.stderr


def test_an_agent_that_is_not_found_during_the_run_keeps_the_evidence_and_the_verifiers_verdict(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    res = _sweep(tmp_path, "--agent", "command", "--agent-command", "true && my-missing-tool --go")
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    rows = db.execute(
        "SELECT e.outcome, e.reason, v.json FROM executions e JOIN evidence v USING (run_id, trial_id)"
    ).fetchall()
    # the task's verifier checks the answer, which the missing tool never wrote: the agent's failure, not an
    # error a score leaves out (the agent writes its exit code; issue 19's verdict channels)
    assert [o for o, _, _ in rows] == ["failed"] * 2
    ev = json.loads(rows[0][2])["extra"]["agent_not_found"]
    assert ev["exit_code"] == 127 and "my-missing-tool" in ev["evidence"]
    db.close()


def _facts(agent: StepFacts) -> TrialFacts:
    return TrialFacts(
        enforcement="cgroup-v2",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="Burstable",
        agent=agent,
        verifier=StepFacts(name="verifier", exit_code=0),
        reward=1.0,
    )


@pytest.mark.parametrize("code", [126, 127])
@pytest.mark.parametrize(("reward", "outcome"), [(1.0, Outcome.PASSED), (0.0, Outcome.FAILED)])
def test_exit_126_and_127_leave_the_verdict_to_the_verifier(code: int, reward: float, outcome: Outcome) -> None:
    # a forged "command not found" must not turn a failure into a harness error (nor hide a pass)
    facts = _facts(StepFacts(name="agent", exit_code=code)).model_copy(update={"reward": reward})
    assert classify(facts).outcome is outcome
    assert agent_not_found(facts.agent)  # kept as evidence by settle


@pytest.mark.parametrize(
    "agent",
    [StepFacts(name="agent", exit_code=1), StepFacts(name="agent", exit_code=128), StepFacts(name="agent", signal=9)],
)
def test_other_agent_exits_leave_the_verdict_to_the_verifier(agent: StepFacts) -> None:
    assert classify(_facts(agent)).outcome is Outcome.PASSED


# -- the preflight and every try ask one question ---------------------------------------------------------------------

#: Files of an agent directory (mounted at /agent in the trial's environment): name -> (content, mode).
AGENT_FILES = {
    "ok.sh": ('#!/bin/sh\ntouch "$HEADROOM_WORKDIR/out"\n', 0o755),
    "no-shebang": ('touch "$HEADROOM_WORKDIR/out"\n', 0o755),
    "split.sh": ('#!/usr/bin/env -S sh -e\ntouch "$HEADROOM_WORKDIR/out"\n', 0o755),
    "noexec.sh": ("#!/bin/sh\n", 0o644),
    "gone-interp": ("#!/opt/deleted-venv/bin/python\n", 0o755),
    "env-name": ("#!/usr/bin/env no-such-python9\n", 0o755),
    "env-one-word": ("#!/usr/bin/env sh -e\n", 0o755),  # the kernel hands env "sh -e" as one word
    "crlf.sh": ("#!/bin/sh\r\ntrue\r\n", 0o755),
    "no-interp": ("#!\n", 0o755),
    "agent.py": ("import os\nopen(os.environ['HEADROOM_WORKDIR'] + '/out', 'w')\n", 0o644),
}

#: command -> refused (by the preflight before the sweep, and as harness_error(agent_not_found) in every try).
AGREEMENT = {
    "/agent/ok.sh --go": False,
    "/agent/no-shebang": False,
    "/agent/split.sh": False,
    "X=1 exec env nohup /agent/ok.sh": False,
    "cd /agent && ./missing": False,  # only the first simple command: `cd` resolves
    "true; no-such-agent-9": False,
    "/agent/missing --go": True,
    "/agent": True,  # a folder
    "/agent/noexec.sh": True,
    "/agent/gone-interp": True,
    "/agent/env-name": True,
    "/agent/env-one-word": True,
    "/agent/crlf.sh": True,
    "/agent/no-interp": True,
    "no-such-agent-9 --go": True,
    "X=1 exec env nohup /agent/missing": True,
    '"$HEADROOM_AGENT_DIR/missing"': True,  # a variable of the try, expanded in the environment
    "~/missing": True,  # the try's HOME
    "$NO_SUCH_VARIABLE/missing": False,  # not set there: unchecked, the agent runs
    # only known by running the shell: unchecked in both, never refused
    "env -i /agent/missing": False,
    "exec -a name /agent/missing": False,
    "PATH=/agent:$PATH ok.sh": False,
    "2>/dev/null /agent/missing": False,
    "/agent/mis*": False,
    "'$HOME/missing'": False,
    '"~/missing"': False,
    "$(echo /agent/missing)": False,
    "( /agent/missing )": False,
    # an interpreter's script: it must exist (its mode is the interpreter's business), in the preflight and the try
    "python3 /agent/agent.py --go": False,
    "sh /agent/noexec.sh": False,
    "python3 /agent/missing.py": True,
    "python3 -u /agent/missing.py --go": True,
    "sh /agent/missing.sh": True,
    "X=1 exec bash -x /agent/missing.sh": True,
    'python3 "$HEADROOM_AGENT_DIR/missing.py"': True,  # expanded in the environment
    "python3 $NO_SUCH_VARIABLE/missing.py": False,  # not set there: unchecked
    "python3 -W ignore /agent/missing.py": False,  # an option that may take an argument: unchecked
}


@pytest.fixture(scope="module")
def local_backend() -> Iterator[LocalBackend]:
    b = LocalBackend(enforcement="rlimit", isolation="sandbox")
    yield b
    b.close()


@requires_sandbox
@pytest.mark.parametrize("command", sorted(AGREEMENT))
def test_the_preflight_and_every_try_agree_on_whether_the_agent_can_start(
    local_backend: LocalBackend, tmp_path: Path, command: str
) -> None:
    """One parser and one check script: the sweep's preflight (one probe try in the trial environment) refuses
    exactly the commands for which a try's own agent_check phase gives harness_error(agent_not_found), with the
    same words, an interpreter's missing script (``python3 /agent/missing.py``) included. (The preflight also
    refuses a command that is not valid bash: tests above.)"""
    for name, (text, mode) in AGENT_FILES.items():
        _script(tmp_path / "agent" / name, text, mode)
    write_task(tmp_path / "tasks", "t", solve="true\n")
    [task] = load_tasks(tmp_path / "tasks")
    exp = Experiment(
        tasks_dir=str(tmp_path / "tasks"),
        agent=AgentSpec(kind="command", command=command, path=str(tmp_path / "agent")),
    )
    trial = Trial(trial_id="t-1", task_id="t", config=ResourceConfig.parse("unbounded"), attempt=0, seed=1, order=0)

    facts = local_backend.run(build_launch("r", trial, 0, task, exp))  # a try of the sweep, as the engine runs it
    in_try = classify(facts).reason is HarnessReason.AGENT_NOT_FOUND
    check = facts.extra.agent_check
    assert check is None or check.status != "not_found" or in_try, check

    refusal = None
    try:
        preflight.check_in_environment(local_backend, preflight.probe_launch(exp, trial, task), command)
    except SpecError as exc:
        refusal = str(exc)
    assert (refusal is not None, in_try) == (AGREEMENT[command],) * 2, (refusal, facts.agent_unresolved)
    if in_try:  # and in the same words
        assert facts.agent_unresolved and facts.agent_unresolved in (refusal or ""), (facts.agent_unresolved, refusal)


def test_a_program_only_known_by_running_the_command_is_not_refused_and_the_run_says_so(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    res = _sweep(tmp_path, "--agent", "command", "--agent-command", '$(echo touch) "$HEADROOM_WORKDIR/out"')
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    [(prov,)] = db.execute("SELECT json FROM provenance").fetchall()
    assert [o for (o,) in db.execute("SELECT outcome FROM executions")] == ["passed"] * 2
    db.close()
    checked = json.loads(prov)["agent_preflight"]
    assert checked["where"] == "local" and checked["checked"] is False
    assert checked["note"] == "the agent command's program is only known by running it: not checked"
