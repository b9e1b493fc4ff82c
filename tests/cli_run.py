"""Run ``headroom ARGS`` as a user does: a subprocess of this interpreter, its exit code and output captured.

The one subprocess runner of the suite (tests/inprocess.py runs the CLI in this process instead, where a
test does not need a process of its own). ``check=True`` asserts a zero exit, with both streams in the
message; ``without`` drops variables from the inherited environment (a provider key a test must not pass on),
and ``inherit=False`` starts from an empty one (``env`` alone). :func:`start` is the same command as a running
process, for tests that signal, stream or race it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

CLI = (sys.executable, "-m", "orchestrator")


def _environ(env: Mapping[str, str] | None, without: Iterable[str], inherit: bool) -> dict[str, str]:
    dropped = set(without)
    base = {k: v for k, v in os.environ.items() if k not in dropped} if inherit else {}
    return {**base, **(env or {})}


def headroom(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float | None = 300,
    check: bool = False,
    without: Iterable[str] = (),
    inherit: bool = True,
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_environ(env, without, inherit),
        timeout=timeout,
    )
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def start(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    without: Iterable[str] = (),
    inherit: bool = True,
    **popen: Any,
) -> subprocess.Popen[str]:
    """``headroom ARGS`` started, not waited for (``popen``: stdout, stderr and the like)."""
    return subprocess.Popen([*CLI, *args], text=True, cwd=cwd, env=_environ(env, without, inherit), **popen)


def headroom_ok(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """``headroom(*args, check=True)``: the command must succeed."""
    return headroom(*args, check=True, **kw)  # type: ignore[arg-type]
