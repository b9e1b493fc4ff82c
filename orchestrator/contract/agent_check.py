"""The ``agent_check`` phase: does the agent command's program resolve, before the agent gets control?

An agent that cannot start is not a model failure (``harness_error(agent_not_found)``), but a
verdict may never come from a channel the agent writes: an agent can exit 127 or print
"command not found" as well as a shell can. So the question is asked by headroom's own script,
in the trial's environment, with the agent's variables and working directory, *before* the
agent runs, and only its answer decides: not found -> the agent never starts. An exit of 126
or 127 after the agent started stays the verifier's verdict (``extra.agent_not_found`` is
evidence only, :func:`orchestrator.classify.agent_not_found`).

The program is the command's first word (:func:`program`: ``shlex``, after ``NAME=value``
words and ``exec``/``command``/``env``/``nohup``); a word with ``$NAME`` or ``${NAME}`` is
expanded in the environment, any other expansion (``$(...)``, a subshell) leaves the command
unchecked. The check (:data:`SCRIPT`):

* the shell that will run the command (``bash`` on local and Docker; the Pod runner's ``bash``
  or ``sh``) resolves;
* a word with a ``/`` is a path: it exists, is not a folder, is executable, and if it starts
  with ``#!`` its interpreter exists and is executable (and for ``#!/usr/bin/env NAME``,
  ``NAME`` resolves on the agent's PATH);
* any other word resolves as that shell resolves it (``command -v``: a builtin, a function
  or a program on the agent's PATH, which is then checked as a path).

It prints ``agent_check=ok``, ``agent_check=not_found`` with ``agent_check_detail=...``, or
``agent_check=unchecked``; a check that could not run at all (no ``/bin/sh``, its timeout) is
``unchecked`` and the agent runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

from orchestrator.spec.evidence import AgentCheck

#: How long the check may take.
TIMEOUT_S = 30.0
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: A word the check expands itself: literal characters and plain ``$NAME`` / ``${NAME}`` references only
#: (no command substitution, no ``${x:=...}``), so expanding it runs nothing.
_SAFE_WORD = re.compile(r"^(?:[A-Za-z0-9_./~+,@%:=-]|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\})+$")
_WRAPPERS = ("exec", "command", "env", "nohup")

Status = Literal["ok", "not_found", "unchecked"]

SCRIPT = r"""
set -f
w=$1 shell=$2
say() { echo "agent_check=$1"; [ -n "${2:-}" ] && printf 'agent_check_detail=%s\n' "$2"; exit 0; }  # built-ins only
case $w in *'$'*|'~'*) eval "w=$w" 2>/dev/null || say unchecked "cannot expand $1" ;; esac
[ -n "$w" ] || say unchecked "$1 expands to nothing"
sh_path=$(command -v -- "$shell" 2>/dev/null)
[ -n "$sh_path" ] || say not_found "$shell (the shell that runs the agent command): not found"
check_path() {  # $1: a path the shell would execute
  [ -e "$1" ] || say not_found "$1: no such file"
  [ -d "$1" ] && say not_found "$1: is a directory"
  [ -x "$1" ] || say not_found "$1: not executable"
  magic=""
  if command -v head >/dev/null 2>&1; then magic=$(head -c 2 -- "$1" 2>/dev/null); fi
  [ "$magic" = "#!" ] || return 0
  first=""
  IFS= read -r first < "$1" 2>/dev/null
  set -- ${first#??}
  interp=${1:-}
  [ -n "$interp" ] || say not_found "$w: its #! line names no interpreter"
  [ -e "$interp" ] && [ ! -d "$interp" ] && [ -x "$interp" ] || say not_found "$w: its interpreter $interp: not found or not executable"
  case ${interp##*/} in
    env)
      shift
      while [ $# -gt 0 ]; do case $1 in -S|-S*|--split-string*) return 0 ;; -*|*=*) shift ;; *) break ;; esac; done
      [ $# -gt 0 ] || return 0
      [ -n "$(command -v -- "$1" 2>/dev/null)" ] || say not_found "$w: its interpreter $1 (through env): not found"
      ;;
  esac
  return 0
}
case $w in
  */*) check_path "$w" ;;
  *)
    r=$("$sh_path" -c 'command -v -- "$1"' headroom-agent-check "$w" 2>/dev/null)
    [ -n "$r" ] || say not_found "$w: command not found"
    case $r in /*) check_path "$r" ;; esac
    ;;
esac
say ok
"""


def program(shell: str) -> str | None:
    """The agent command's program word, or None when it cannot be told without running the command."""
    lexer = shlex.shlex(shell, posix=True, punctuation_chars=True)  # `;`, `&&`, `|`, `(`... end a word
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        return None
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in _WRAPPERS):
        if words[0] == "env" and len(words) > 1 and words[1].startswith("-"):
            return None  # env's options change what runs (-i, -C DIR, -S): not a plain program
        if words[0] == "command" and len(words) > 1 and words[1].startswith("-"):
            return None
        words = words[1:]
    if not words or not words[0] or words[0][0] in "&|;<>()" or "`" in words[0]:
        return None
    if ("$" in words[0] or words[0].startswith("~")) and not _SAFE_WORD.match(words[0]):
        return None  # a substitution or an expansion with side effects: its value is only known by running it
    return words[0]


def argv(word: str, shell: str = "bash") -> list[str]:
    """The check of ``word`` for a command the environment's ``shell`` will run."""
    return ["/bin/sh", "-c", SCRIPT, "headroom-agent-check", word, shell]


@dataclass(frozen=True)
class Check:
    status: Status
    detail: str = ""

    def evidence(self, program_word: str | None) -> AgentCheck:
        return AgentCheck(status=self.status, program=program_word or "",
                          **({"detail": self.detail} if self.detail else {}))


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
