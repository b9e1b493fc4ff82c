"""Before a sweep: does the agent's command resolve and start where it will run? Checked once, for real.

A command agent runs inside the trial's environment, so the check is one try of the
run's first task through the backend itself (the task's image, sandbox, user and
PATH), whose agent step is a probe instead of the agent. An external agent runs on the
host, in headroom's working directory, so its probe runs there. The probe:

* finds the command's program (after any ``NAME=value`` words) with ``command -v``;
* checks that the program can be executed: a file with the executable bit (else its own
  message, not "not found"), whose ``#!`` interpreter exists there (``#!/usr/bin/env
  NAME``: NAME is on the PATH) and whose ``#!`` line has no Windows line ending (the
  kernel refuses each of these, and the shell reports 126 or 127);
* when the program is an interpreter (``python3 x.py``, ``bash run.sh``, ``node``, ...),
  checks that its script exists;
* checks that the whole command is valid bash (``bash -n``).

Only the first simple command is checked (``cd /app && ./run.sh`` checks ``cd``), and words
the trial's shell expands (a ``$``, a leading ``~``, a glob) are not. A command that fails
the probe refuses the sweep with the probe's one line (exit 2), before anything is
written: otherwise every trial would fail at once, recorded as the model's failure.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

from orchestrator.backends.base import Backend, recorded
from orchestrator.errors import SpecError
from orchestrator.launch import build_launch, launch_name
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.launch import Launch, StepLaunch
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial

#: How long the in-environment probe may take (an image pull included) before the sweep goes ahead unchecked.
DEADLINE_S = 300.0
PROBE_TIMEOUT_S = 60.0
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_INTERPRETER = re.compile(r"^(python[0-9.]*|bash|sh|zsh|node|deno|bun|ruby|perl|php|Rscript)$")
NOT_FOUND = 127

#: Bash functions of the probe. ``_hr_startable PATH SHOWN`` fails (one line, 126 or 127) unless the kernel would
#: execute PATH: not a directory, the executable bit, and a ``#!`` line whose interpreter exists (``env NAME``:
#: NAME on the PATH, as env would look it up) without a trailing CR. Builtins only (``read``, ``case``,
#: parameter expansion): the trial's image may have no coreutils. No here-strings: /tmp may be read-only.
_FUNCTIONS = r"""set -u
_hr_fail() { echo "headroom: $2" >&2; exit "$1"; }
_hr_startable() {
  local p=$1 shown=$2 line='' rest interp w
  [ -d "$p" ] && _hr_fail 126 "the agent command is a directory: $shown"
  [ -x "$p" ] || _hr_fail 126 "the agent command is not executable: $shown (chmod +x it, or run it with its interpreter, e.g. bash $shown)"
  [ -r "$p" ] || return 0
  IFS= read -r -n 1024 line < "$p" 2>/dev/null || true
  case $line in '#!'*) ;; *) return 0 ;; esac
  case $line in *$'\r') _hr_fail 126 "the agent command's #! line ends in a carriage return (Windows line endings): $shown" ;; esac
  rest=${line#'#!'}
  rest=${rest#"${rest%%[![:space:]]*}"}
  interp=${rest%%[[:space:]]*}
  rest=${rest#"$interp"}
  rest=${rest#"${rest%%[![:space:]]*}"}
  rest=${rest%"${rest##*[![:space:]]}"}
  [ -n "$interp" ] || _hr_fail 126 "the agent command's #! line names no interpreter: $shown"
  { [ -x "$interp" ] && [ ! -d "$interp" ]; } || _hr_fail 127 "the agent command's interpreter is missing: #!$interp (in $shown)"
  [ "${interp##*/}" = env ] && [ -n "$rest" ] || return 0
  case $rest in
    -S*)  # env -S splits the rest into words: the first that is not an option or NAME=value is the program
      rest=${rest#-S}
      local words
      set -f; words=($rest); set +f
      for w in ${words[@]+"${words[@]}"}; do
        case $w in -*|[A-Za-z_]*=*) continue ;; esac
        command -v -- "$w" >/dev/null 2>&1 || _hr_fail 127 "the agent command's interpreter is not on the PATH: $w (#!$interp -S$rest in $shown)"
        return 0
      done ;;
    -*) ;;  # other env options: not checked
    *)  # without -S the kernel passes the rest as ONE word: env looks up that whole word
      command -v -- "$rest" >/dev/null 2>&1 || _hr_fail 127 "the agent command's interpreter is not on the PATH: $rest (#!$interp $rest in $shown)" ;;
  esac
  return 0
}
"""


def first_command(command: str) -> list[str]:
    """The words of the command's first simple command, without its ``NAME=value`` words and an ``exec`` or
    ``env`` in front: ``X=1 exec ./agent --go; echo done`` gives ``['./agent', '--go']``. Empty when the
    program cannot be told without running the shell (``env -i ...``, a subshell, a redirection first).
    ValueError when the command cannot be split (an open quote)."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    words: list[str] = []
    for token in lex:
        if token and all(c in lex.punctuation_chars for c in token):
            break  # ; && || | & ( ) < >: the first simple command ends here
        words.append(token)
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in ("exec", "env")):
        words = words[1:]
    return [] if words[:1] and words[0].startswith("-") else words  # exec -a NAME, env -i: options first


def _checkable(word: str) -> bool:
    """Whether the word means the same in the probe as in the trial: no variable, no ~ to expand, no glob."""
    return not (set(word) & set("$`*?[") or word.startswith("~"))


def probe_script(command: str, *, resolve: bool = True) -> str:
    """A bash script that exits 0 when ``command`` would start, else prints why (one line) and exits non-zero.

    ``resolve=False`` (an agent with an install phase, which is what provides its program): the syntax only."""
    try:
        words = first_command(command)
    except ValueError as exc:
        return f"echo {shlex.quote(f'headroom: the agent command cannot be parsed: {exc}')} >&2; exit 2"
    lines = [_FUNCTIONS]
    if resolve and words and _checkable(words[0]):
        prog, shown = shlex.quote(words[0]), words[0]
        missing = f"_hr_fail {NOT_FOUND} {shlex.quote(f'agent command not found: {shown}')}"
        if "/" in shown:  # a path: bash runs it as it is, and `command -v` says nothing of why it would not
            lines.append(f"[ -e {prog} ] || {missing}")
            lines.append(f"_hr_startable {prog} {prog}")
        else:
            lines.append(f"_hr_p=$(command -v -- {prog} 2>/dev/null) || {missing}")
            # a path: a program on the PATH (a builtin, function or alias prints its name, and starts)
            lines.append(f'case $_hr_p in /*) _hr_startable "$_hr_p" {prog} ;; esac')
        if _INTERPRETER.match(os.path.basename(shown)):
            for w in words[1:]:
                if w.startswith("-"):
                    if w in ("-c", "-m", "-e", "--eval", "-"):
                        break  # code or a module, not a script file
                    continue
                if _checkable(w):
                    q = shlex.quote(w)
                    lines.append(f"[ -e {q} ] || _hr_fail {NOT_FOUND} {shlex.quote(f'agent script not found: {w}')}")
                break
    lines.append(f"bash -n -c {shlex.quote(command)} 2>/dev/null || _hr_fail 2 'the agent command is not valid bash'")
    return "\n".join(lines) + "\n"


def _why(stderr: str, default: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines[-1].removeprefix("headroom: ") if lines else default


def check_on_host(command: str) -> None:
    """The external agent's probe, on the host where it will run."""
    try:
        res = subprocess.run(["bash", "-c", probe_script(command)], capture_output=True, text=True,
                             timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, cwd=Path.cwd())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"cannot check the agent command on this host: {exc}", field="agent.command") from exc
    if res.returncode != 0:
        raise SpecError(f"{_why(res.stderr, f'exit {res.returncode}')} (checked on this host, in {Path.cwd()}); "
                        "the sweep was not started", field="agent.command")


def probe_launch(experiment: Experiment, trial: Trial, task: Task) -> Launch:
    """The run's first try as the backend would run it, with the probe as its agent and a verifier that does nothing."""
    assert experiment.agent.command is not None
    run_id = f"preflight-{uuid.uuid4().hex[:8]}"
    base = build_launch(run_id, trial, 0, task, experiment)
    agent = StepLaunch(name="agent", shell=probe_script(experiment.agent.command,
                                                        resolve=experiment.agent.install is None),
                       env=base.agent.env, timeout_s=PROBE_TIMEOUT_S)
    verifier = StepLaunch(name="verifier", shell="true", env=base.agent.env, timeout_s=PROBE_TIMEOUT_S)
    labels = {**base.labels, "headroom.dev/task": "preflight"}
    return base.model_copy(update={"agent": agent, "verifier": verifier, "labels": labels, "agent_kind": "command",
                                   "agent_setup": None,
                                   "name": launch_name(run_id, trial.trial_id, 0), "spec_digest": "headroom-preflight"})


def check_in_environment(backend: Backend, launch: Launch, deadline_s: float = DEADLINE_S) -> str | None:
    """Run the probe try; raise :class:`SpecError` if the command would not start. Returns a note when the
    probe itself could not run (the sweep then goes ahead, and says so)."""
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
    if a is None or a.spawn_error or facts.setup_error or facts.infra_hint is not None:
        why = (a.spawn_error if a else None) or facts.setup_error or facts.infra_detail or "no agent step"
        return f"the agent-command probe could not run ({why}): not checked"
    if a.exit_code != 0:
        raise SpecError(f"{_why(a.stderr_tail, f'the probe exited {a.exit_code}')} (checked in a {backend.name} "
                        f"trial environment of task {launch.task_id}); the sweep was not started",
                        field="agent.command")
    return None


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
        return (f"the model gateway listens on this host's loopback, which a command agent inside {where} cannot "
                "reach; run the agent on this host (agent.kind: external, acting through $HEADROOM_EXEC; "
                "docs/agents.md), or drop the gateway")
    network = experiment.allow_internet if experiment.agent.network is None else experiment.agent.network
    if not network:
        return ("the model gateway listens on this host's loopback, which a command agent reaches only with the "
                "network: set agent.network: true (or --allow-internet; environment.network: false keeps the "
                "environment offline), or run the agent on this host (agent.kind: external)")
    return None


def check(experiment: Experiment, trials: list[Trial], tasks: list[Task], backend: Backend) -> str | None:
    """The agent's command resolves and starts where it runs, or :class:`SpecError`. The oracle is not checked."""
    if experiment.agent.kind == "oracle" or experiment.agent.command is None or not trials:
        return None
    if experiment.agent.path is not None and not Path(experiment.agent.path).is_dir():
        raise SpecError(f"the agent directory {experiment.agent.path} is not a directory on this host",
                        field="agent.path")
    if experiment.agent.kind == "external":
        check_on_host(experiment.agent.command)
        return None
    by_id = {t.id: t for t in tasks}
    first = trials[0]
    return check_in_environment(backend, probe_launch(experiment, first, by_id[first.task_id]))
