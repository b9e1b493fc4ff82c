"""Can the agent command's program start? The one check, asked before every try and once before the sweep.

An agent that cannot start is not a model failure (``harness_error(agent_not_found)``), but a
verdict may never come from a channel the agent writes: an agent can exit 127 or print
"command not found" as well as a shell can. So the question is asked by headroom's own script,
in the trial's environment, with the agent's variables and working directory, *before* the
agent runs, and only its answer decides: not found -> the agent never starts. An exit of 126
or 127 after the agent started stays the verifier's verdict (``extra.agent_not_found`` is
evidence only, :func:`orchestrator.engine.classify.agent_not_found`).

The same parser (:func:`target`) and script (:data:`SCRIPT`) serve the trial contract's
``agent_check`` phase on every backend and the sweep's preflight
(:mod:`orchestrator.engine.preflight`, on the host for an external agent), so the two cannot
disagree about a command.

What is checked (:func:`target`): the program of the command's first simple command (``shlex``;
``;``, ``&&``, ``|``... end it), after ``NAME=value`` words and ``exec``/``command``/``env``/
``nohup``; and, when that program is an interpreter (``python3 x.py``, ``bash -x run.sh``,
``node x.js``...), the script it is given (:attr:`Target.script`, the check's third argument:
the preflight and every try's phase pass it, the latter from ``Plan.agent_target`` on local and
Docker and ``HR_AGENT_PROGRAM_SCRIPT`` in a Pod). A word is checked
as the trial's shell will see it: ``$NAME``, ``${NAME}`` and a leading ``~`` are expanded where
the check runs (a variable that is not set there leaves the word unchecked: an external
agent's host check does not have the try's paths yet). A word whose value is only known by
running the shell leaves it unchecked:
``$(...)``, backquotes, any other ``${...}``, a glob or a brace, quoting that ``shlex`` cannot
show (``'$HOME'``, ``"~"``), a redirection or a subshell first, options to a wrapper (``env -i``,
``exec -a``), a ``PATH=`` assignment in front (bash looks the program up on that PATH), a
command ``shlex`` cannot split. Unchecked is never a refusal.

The check (:data:`SCRIPT`, POSIX ``sh`` and built-ins but ``head``: an image may have no coreutils):

* the shell that will run the command (``bash`` on local and Docker; the Pod runner's ``bash``
  or ``sh``) resolves;
* a word with a ``/`` is a path: it exists, is not a folder, is executable, and if it starts
  with ``#!``, that line has no Windows line ending and its interpreter exists and is
  executable; ``#!/usr/bin/env NAME`` looks NAME up on the agent's PATH as the kernel hands it
  over (without ``-S`` the rest of the line is *one* word: ``env 'python3 -u'`` fails);
* any other word resolves as that shell resolves it (``command -v``: a builtin, a function
  or a program on the agent's PATH, which is then checked as a path);
* an interpreter's script exists (a shell's script may also be a name on the PATH, as bash
  looks it up).

It prints ``agent_check=ok``, ``agent_check=not_found`` with ``agent_check_detail=...`` (one line
a user can act on), or ``agent_check=unchecked``; a check that could not run at all (no
``/bin/sh``, its timeout) is ``unchecked`` and the agent runs.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Literal

from orchestrator.spec.evidence import AgentCheck

#: How long the check may take.
TIMEOUT_S = 30.0
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: A word the check expands itself: an optional leading ``~`` or ``~user``, then literal characters and plain
#: ``$NAME`` / ``${NAME}`` references only (no ``$(...)``, no ``${x:=...}``, no second ``~``), so expanding it
#: runs nothing and means what it means to the trial's shell.
_SAFE_WORD = re.compile(
    r"^(?:~[A-Za-z0-9_.-]*(?=/|$))?"
    r"(?:[A-Za-z0-9_./+,@%:=-]|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\})*$"
)
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
#: Characters the trial's shell expands in a word that the check cannot (globs, braces, substitutions).
_SHELL_EXPANDS = set("*?[]{}`")
_WRAPPERS = ("exec", "command", "env", "nohup")
#: Programs whose first argument is the script they run.
_INTERPRETER = re.compile(r"^(python[0-9.]*|bash|sh|dash|zsh|ksh|node|ruby|perl|php|Rscript)$")
_SHELLS = ("bash", "sh", "dash", "zsh", "ksh")
#: Options of python without an argument (anything else before the script: not checked).
_PYTHON_FLAGS = frozenset("-u -B -E -I -O -OO -P -q -s -S -b -bb -d -i -v -x -R".split())
_SHELL_LONG_FLAGS = frozenset("--login --norc --noprofile --posix --restricted --verbose".split())

Status = Literal["ok", "not_found", "unchecked"]

SCRIPT = r"""
set -f
w=$1 shell=${2:-bash} s=${3:-}
say() { echo "agent_check=$1"; [ -n "${2:-}" ] && printf 'agent_check_detail=%s\n' "$2"; exit 0; }  # built-ins only
expand() { ( set -u; eval "x=$1" && printf '%s.' "$x" ) 2>/dev/null; }  # unset variable: fails
case $w in *'$'*|'~'*) v=$(expand "$w") || say unchecked "$w: names a variable that is not set here"; w=${v%.} ;; esac
[ -n "$w" ] || say unchecked "$1 expands to nothing"
sh_path=$(command -v -- "$shell" 2>/dev/null)
[ -n "$sh_path" ] || say not_found "the shell that runs the agent command is missing: $shell"
tab=$(printf '\t') cr=$(printf '\r')
check_path() {  # $1: a path the shell would execute; $2: the word as the user sees it
  shown=$2
  [ -e "$1" ] || say not_found "agent command not found: $shown: no such file"
  [ -d "$1" ] && say not_found "the agent command is a directory: $shown"
  [ -x "$1" ] || say not_found "the agent command is not executable: $shown (chmod +x it, or run it with its interpreter, e.g. bash $shown)"
  magic=""
  if command -v head >/dev/null 2>&1; then magic=$(head -c 2 -- "$1" 2>/dev/null); else magic='#!'; fi
  [ "$magic" = "#!" ] || return 0
  first=""
  IFS= read -r first < "$1" 2>/dev/null || :
  case $first in '#!'*) ;; *) return 0 ;; esac
  case $first in *"$cr") say not_found "the agent command's #! line ends in a carriage return (Windows line endings): $shown" ;; esac
  rest=${first#??}
  rest=${rest#"${rest%%[! $tab]*}"}
  interp=${rest%%[ $tab]*}
  rest=${rest#"$interp"}
  rest=${rest#"${rest%%[! $tab]*}"}
  rest=${rest%"${rest##*[! $tab]}"}
  [ -n "$interp" ] || say not_found "the agent command's #! line names no interpreter: $shown"
  [ -e "$interp" ] && [ ! -d "$interp" ] && [ -x "$interp" ] || say not_found "the agent command's interpreter is missing: #!$interp (in $shown)"
  [ "${interp##*/}" = env ] && [ -n "$rest" ] || return 0
  case $rest in
    -S*)  # env -S splits the rest into words: the first that is not an option or NAME=value is the program
      set -- ${rest#-S}
      for x do
        case $x in -*|[A-Za-z_]*=*) continue ;; esac
        command -v -- "$x" >/dev/null 2>&1 || say not_found "the agent command's interpreter is not on the PATH: $x (#!$interp $rest in $shown)"
        return 0
      done ;;
    -*) ;;  # other env options: not checked
    *)  # without -S the kernel hands env the rest as ONE word, and env looks up that whole word
      command -v -- "$rest" >/dev/null 2>&1 || say not_found "the agent command's interpreter is not on the PATH: $rest (#!$interp $rest in $shown)" ;;
  esac
  return 0
}
case $w in
  */*) check_path "$w" "$w" ;;
  *)
    r=$("$sh_path" -c 'command -v -- "$1"' headroom-agent-check "$w" 2>/dev/null)
    [ -n "$r" ] || say not_found "agent command not found: $w: command not found on the agent's PATH (${PATH:-})"
    case $r in /*) check_path "$r" "$w" ;; esac
    ;;
esac
if [ -n "$s" ]; then  # the interpreter's script; a variable not set here leaves it unchecked
  case $s in *'$'*|'~'*) v=$(expand "$s") && s=${v%.} || s="" ;; esac
  if [ -n "$s" ] && [ ! -e "$s" ]; then
    case $s in */*) say not_found "agent script not found: $s" ;; esac
    case ${w##*/} in bash|sh|dash|zsh|ksh) [ -n "$(command -v -- "$s" 2>/dev/null)" ] && say ok ;; esac
    say not_found "agent script not found: $s"
  fi
fi
say ok
"""


@dataclass(frozen=True)
class Target:
    """What the check resolves: the program word and, for an interpreter, its script (as written)."""

    program: str
    script: str | None = None


def _words(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)  # `;`, `&&`, `|`, `(`... end a word
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an open quote, or quoting shlex does not know ($'...'): bash may still take it
        return None


def _operator(word: str) -> bool:
    return bool(word) and all(c in "();<>|&" for c in word)


def _checkable(command: str, word: str) -> bool:
    """Whether the check sees ``word`` as the trial's shell will (else it is left unchecked)."""
    if not word or word.startswith("-") or _operator(word) or set(_REFERENCE.sub("", word)) & _SHELL_EXPANDS:
        return False
    if "$" not in word and not word.startswith("~"):
        return True  # literal: its quotes (if any) are gone, and nothing in it is expanded
    if not _SAFE_WORD.match(word):
        return False
    # shlex drops quotes: '$HOME/x' and "~/x" are literal to the shell. Expand only a word written as shlex gives it
    # back (a `$` may sit in double quotes, a `~` must be bare).
    where = command if word.startswith("~") else command.replace('"', "")
    at = where.find(word)
    return at >= 0 and (at == 0 or where[at - 1] not in "'\"\\")


def _script(command: str, program: str, args: list[str]) -> str | None:
    """The script an interpreter is given, when it can be told without knowing the interpreter's every option."""
    name = os.path.basename(program)
    shell, python = name in _SHELLS, name.startswith("python")
    for i, a in enumerate(args):
        if _operator(a):
            return None
        if a == "--":
            return args[i + 1] if i + 1 < len(args) and _checkable(command, args[i + 1]) else None
        if not a.startswith("-") and not (shell and a.startswith("+")):
            return a if _checkable(command, a) else None
        if python and a in _PYTHON_FLAGS:
            continue
        if shell and (a in _SHELL_LONG_FLAGS or re.fullmatch(r"-[abefhklmnprtuvxBCEHPT]+", a)):
            continue  # set-style flags without an argument (not -c, -s, -i, -o)
        return None  # code (-c, -e, -m), stdin (-, -s) or an option that may take an argument: not checked
    return None


def target(command: str) -> Target | None:
    """What the check resolves for ``command``, or None when it cannot be told without running the command."""
    words = _words(command)
    if words is None:
        return None
    i = 0
    while i < len(words):
        if _ASSIGNMENT.match(words[i]):
            if words[i].startswith("PATH="):
                return None  # bash looks the program up on that PATH, which the check does not have
            i += 1
        elif words[i] in _WRAPPERS:
            if i + 1 < len(words) and words[i + 1].startswith("-"):
                return None  # env -i, env -C DIR, command -p, exec -a NAME: options change what runs
            i += 1
        else:
            break
    rest = words[i:]
    if not rest or not _checkable(command, rest[0]):
        return None
    if len(rest) > 1 and rest[0].isdigit() and rest[1][:1] in "<>":
        return None  # `2>/dev/null ./agent`: a redirection first
    program = rest[0]
    script = _script(command, program, rest[1:]) if _INTERPRETER.match(os.path.basename(program)) else None
    return Target(program, script)


def argv(word: str, shell: str = "bash", script: str | None = None) -> list[str]:
    """The check of ``word`` (and an interpreter's ``script``) for a command the environment's ``shell`` will run."""
    return ["/bin/sh", "-c", SCRIPT, "headroom-agent-check", word, shell, *([script] if script else [])]


@dataclass(frozen=True)
class Check:
    status: Status
    detail: str = ""

    def evidence(self, program_word: str | None) -> AgentCheck:
        return AgentCheck(
            status=self.status, program=program_word or "", **({"detail": self.detail} if self.detail else {})
        )


def parse(stdout: str, *, exit_code: int | None, timed_out: bool, spawn_error: str | None) -> Check:
    """The check's answer. Anything but its own ``not_found`` (a crash, a timeout, no shell) lets the agent run."""
    if spawn_error:
        return Check("unchecked", f"the check could not start: {spawn_error}"[:300])
    if timed_out:
        return Check("unchecked", "the check ran out of time")
    values: dict[str, str] = {}
    for line in stdout.split("\n"):
        k, sep, v = line.partition("=")
        if sep and k in ("agent_check", "agent_check_detail") and k not in values:
            values[k] = v
    status = values.get("agent_check")
    if exit_code != 0 or status not in ("ok", "not_found", "unchecked"):
        return Check("unchecked", f"the check gave no answer (exit {exit_code})")
    return Check(status, values.get("agent_check_detail", "")[:500])  # type: ignore[arg-type]
