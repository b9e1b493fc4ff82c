"""Signs, in a Harbor trial's agent logs, that the agent step was SIGKILLed: the traces an OOM kill leaves.

Harbor scores a trial whose agent was killed by the kernel's OOM killer like any other: the verifier runs on
what is left, the reward is 0 and no exception is recorded. The only traces are on disk, in the trial's
``agent/`` directory:

* an exit code of 137 (128 + SIGKILL, as a shell reports it; -9 as Python's subprocess does) in
  ``exit-code.txt`` (the oracle writes it when its step fails; multi-round: ``round_N_exit-code.txt``) or in
  an installed agent's ``command-N/return-code.txt``;
* the shell's report of a killed job in the agent's output (``oracle.txt``, ``<agent>.txt``,
  ``command-N/stdout.txt``): a line ``Killed``, or ``…: line 3:   812 Killed   python train.py``.

Neither proves an OOM kill: anything may send SIGKILL (a timeout wrapper, the agent itself), and the log is
the agent's own output. The importer therefore reads them as a *suspected* OOM, an inferred verdict carrying
this evidence (which file said what), never as the ``oom_killed`` headroom observes on its own trials.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.agentio.redact import redact_text

SIGKILL_CODES = frozenset({137, -9})
#: The shell's job report: a bare ``Killed`` line (dash, busybox) or bash's ``<where>: line N: <pid> Killed <cmd>``.
KILLED_LINE = re.compile(r"^\s*(?:Killed|.*: line \d+:\s+\d+\s+Killed(?:\s.*)?)\s*$")
EXIT_FILES = re.compile(r"^(?:round_\d+_)?exit-code\.txt$")
LOG_SUFFIXES = (".txt", ".log")
NOT_LOGS = frozenset({"command.txt", "return-code.txt"})
TAIL_BYTES = 256 * 1024  # an agent's log can be gigabytes: its end is where a kill shows
MAX_FILES = 64  # files looked at per trial (an agent directory someone else wrote can hold anything)
MAX_SIGNALS = 5
MAX_BYTES_PER_TRIAL = 1024 * 1024  # all logs of one trial together: thousands of failed trials stay quick
RULE = (
    "no exception (or NonZeroAgentExitCodeError naming exit 137), reward below the threshold, and the agent step "
    "SIGKILLed (exit code 137 or -9 in agent/exit-code.txt or agent/command-N/return-code.txt, or the shell's "
    "'Killed' report in the agent's output) -> infra_error(suspected_oom), inferred"
)


@dataclass
class Signs:
    """What the agent directory said: each sign is ``{"file": ..., "said": ...}``."""

    exit_codes: list[dict[str, Any]] = field(default_factory=list)  # every exit code found, 137 or not
    killed_lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def sigkilled(self) -> bool:
        return any(e["code"] in SIGKILL_CODES for e in self.exit_codes) or bool(self.killed_lines)

    def evidence(self) -> list[dict[str, Any]]:
        kills = [e for e in self.exit_codes if e["code"] in SIGKILL_CODES]
        return [{"file": e["file"], "said": f"exit code {e['code']}"} for e in kills] + self.killed_lines


def _read_tail(path: Path, limit: int) -> bytes | None:
    """The last ``limit`` bytes of a regular file, never following a symlink (the directory is not ours)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > limit:
            os.lseek(fd, st.st_size - limit, os.SEEK_SET)
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def _files(agent_dir: Path) -> list[Path]:
    """The agent directory's own files and those one level down (``command-N/``), regular files only."""
    out: list[Path] = []
    try:
        top = sorted(os.scandir(agent_dir), key=lambda e: e.name)
    except OSError:
        return out
    for e in top:
        if len(out) >= MAX_FILES:
            break
        if e.is_file(follow_symlinks=False):
            out.append(Path(e.path))
        elif e.is_dir(follow_symlinks=False) and e.name.startswith("command-"):
            try:
                inner = sorted(os.scandir(e.path), key=lambda x: x.name)
            except OSError:
                continue
            out += [Path(x.path) for x in inner if x.is_file(follow_symlinks=False)][: MAX_FILES - len(out)]
    return out


def exception_exit_code(exc_type: str | None, message: str) -> int | None:
    """The exit code Harbor's ``NonZeroAgentExitCodeError`` message names (``Command failed (exit 137): …``)."""
    if exc_type != "NonZeroAgentExitCodeError":
        return None
    m = re.search(r"\(exit (-?\d{1,4})\)", message[:2000])
    return int(m.group(1)) if m else None


def read_signs(trial_dir: Path, shown: str) -> Signs:
    """Exit codes and the shell's kill reports under ``trial_dir/agent``.

    ``shown``: the trial directory as the summary names it (each sign's ``file`` starts with it).
    """
    signs = Signs()
    agent_dir = trial_dir / "agent"
    budget = MAX_BYTES_PER_TRIAL
    for path in _files(agent_dir):
        rel = f"{shown}/{path.relative_to(trial_dir).as_posix()}"
        name = path.name
        if EXIT_FILES.match(name) or name == "return-code.txt":
            raw = _read_tail(path, 64)
            try:
                code = int((raw or b"").decode("ascii").strip())
            except ValueError:
                continue
            signs.exit_codes.append({"file": rel, "code": code})
        elif name.endswith(LOG_SUFFIXES) and name not in NOT_LOGS and len(signs.killed_lines) < MAX_SIGNALS:
            if budget <= 0:
                continue
            raw = _read_tail(path, min(TAIL_BYTES, budget))
            if not raw:
                continue
            budget -= len(raw)
            for line in raw.decode("utf-8", "replace").splitlines()[::-1]:  # the last report first
                if len(line) <= 2000 and KILLED_LINE.match(line):  # bounded: the pattern backtracks on long lines
                    signs.killed_lines.append({"file": rel, "said": redact_text(line.strip())[:200]})
                    break
    return signs
