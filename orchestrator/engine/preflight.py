"""Before a sweep: can the agent's command start where it will run? Checked once, for real, with the contract's check.

The question is the one every try asks before its agent gets control (the contract's
``agent_check`` phase): the same parser and the same script (:mod:`orchestrator.contract.agent_check`),
so the preflight and the tries cannot disagree about a command. What the preflight adds:

* it asks once, before anything is written, and refuses the sweep with the check's one line
  (exit 2) instead of recording every try as ``harness_error(agent_not_found)``;
* where it asks: a command agent runs inside the trial's environment, so the check runs in one
  real try of the run's first task through the backend itself (the task's image, sandbox, user,
  PATH and variables), whose agent step is the check instead of the agent. An external agent
  runs on the host, in headroom's working directory, with the host's PATH and HOME, so its check
  runs there (a variable only the try sets, such as ``$HEADROOM_TASK_DIR``, leaves a word unchecked);
* the whole command must be valid bash (``bash -n``), which a try does not check before it runs;
* an interpreter's script must exist (``python3 agent.py``: :attr:`.agent_check.Target.script`, which
  the check script takes and a try's phase does not pass);
* an agent with an install phase (which is what provides its program) gets the syntax check only.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.agents.external import HOST_ENV
from orchestrator.backends.base import Backend, recorded
from orchestrator.contract import agent_check
from orchestrator.engine.launch import build_launch, launch_name
from orchestrator.errors import SpecError
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.launch import Launch, StepLaunch
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial

#: How long the in-environment probe may take (an image pull included) before the sweep goes ahead unchecked.
DEADLINE_S = 300.0
PROBE_TIMEOUT_S = 60.0


#: The syntax check (``@COMMAND@``: the command, quoted): bash's own words for the first error, such as
#: ``line 1: unexpected EOF while looking for matching `''``. POSIX sh and built-ins: it may run where bash is not
#: the shell (a Pod runner on ``sh``), and without bash there is nothing to check.
_SYNTAX = r"""if command -v bash >/dev/null 2>&1; then
  if why=$(bash -n -c @COMMAND@ 2>&1 >/dev/null); then echo agent_syntax=ok
  else why=${why#*-c: } nl='
'; printf 'agent_syntax=invalid\nagent_syntax_detail=%s\n' "${why%%"$nl"*}"; fi
fi
"""


def probe_script(command: str, *, resolve: bool = True) -> str:
    """A shell script that prints the contract check's answer for ``command`` (``agent_check=...``) and whether
    the command is valid bash (``agent_syntax=...``). It exits 0: its output is the answer.

    ``resolve=False`` (an agent with an install phase, which is what provides its program): the syntax only."""
    check = ""
    if resolve and (t := agent_check.target(command)) is not None:
        check = shlex.join(agent_check.argv(t.program, "bash", t.script)) + "\n"
    return check + _SYNTAX.replace("@COMMAND@", shlex.quote(command))


@dataclass(frozen=True)
class Answer:
    refusal: str | None = None  # why the command cannot start (one line), or None
    note: str | None = None  # why it was not checked, or None


def _unasked(command: str, resolve: bool) -> str | None:
    """Why the probe of ``command`` asks no program question (the note the run keeps), or None."""
    if not resolve:
        return "the agent's install phase provides its program: only the command's syntax was checked"
    if agent_check.target(command) is None:
        return "the agent command's program is only known by running it: not checked"
    return None


def answer(
    command: str,
    stdout: str,
    *,
    exit_code: int | None,
    timed_out: bool = False,
    spawn_error: str | None = None,
    resolve: bool = True,
) -> Answer:
    """What the probe of ``command`` printed, read as the contract reads its check (:func:`.agent_check.parse`)."""
    syntax = dict(ln.partition("=")[::2] for ln in stdout.splitlines() if ln.startswith("agent_syntax"))
    if syntax.get("agent_syntax") == "invalid" and not (timed_out or spawn_error):
        detail = syntax.get("agent_syntax_detail", "").strip()
        return Answer(f"the agent command is not valid bash{f' ({detail})' if detail else ''}")
    if (why := _unasked(command, resolve)) is not None:
        return Answer(note=why)
    check = agent_check.parse(stdout, exit_code=exit_code, timed_out=timed_out, spawn_error=spawn_error)
    if check.status == "not_found":
        return Answer(check.detail or "the agent command's program does not resolve")
    if check.status == "unchecked":
        return Answer(note=f"the agent command's program was not checked: {check.detail}")
    return Answer()


def host_env(agent_env: dict[str, str] | None = None) -> dict[str, str]:
    """The variables an external agent gets on this host that are known before its try (its secrets left out:
    the check's one line may name a word's value). The try's own paths come later: a word naming one is unchecked."""
    return {**{k: os.environ[k] for k in HOST_ENV if k in os.environ}, **(agent_env or {})}


def check_on_host(
    command: str,
    env: dict[str, str] | None = None,
    *,
    wrap: Callable[[list[str]], list[str]] | None = None,
    cwd: Path | None = None,
    where: str | None = None,
) -> str | None:
    """The external agent's check, on the host where it will run: in its sandbox (``wrap`` makes the argv that
    runs a command there, ``where`` says where that is), else in headroom's working directory. Raises
    :class:`SpecError` when the command cannot start; returns a note when it was not checked."""
    argv = ["/bin/sh", "-c", probe_script(command)]
    try:
        res = subprocess.run(
            wrap(argv) if wrap is not None else argv,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            cwd=cwd or Path.cwd(),
            env=env if env is not None else host_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"cannot check the agent command on this host: {exc}", field="agent.command") from exc
    ans = answer(command, res.stdout, exit_code=res.returncode)
    if ans.refusal is not None:
        raise SpecError(
            f"{ans.refusal} (checked on this host, {where or f'in {Path.cwd()}'}); the sweep was not started",
            field="agent.command",
        )
    return ans.note


#: The size of the preflight's private HOME and /tmp in the external agent's sandbox.
PREFLIGHT_TMPFS_BYTES = 64 * 1024 * 1024


def check_in_host_sandbox(experiment: Experiment, env: dict[str, str]) -> str | None:
    """The external agent's check in the sandbox it will run in (:mod:`.host_sandbox`): the same files, the
    same PATH, the same working directory; None-or-note as :func:`check_on_host`. Unsandboxed (declared
    trusted, no sandbox here): on the host, in headroom's working directory."""
    from orchestrator.agents import host_sandbox as hb
    from orchestrator.errors import SandboxUnavailable
    from orchestrator.isolation import hostenv

    agent = experiment.agent
    assert agent.command is not None
    try:
        box = hb.probe()
    except SandboxUnavailable:
        return check_on_host(agent.command, host_env(env), cwd=Path(agent.path) if agent.path else None)
    with tempfile.TemporaryDirectory(prefix="headroom-preflight-") as tmp:
        binds = [
            hb.Bind(p, p) for p in hb.own_files(agent.command, agent.path, agent.host_paths, os.environ.get("PATH"))
        ]
        # HOME and /tmp as the agent's own sandbox makes them: private tmpfs mounts (small: a check writes little)
        private = [hb.Tmpfs(inside, PREFLIGHT_TMPFS_BYTES) for inside in (hb.HOME, hb.TMP)]
        view = hb.View(
            binds=binds,
            tmpfs=private,
            network=False,
            cwd=str(Path(agent.path).resolve()) if agent.path else str(Path.cwd()),
        )
        # the task's env tables are in ``env``: bwrap and the seccomp opener on the host never get what acts there
        host, inside = hostenv.split({**hb.sandbox_env(os.environ), **env})
        return check_on_host(
            agent.command,
            host,
            wrap=lambda argv: box.argv(view, argv, setenv=inside),
            cwd=Path(tmp),
            where=f"in the agent's sandbox, in {view.cwd}",
        )


def probe_launch(experiment: Experiment, trial: Trial, task: Task) -> Launch:
    """The run's first try as the backend would run it, with the probe as its agent and a verifier that does nothing."""
    assert experiment.agent.command is not None
    run_id = f"preflight-{uuid.uuid4().hex[:8]}"
    base = build_launch(run_id, trial, 0, task, experiment)
    agent = StepLaunch(
        name="agent",
        shell=probe_script(experiment.agent.command, resolve=experiment.agent.install is None),
        env=base.agent.env,
        timeout_s=PROBE_TIMEOUT_S,
    )
    verifier = StepLaunch(name="verifier", shell="true", env=base.agent.env, timeout_s=PROBE_TIMEOUT_S)
    labels = {**base.labels, "headroom.dev/task": "preflight"}
    return base.model_copy(
        update={
            "agent": agent,
            "verifier": verifier,
            "labels": labels,
            "agent_kind": "command",
            "agent_setup": None,
            "name": launch_name(run_id, trial.trial_id, 0),
            "spec_digest": "headroom-preflight",
        }
    )


def check_in_environment(
    backend: Backend, launch: Launch, command: str, *, resolve: bool = True, deadline_s: float = DEADLINE_S
) -> str | None:
    """Run the probe try (:func:`probe_launch`) of ``command``; raise :class:`SpecError` if the command would not
    start. Returns a note when it was not checked (the probe itself could not run, or the program is only known by
    running it): the sweep goes ahead."""
    handle = backend.submit(launch)
    end = time.monotonic() + deadline_s
    facts = None
    while facts is None and time.monotonic() < end:
        backend.wait([handle], 0.2)
        facts = backend.observe(handle)
    if facts is None:
        backend.cancel(handle)
        return f"the agent-command probe gave no result within {deadline_s:.0f} s: not checked"
    recorded(backend, handle)
    a = facts.agent
    if a is None or a.skipped or a.spawn_error or facts.setup_error or facts.infra_hint is not None:
        why = (a and (a.spawn_error or a.skipped)) or facts.setup_error or facts.infra_detail or "no agent step"
        return f"the agent-command probe could not run ({why}): not checked"
    ans = answer(command, a.stdout_tail, exit_code=a.exit_code, timed_out=a.timed_out, resolve=resolve)
    if ans.refusal is not None:
        raise SpecError(
            f"{ans.refusal} (checked in a {backend.name} trial environment of task {launch.task_id}); "
            "the sweep was not started",
            field="agent.command",
        )
    return ans.note


def gateway_problem(experiment: Experiment) -> str | None:
    """Why the agent could not reach the run's model gateway, in one line, or None.

    The gateway listens on this host's loopback. An external agent runs on the host; a command agent runs inside
    the environment, which shares the host's loopback only on the local backend with the agent's network (the
    sandbox then joins the host's network namespace). Anywhere else every model call would be refused
    (ECONNREFUSED) and its trials counted as the model's failures, with a measured "zero" usage: refused instead.
    """
    if experiment.gateway is None or experiment.agent.kind != "command":
        return None
    if experiment.backend != "local":
        where = "a Docker container" if experiment.backend == "docker" else "a pod"
        return (
            f"the model gateway listens on this host's loopback, which a command agent inside {where} cannot "
            "reach; run the agent on this host (agent.kind: external, acting through $HEADROOM_EXEC; "
            "docs/agents.md), or drop the gateway"
        )
    network = experiment.allow_internet if experiment.agent.network is None else experiment.agent.network
    if not network:
        return (
            "the model gateway listens on this host's loopback, which a command agent reaches only with the "
            "network: set agent.network: true (or --allow-internet; environment.network: false keeps the "
            "environment offline), or run the agent on this host (agent.kind: external)"
        )
    return None


def check(experiment: Experiment, trials: list[Trial], tasks: list[Task], backend: Backend) -> str | None:
    """The agent's command resolves and starts where it runs, or :class:`SpecError`. The oracle is not checked."""
    from orchestrator.agents import harbor

    experiment = harbor.hosted(experiment)  # a Harbor agent: its interpreter and adapter, in the host sandbox
    if experiment.agent.kind == "oracle" or experiment.agent.command is None or not trials:
        return None
    if experiment.agent.path is not None and not Path(experiment.agent.path).is_dir():
        raise SpecError(
            f"the agent directory {experiment.agent.path} is not a directory on this host", field="agent.path"
        )
    first = trials[0]
    task = next(t for t in tasks if t.id == first.task_id)
    if experiment.agent.kind == "external":
        return check_in_host_sandbox(experiment, build_launch("preflight", first, 0, task, experiment).agent.env)
    return check_in_environment(
        backend,
        probe_launch(experiment, first, task),
        experiment.agent.command,
        resolve=experiment.agent.install is None,
    )
