"""The verifier's environment: nothing in it trusts a tree the agent could write.

* ``PYTHONSAFEPATH=1``: ``python3 -m pytest`` (or any ``-m``/``-c``/script run) does not put
  its working directory, the agent's work dir, first on ``sys.path``: a ``pytest.py`` or an
  entry-point plugin in a ``*.dist-info`` there is never imported (Python 3.11 and later; an
  older interpreter ignores the variable, see docs/container-contract.md);
* ``PYTHONNOUSERSITE=1``: no user site-packages (a root agent on Docker owns ``/root/.local``);
* ``PATH``: only its absolute entries that are folders in the verifier's view and lie neither at
  nor under a tree the agent could write (:data:`AGENT_WRITABLE` and the backend's own: the work
  dir, the agent's logs). An empty or relative entry (``bin``, ``.``, ``::``) would resolve in the
  work dir, and a task env's ``PATH=/app/bin:...`` would run a ``python3`` the agent planted there.
  Each entry is compared by its physical path (``cd -P``), so a link does not hide where it leads;
* the path-list variables an interpreter or the loader searches (:data:`PATH_LISTS`, ``PYTHONPATH``
  among them) keep only such entries too, and the single-path ones (:data:`PATH_FILES`:
  ``LD_PRELOAD``, ``BASH_ENV``...) are unset when any of their paths is relative or in such a tree;
* no variable of the agent's: the verifier's environment is built from the task's
  ``[environment.env]`` and ``[verifier.env]`` and headroom's own paths, never from the
  agent step's (its ``--agent-env`` secrets, ``PYTHONPATH`` it set, its ``PATH``).

The filters run inside the environment (:data:`PRELUDE`), where the image's own variables are
known, with shell built-ins only: nothing on the PATH being filtered is run to filter it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: Set for every verifier; a task's ``[verifier.env]`` cannot turn them off.
FIXED: dict[str, str] = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}

#: Trees an agent can write on a container backend whatever the task (the backend adds its work dir and the agent's
#: logs dir, and the shell adds ``$HOME``). On the local backend the verifier has its own ``/tmp``, ``/dev/shm`` and
#: ``HOME``; they are dropped there too, so one rule holds everywhere.
AGENT_WRITABLE: tuple[str, ...] = ("/tmp", "/var/tmp", "/dev/shm")
#: The variable the prelude reads the untrusted trees from (colon-separated); unset before the verifier starts.
UNTRUSTED_VAR = "HR_UNTRUSTED"
#: Colon-separated search lists: each entry is kept only if it passes the same test as a PATH entry.
PATH_LISTS: tuple[str, ...] = (
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
    "NODE_PATH",
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    "CLASSPATH",
    "GEM_PATH",
)
#: Variables naming files or folders that are loaded or run as they are: unset if any of their paths is untrusted.
PATH_FILES: tuple[str, ...] = (
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "LD_PRELOAD",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "GEM_HOME",
)

#: Runs before the verifier's command, in the environment's own shell (built-ins only). ``hr_ok PATH`` says whether
#: an absolute path lies outside every untrusted tree (both compared physically); the lists are then rebuilt from
#: the entries that pass.
PATH_FILTER = r"""
set -f  # LD_PRELOAD's words are split, never expanded as patterns
# hr_phys enters each folder in this shell (a subshell per path was a fork each, 6 ms a verifier); the folder it
# started in is entered again at the end, and PWD and OLDPWD are given back their values.
hr_pwd=$PWD hr_owd=${OLDPWD-} hr_owd_set=${OLDPWD+x}
hr_phys() {  # $1 -> P: its physical path (its folder's, for a file), or itself when it cannot be entered
  if [ -d "$1" ]; then hr_p=$1; else hr_p=${1%/*}/; fi
  if cd -P -- "$hr_p" 2>/dev/null; then P=$PWD; else P=$1; fi
  [ -n "$P" ] || P=$1
}
hr_u="" hr_rest="${HR_UNTRUSTED:-}:/tmp:/var/tmp:/dev/shm:${HOME:-}:"
while [ -n "$hr_rest" ]; do
  hr_d=${hr_rest%%:*} hr_rest=${hr_rest#*:}
  case $hr_d in /?*) ;; *) continue ;; esac  # "/" itself (HOME=/, a work dir of /) would untrust everything
  hr_phys "$hr_d"; hr_u="$hr_u:${hr_d%/}:${P%/}"
done
hr_ok() {  # $1: absolute, and neither at nor under an untrusted tree
  case $1 in /*) ;; *) return 1 ;; esac
  hr_phys "$1"
  hr_r=$hr_u:
  while [ -n "$hr_r" ]; do
    hr_t=${hr_r%%:*} hr_r=${hr_r#*:}
    [ -n "$hr_t" ] || continue
    case $1/ in "$hr_t"/*) return 1 ;; esac
    case ${P%/}/ in "$hr_t"/*) return 1 ;; esac
  done
  return 0
}
hr_list() {  # $1: a variable holding a colon-separated list; $2: "d" when its entries must be folders
  eval "hr_in=\${$1-}"
  eval "hr_set=\${$1+x}"
  [ -n "$hr_set" ] || return 0
  hr_out="" hr_rest="$hr_in:"
  while [ -n "$hr_rest" ]; do
    hr_d=${hr_rest%%:*} hr_rest=${hr_rest#*:}
    [ "$2" = d ] && { [ -d "$hr_d" ] || continue; }
    hr_ok "$hr_d" && hr_out="$hr_out${hr_out:+:}$hr_d"
  done
  if [ -n "$hr_out" ]; then eval "$1=\$hr_out"; export "$1"; else unset "$1"; fi
}
hr_list PATH d
PATH=${PATH:-/usr/bin:/bin}
export PATH
for hr_v in @PATH_LISTS@; do hr_list "$hr_v" -; done
for hr_v in @PATH_FILES@; do
  eval "hr_in=\${$hr_v-}"
  [ -n "$hr_in" ] || continue
  hr_rest="$hr_in:" hr_bad=""
  while [ -n "$hr_rest" ]; do
    hr_d=${hr_rest%%:*} hr_rest=${hr_rest#*:}
    for hr_w in $hr_d; do hr_ok "$hr_w" || hr_bad=1; done
  done
  [ -z "$hr_bad" ] || unset "$hr_v"
done
cd -P -- "$hr_pwd" 2>/dev/null || { echo "headroom: the verifier's prelude cannot return to $hr_pwd" >&2; exit 126; }
PWD=$hr_pwd
if [ -n "$hr_owd_set" ]; then OLDPWD=$hr_owd; else unset OLDPWD; fi
unset HR_UNTRUSTED hr_u hr_rest hr_d hr_t hr_r hr_in hr_set hr_out hr_v hr_w hr_bad P hr_p hr_pwd hr_owd hr_owd_set
unset -f hr_phys hr_ok hr_list 2>/dev/null
set +f
""".replace("@PATH_LISTS@", " ".join(PATH_LISTS)).replace("@PATH_FILES@", " ".join(PATH_FILES))
PRELUDE = PATH_FILTER + 'exec "$@"\n'


def shell_exports() -> str:
    """:data:`FIXED` and :data:`PATH_FILTER` as shell lines (the Pod runner's verifier subshell runs them, with
    ``HR_UNTRUSTED`` set to its work dir and agent logs dir first)."""
    return "".join(f"export {k}={v}\n" for k, v in FIXED.items()) + PATH_FILTER


def build(
    task_env: Mapping[str, str], contract_env: Mapping[str, str], untrusted: Sequence[str] = ()
) -> dict[str, str]:
    """The verifier's variables: the task's, headroom's paths, then :data:`FIXED` (which win). ``untrusted``: the
    trees the agent could write besides :data:`AGENT_WRITABLE` (its work dir, its logs), for the prelude."""
    for p in untrusted:
        if ":" in p:
            raise ValueError(f"an agent-writable tree may not hold ':': {p!r}")
    return {**task_env, **contract_env, **FIXED, UNTRUSTED_VAR: ":".join(untrusted)}


def wrap(argv: Sequence[str]) -> list[str]:
    """``argv`` run through :data:`PRELUDE`."""
    return ["/bin/sh", "-c", PRELUDE, "headroom-verifier", *argv]
