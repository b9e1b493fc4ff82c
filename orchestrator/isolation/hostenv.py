"""What of a step's environment may reach the processes headroom starts on the host before the step's own program.

A task's env tables (``[environment.env]``, ``[agent.env]``, ``[verifier.env]``) are the task author's, i.e.
hostile. Before a step's program runs, headroom starts host-side helpers with the step's environment: the
wrapper that joins the trial's cgroup (a shell), the one that opens the seccomp program, ``setpriv`` and
``bwrap`` (as root when headroom is), the exec channel's wrapper. Some variables make those helpers run code
of the task's choosing: the dynamic loader's (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``LD_AUDIT``, ``GCONV_PATH``)
act in every program it starts, and a shell's start-up variables (``BASH_ENV``, ``ENV``, ``SHELLOPTS``,
``BASHOPTS``, ``PS4``) and exported bash functions (``BASH_FUNC_name%%``) in every shell. :func:`split` takes
them out of what the host's helpers get; the caller hands them to the step's own program only, inside its
sandbox (``bwrap --setenv``, or ``env`` after the uid drop) or, without one, by ``env`` right in front of it
(:func:`env_argv`). Every host-side exec of a step's environment goes through it: the local backend's steps
(:func:`orchestrator.isolation.process.run_step`), an external agent's exec sandbox
(:mod:`orchestrator.backends.local.environment`), the host agent's own sandbox and its preflight check.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

#: ``env``, which sets the deferred variables for the program it execs and acts on none of them itself. The system's
#: own first: inside a sandbox only the system dirs are shown, never a ``PATH`` entry of headroom's user.
ENV = "/usr/bin/env" if os.access("/usr/bin/env", os.X_OK) else shutil.which("env") or "/usr/bin/env"
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Variables some ``sh`` acts on at start (bash as ``sh`` still honours SHELLOPTS, then expands PS4; dash reads ENV
#: when interactive).
SHELL_STARTUP = frozenset({"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4"})


def loader_variable(name: str) -> bool:
    """A variable the dynamic loader acts on in every program it starts (``LD_PRELOAD``, ``LD_LIBRARY_PATH``,
    ``LD_AUDIT``...)."""
    return name.startswith("LD_") or name == "GCONV_PATH"


def workload_only(name: str) -> bool:
    """Whether a variable must reach only the step's own program: the loader's, a shell's start-up variables, an
    exported bash function, and any name that is not a shell name (dash, the cgroup wrapper, drops those, and
    bash imports functions from some of them)."""
    return (
        loader_variable(name)
        or name in SHELL_STARTUP
        or name.startswith("BASH_FUNC_")
        or not _SHELL_NAME.fullmatch(name)
    )


def split(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(what the host's helpers may get, what only the step's program may get). A name with ``=`` stays in the
    first, where ``Popen`` refuses it as before."""
    host: dict[str, str] = {}
    workload: dict[str, str] = {}
    for k, v in env.items():
        (workload if "=" not in k and workload_only(k) else host)[k] = v
    return host, workload


def env_argv(workload: Mapping[str, str]) -> list[str]:
    """The ``env`` command that gives ``workload`` to the program after it (empty when there is nothing to give)."""
    if not workload:
        return []
    return [ENV, "--", *(f"{k}={v}" for k, v in workload.items())]
