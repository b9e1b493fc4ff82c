"""What an exec channel runs commands on: the trial's environment, behind one small interface.

:class:`ExecTarget` mirrors the step runner's ``run`` of the trial contract: run a
command in the trial's environment, as its user, with a working dir, variables,
stdin and a timeout, and give back the exit status and the output. Each backend
has one (local: a process server inside the trial's sandbox and cgroup; Docker:
``exec`` in the container), so an external agent acts on every backend the same
way, and everything it runs is inside the trial's limits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: Output kept per stream of one exec; the rest is counted (``*_bytes``) and dropped.
MAX_OUTPUT = 16 * 1024 * 1024


@dataclass
class ExecResult:
    exit_code: int | None  # None: it did not exit by itself (killed, timed out, lost)
    stdout: bytes = b""
    stderr: bytes = b""
    signal: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    stdout_bytes: int = 0  # everything it wrote, kept or not
    stderr_bytes: int = 0
    error: str | None = None  # the channel's own failure (the environment is gone, the command could not start)


class ExecTarget(Protocol):
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
        """Run ``argv`` in the trial's environment to completion or ``timeout_s``; never raises for the command."""
        ...


class StepExec(Protocol):
    """The trial contract's exec for a host-side agent (``orchestrator.contract.sequence.Exec``: the step runner's
    ``run`` bound to the agent's role and work dir). Mirrored here so this package does not depend on it."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout_s: float,
        stdin: bytes | None = None,
        cwd: str | None = None,
    ) -> Any: ...


class StepExecTarget:
    """An :class:`ExecTarget` over the contract's :class:`StepExec`, for a backend that runs its tries through the
    one step sequence. Its ``run`` returns step facts that carry the *tails* of the output (the runner's
    ``TAIL_BYTES``), so a command's output reaches the agent cut to its end; the backends' own targets
    (:mod:`orchestrator.backends.local.environment`, :mod:`orchestrator.backends.docker.exec_target`) give it whole."""

    def __init__(self, exec_: StepExec) -> None:
        self.exec_ = exec_

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
        s = self.exec_(argv, env=env, timeout_s=timeout_s or 3600.0, stdin=stdin, cwd=cwd)
        out, err = s.stdout_tail.encode(), s.stderr_tail.encode()
        return ExecResult(
            exit_code=s.exit_code,
            signal=s.signal,
            timed_out=s.timed_out,
            duration_s=s.duration_s,
            stdout=out,
            stderr=err,
            stdout_bytes=len(out),
            stderr_bytes=len(err),
            error=s.spawn_error,
        )
