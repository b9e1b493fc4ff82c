"""The verifier's environment: nothing in it trusts the work dir the agent left.

* ``PYTHONSAFEPATH=1``: ``python3 -m pytest`` (or any ``-m``/``-c``/script run) does not put
  its working directory, the agent's work dir, first on ``sys.path``: a ``pytest.py`` or an
  entry-point plugin in a ``*.dist-info`` there is never imported (Python 3.11 and later; an
  older interpreter ignores the variable, see docs/container-contract.md);
* ``PYTHONNOUSERSITE=1``: no user site-packages (a root agent on Docker owns ``/root/.local``);
* ``PATH``: only its absolute entries that are folders in the verifier's view; an empty or
  relative entry (``bin``, ``.``, ``::``) would resolve in the work dir. The filter runs
  inside the environment (:data:`PRELUDE`), where the image's own ``PATH`` is known;
* no variable of the agent's: the verifier's environment is built from the task's
  ``[environment.env]`` and ``[verifier.env]`` and headroom's own paths, never from the
  agent step's (its ``--agent-env`` secrets, ``PYTHONPATH`` it set, its ``PATH``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: Set for every verifier; a task's ``[verifier.env]`` cannot turn them off.
FIXED: dict[str, str] = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}

#: Runs before the verifier's command, in the environment's own shell: drops every PATH entry that is not an
#: absolute folder there, then execs the command. Only shell built-ins, so nothing on PATH is run to filter PATH.
PATH_FILTER = r"""
p="" rest="${PATH:-}:"
while [ -n "$rest" ]; do
  d=${rest%%:*} rest=${rest#*:}
  case $d in /*) [ -d "$d" ] && p="$p${p:+:}$d" ;; esac
done
PATH=${p:-/usr/bin:/bin}
export PATH
"""
PRELUDE = PATH_FILTER + 'exec "$@"\n'


def shell_exports() -> str:
    """:data:`FIXED` and :data:`PATH_FILTER` as shell lines (the Pod runner's verifier subshell runs them)."""
    return "".join(f"export {k}={v}\n" for k, v in FIXED.items()) + PATH_FILTER


def build(task_env: Mapping[str, str], contract_env: Mapping[str, str]) -> dict[str, str]:
    """The verifier's variables: the task's, headroom's paths, then :data:`FIXED` (which win)."""
    return {**task_env, **contract_env, **FIXED}


def wrap(argv: Sequence[str]) -> list[str]:
    """``argv`` run through :data:`PRELUDE`."""
    return ["/bin/sh", "-c", PRELUDE, "headroom-verifier", *argv]
