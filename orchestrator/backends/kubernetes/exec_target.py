"""The Pod backend's :class:`~orchestrator.agents.exec.target.ExecTarget`: each command an external agent runs is one
``pods/exec`` into the try's task container (:func:`orchestrator.kube.exec.exec_in_pod`).

``pods/exec`` runs a process in the container's own cgroup and namespaces, so what the agent runs counts
against the trial's limits, and the runner's sweep after the agent phase kills whatever it left. The API has
no working dir, variables or timeout for an exec, so each command is wrapped in a small ``sh`` script
(:data:`WRAPPER`) that:

* refuses once the runner has ended the agent phase (``/headroom/run/agent.ended``, which the runner makes
  before its sweep): nothing the host sends later reaches the environment while the tests are handed over
  or the verifier runs;
* takes the contract's agent variables (``HR_AGENT_ENV``, as the runner's agent step does) and hides the
  runner's own ``HR_*`` ones, then the contract's paths (``HEADROOM_WORKDIR``, ``HEADROOM_TASK_DIR``,
  ``HEADROOM_LOGS_DIR``...: :func:`orchestrator.agents.external.exec_paths`, as the local and Docker targets give
  them), then the request's variables;
* changes to the working dir (the runner's ``$WORKDIR`` when none is asked for);
* ends the command after its timeout with the image's ``timeout(1)`` (TERM, then KILL 2 s later: exit 124 or
  137), or, in an image without one, with a shell watcher (KILL: exit 124); its stdin is passed through.
  Either counts as a timeout only when the exec also lasted the whole timeout.

Output travels as text over the websocket (the kubernetes client decodes it as UTF-8), so bytes that are not
UTF-8 arrive replaced.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.agents.exec.target import MAX_OUTPUT, ExecResult
from orchestrator.kube.exec import exec_in_pod

RUN_DIR = "/headroom/run"
#: Made by the runner when the agent phase ends (before its sweep); every later exec is refused.
ENDED = f"{RUN_DIR}/agent.ended"
#: Made by the runner when the agent phase starts; the host's agent starts once it is there.
READY = f"{RUN_DIR}/agent.ready"
#: Written by the host when its agent has ended (``exit N``, ``timeout`` or ``spawn_error``): the runner moves on.
DONE = f"{RUN_DIR}/agent.done"
#: The runner's variables an agent step never sees (runner.sh's HIDDEN).
HIDDEN = (
    "HR_AGENT_ENV HR_VERIFIER_ENV HR_TESTS_MANIFEST HR_AGENT_SCRIPT HR_AGENT_SHELL HR_VERIFIER_SCRIPT "
    "HR_SETUP_ENV HR_SETUP_SCRIPT HR_SETUP_SHELL HR_SAN_SCRIPT HR_SECRET_NAMES HR_VERIFIER_ONLY"
)
REFUSED = 125
#: What the wrapper writes on stderr, then exits REFUSED, when the channel (not the command) failed.
REFUSAL = "headroom-exec-refused: "

# $1 = working dir ("" = the runner's), $2 = timeout in seconds, $3 = the request's export lines, then the argv.
WRAPPER = f"""\
if [ -e {ENDED} ] || [ -L {ENDED} ]; then echo "{REFUSAL}the trial's agent phase has ended" >&2; exit {REFUSED}; fi
d=$1 t=$2 x=$3
shift 3
eval "${{HR_AGENT_ENV:-}}"
[ -n "$d" ] || d=${{HR_WORKDIR:-$PWD}}
unset {HIDDEN}
eval "$x"
cd "$d" 2>/dev/null || {{ echo "{REFUSAL}no directory $d in the environment" >&2; exit {REFUSED}; }}
if command -v timeout >/dev/null 2>&1; then exec timeout -k 2 "$t" "$@"; fi
exec 3<&0
"$@" <&3 3<&- &
p=$!
exec 3<&-
( trap 'kill "$s" 2>/dev/null; exit 1' TERM; sleep "$t" & s=$!; wait "$s" && kill -KILL "$p" ) >/dev/null 2>&1 &
w=$!
wait "$p"; rc=$?
kill -TERM "$w" 2>/dev/null; wait "$w"; fired=$?
if [ "$fired" = 0 ]; then echo "headroom-exec: timed out after $t s" >&2; exit 124; fi
exit $rc
"""


def exports(env: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()) if k.isidentifier())


class PodExec:
    """Run commands in ``pod``'s ``container`` through ``pods/exec``; ``default_cwd`` for a request without one.

    ``env``: the contract's variables every command gets under the request's own (the paths; the task's and the
    contract's other variables are in the pod already, as ``HR_AGENT_ENV``, so the instruction is not sent with
    every exec). Never a secret: it travels in the exec's command line."""

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        pod: str,
        *,
        container: str,
        default_cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.default_cwd = default_cwd
        self.env = dict(env or {})

    def command(
        self, argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str] | None, timeout: int
    ) -> list[str]:
        """The ``pods/exec`` command of one request: :data:`WRAPPER` with its working dir, timeout and exports."""
        return [
            "sh",
            "-c",
            WRAPPER,
            "headroom-exec",
            cwd or self.default_cwd or "",
            str(timeout),
            exports({**self.env, **(env or {})}),
            *argv,
        ]

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float | None = None,
        user: str | None = None,
    ) -> ExecResult:
        if user:
            return ExecResult(exit_code=None, error="pods/exec runs as the container's own user: no --user on Pods")
        timeout = max(1, int(timeout_s or 3600))
        command = self.command(argv, cwd=cwd, env=env, timeout=timeout)
        t0 = time.monotonic()
        try:
            # The wrapper's own timeout ends the command; the websocket's is a backstop for a lost connection.
            r = exec_in_pod(
                self.api_client,
                self.namespace,
                self.pod,
                command,
                container=self.container,
                stdin=stdin,
                timeout=timeout + 30,
            )
        except Exception as exc:  # noqa: BLE001 -- the pod is gone or the API refused: the channel failed
            return ExecResult(
                exit_code=None,
                duration_s=time.monotonic() - t0,
                error=f"pods/exec: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}",
            )
        elapsed = time.monotonic() - t0
        if r.exit_code is None:
            return ExecResult(
                exit_code=None,
                timed_out=True,
                duration_s=elapsed,
                error="pods/exec: no exit status before the timeout (the connection was lost)",
            )
        if r.exit_code == REFUSED and r.stderr.startswith(REFUSAL):
            return ExecResult(exit_code=None, duration_s=elapsed, error=r.stderr[len(REFUSAL) :].strip())
        out, err = r.stdout.encode(), r.stderr.encode()
        timed_out = r.exit_code in (124, 137) and elapsed >= timeout
        return ExecResult(
            exit_code=None if timed_out else r.exit_code,
            stdout=out[:MAX_OUTPUT],
            stderr=err[:MAX_OUTPUT],
            timed_out=timed_out,
            duration_s=elapsed,
            stdout_bytes=len(out),
            stderr_bytes=len(err),
        )
