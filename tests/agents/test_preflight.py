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
from pathlib import Path

import pytest
import yaml

from orchestrator.agents import preflight
from orchestrator.classify import agent_not_found, classify
from orchestrator.errors import SpecError
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.outcome import Outcome
from tests.taskfactory import write_task


@pytest.mark.parametrize("command, why", [
    ("/nonexistent/my-agent.sh --task x", "agent command not found: /nonexistent/my-agent.sh"),
    ("OPENAI_MODEL=x python3 /nope/agent.py --model m", "agent script not found: /nope/agent.py"),
    ("bash -x ./missing.sh", "agent script not found: ./missing.sh"),
    ("env FOO=1 exec /nope/agent; echo done", "agent command not found: /nope/agent"),
    ("/nope/agent&& echo done", "agent command not found: /nope/agent"),
    ("echo 'unterminated", "cannot be parsed"),
    ("echo hi; (", "not valid bash"),
])
def test_the_host_probe_refuses_a_command_that_cannot_start(command: str, why: str) -> None:
    with pytest.raises(SpecError, match=why):
        preflight.check_on_host(command)


@pytest.mark.parametrize("command", ["python3 -c 'print(1)'", "bash -c 'exit 3'", "X=1 env true",
                                     "python3 $HEADROOM_TASK_DIR/agent.py", f"{sys.executable} -m orchestrator --help",
                                     # the first program ends at an operator; what the shell expands is the trial's
                                     "true; echo done", "true&&echo done", "env -i true", "~/bin/agent --go",
                                     "python3 ./agent*.py", "( cd /tmp && ./run.sh )"])
def test_the_host_probe_passes_a_command_that_starts(command: str) -> None:
    preflight.check_on_host(command)  # what the command then does is the agent's business


def _script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    path.chmod(mode)
    return path


@pytest.mark.parametrize("name, text, mode, why", [
    # the shell would say "Permission denied" (126): not "not found"
    ("agent.sh", "#!/bin/sh\necho hi\n", 0o644, "the agent command is not executable: ./agent.sh"),
    ("agent.py", "#!/nonexistent/python9\nprint(1)\n", 0o755,
     r"interpreter is missing: #!/nonexistent/python9 \(in ./agent.py\)"),
    ("agent.py", "#!/usr/bin/env no-such-python9\nprint(1)\n", 0o755,
     "interpreter is not on the PATH: no-such-python9"),
    # without -S the kernel hands env "python3 -u" as one word, which env cannot find
    ("agent.py", "#!/usr/bin/env python3 -u\nprint(1)\n", 0o755, "interpreter is not on the PATH: python3 -u"),
    ("agent.sh", "#!/bin/sh\r\necho hi\r\n", 0o755, "carriage return"),
])
def test_the_host_probe_refuses_a_program_the_kernel_would_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    name: str, text: str, mode: int, why: str) -> None:
    _script(tmp_path / name, text, mode)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=why):
        preflight.check_on_host(f"./{name} --task x")
    # and the shell agrees that it would not start (126: cannot execute, 127: not found)
    assert subprocess.run(["bash", "-c", f"./{name}"], capture_output=True).returncode in (126, 127)


def test_a_program_on_the_path_whose_interpreter_is_gone_is_refused(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # a console script left behind by a deleted venv: found on the PATH, cannot start
    _script(tmp_path / "bin" / "my-agent", "#!/tmp/deleted-venv/bin/python\nimport sys\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(SpecError, match=r"interpreter is missing: #!/tmp/deleted-venv/bin/python \(in my-agent\)"):
        preflight.check_on_host("my-agent --task x")


@pytest.mark.parametrize("text", ["#!/bin/sh\necho hi\n", "#!/usr/bin/env python3\nprint(1)\n",
                                  "#!/usr/bin/env -S python3 -u\nprint(1)\n", "echo no shebang: the shell runs it\n"])
def test_the_host_probe_passes_a_script_that_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    text: str) -> None:
    _script(tmp_path / "agent", text)
    monkeypatch.chdir(tmp_path)
    preflight.check_on_host("./agent --go")
    assert subprocess.run(["bash", "-c", "./agent"], capture_output=True).returncode == 0


def _sweep(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", "sweep", str(tmp_path / "tasks"), "--multipliers", "3",
                           "--attempts", "2", "--store", str(tmp_path / "h.db"), "--no-canary", "--format", "none",
                           *args], capture_output=True, text=True, timeout=300)


def test_a_sweep_whose_agent_path_does_not_exist_is_refused_in_a_real_trial_environment(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    res = _sweep(tmp_path, "--agent", "command", "--agent-command", "/home/me/my-agent.sh --task \"$HEADROOM_TASK_ID\"")
    assert res.returncode == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: agent.command: agent command not found: /home/me/my-agent.sh (checked in a local")
    assert "Traceback" not in res.stderr
    if (tmp_path / "h.db").exists():  # nothing was written: no run
        db = sqlite3.connect(tmp_path / "h.db")
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        db.close()


@pytest.mark.parametrize("text, mode, why", [
    ("#!/bin/sh\ntouch \"$HEADROOM_WORKDIR/out\"\n", 0o644, "the agent command is not executable: /agent/run.sh"),
    ("#!/usr/bin/python9\n", 0o755, r"interpreter is missing: #!/usr/bin/python9 \(in /agent/run.sh\)"),
])
def test_an_installed_agent_that_cannot_start_is_refused_in_a_real_trial_environment(
        tmp_path: Path, text: str, mode: int, why: str) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    _script(tmp_path / "my-agent" / "run.sh", text, mode)
    res = _sweep(tmp_path, "--experiment", str(_experiment(tmp_path, {
        "kind": "command", "command": "/agent/run.sh", "path": str(tmp_path / "my-agent")})))
    assert res.returncode == 2, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert re.search(why, last) and "(checked in a local trial environment of task t)" in last, last


def test_an_installed_agent_that_starts_passes_the_probe_and_runs(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    _script(tmp_path / "my-agent" / "run.sh", "#!/usr/bin/env bash\ntouch \"$HEADROOM_WORKDIR/out\"\n")
    res = _sweep(tmp_path, "--experiment", str(_experiment(tmp_path, {
        "kind": "command", "command": "/agent/run.sh", "path": str(tmp_path / "my-agent")})))
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
    rows = db.execute("SELECT e.outcome, e.reason, v.json FROM executions e JOIN evidence v "
                      "USING (run_id, trial_id)").fetchall()
    # the task's verifier checks the answer, which the missing tool never wrote: the agent's failure, not an
    # error a score leaves out (the agent writes its exit code; issue 19's verdict channels)
    assert [o for o, _, _ in rows] == ["failed"] * 2
    ev = json.loads(rows[0][2])["extra"]["agent_not_found"]
    assert ev["exit_code"] == 127 and "my-missing-tool" in ev["evidence"]
    db.close()


def _facts(agent: StepFacts) -> TrialFacts:
    return TrialFacts(enforcement="cgroup-v2", request_cpus=1, request_memory_bytes=1, limit_cpus=None,
                      limit_memory_bytes=None, qos_class="Burstable", agent=agent,
                      verifier=StepFacts(name="verifier", exit_code=0), reward=1.0)


@pytest.mark.parametrize("code", [126, 127])
@pytest.mark.parametrize(("reward", "outcome"), [(1.0, Outcome.PASSED), (0.0, Outcome.FAILED)])
def test_exit_126_and_127_leave_the_verdict_to_the_verifier(code: int, reward: float, outcome: Outcome) -> None:
    # a forged "command not found" must not turn a failure into a harness error (nor hide a pass)
    facts = _facts(StepFacts(name="agent", exit_code=code)).model_copy(update={"reward": reward})
    assert classify(facts).outcome is outcome
    assert agent_not_found(facts.agent)  # kept as evidence by settle


@pytest.mark.parametrize("agent", [StepFacts(name="agent", exit_code=1), StepFacts(name="agent", exit_code=128),
                                   StepFacts(name="agent", signal=9)])
def test_other_agent_exits_leave_the_verdict_to_the_verifier(agent: StepFacts) -> None:
    assert classify(_facts(agent)).outcome is Outcome.PASSED
