"""What a try leaves behind for grading, parsed the same way by every backend.

* the reward, Harbor-style: ``reward.txt`` holds one number; ``reward.json`` a
  number or ``{"reward": x}``. NaN and infinities are malformed, never a pass.
* the agent's optional self-report (``$HEADROOM_AGENT_RESULT``):
  ``{"tokens_in", "tokens_out", "cost_usd", "model", "answer"}`` (``answer`` is what a
  golden-set grader grades); anything else is ignored. A count or cost above a sane cap
  (:data:`USAGE_CAPS`) is treated as not reported, and ``rejected`` says so: summed over a
  run, one ``1e308`` would make the report's totals infinite. The bundled enforcement canary's
  spin also reports its ``spin_wall_s`` and ``spin_cpu_s`` here (``CANARY_KEYS``): this file
  is the one channel every backend brings back for every try, passed or not.

Both are parsed with :func:`orchestrator.agentio.safejson.loads` (bounded size and nesting).

Container backends bring the file contents back (in a termination message or
a copied file) and call the ``parse_*`` functions; the local backend reads files.
"""

from __future__ import annotations

import errno
import math
import os
import stat
from pathlib import Path
from typing import Any

from orchestrator.agentio import safejson

REWARD_FILES = ("reward.txt", "reward.json")
_AGENT_KEYS = ("tokens_in", "tokens_out", "cost_usd", "model", "answer")
#: The canary spin's account of itself (orchestrator/engine/canary.py reads them; nothing else does).
CANARY_KEYS = ("spin_wall_s", "spin_cpu_s")
MAX_ANSWER = 4096  # a golden-set answer; a longer one is cut (and then graded as cut)
MAX_READ = 64 * 1024  # a reward file is a number; a huge one is malformed, not a reason to run out of memory


def parse_reward(filename: str, text: str) -> tuple[float | None, str | None]:
    """(reward, None) or (None, 'malformed: ...')."""
    try:
        if filename == "reward.txt":
            value: Any = float(text.strip())
        else:
            data = safejson.loads(text)
            value = data.get("reward") if isinstance(data, dict) else data
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None, "malformed: reward.json has no numeric 'reward'"
            value = float(value)
    except (ValueError, OverflowError) as exc:  # OverflowError: an integer too large for a float
        return None, f"malformed: {exc}"
    if not math.isfinite(value):
        return None, f"malformed: reward is {value}"
    return value, None


def read_regular_file(path: Path, limit: int = MAX_READ) -> bytes:
    """At most ``limit + 1`` bytes of a regular file, never through a symlink and never blocking on a FIFO.

    The file was made by a sandboxed step, and the orchestrator reading it may be
    root: a symlink planted there must not make it read (and record) a host file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_reward(logs_dir: Path) -> tuple[float | None, str | None]:
    for name in REWARD_FILES:
        path = logs_dir / name
        if path.is_symlink() or path.exists():
            try:
                raw = read_regular_file(path)
            except OSError as exc:
                return None, f"malformed: cannot read {name} ({exc.strerror})"
            if len(raw) > MAX_READ:
                return None, f"malformed: {name} is larger than {MAX_READ} bytes"
            return parse_reward(name, raw.decode("utf-8", "replace"))
    return None, "missing: no reward.txt or reward.json"


#: The largest self-reported usage that is believed, per try: a trillion tokens, a million dollars.
#: Above it the value is not reported (a run's sums of capped values stay finite).
USAGE_CAPS: dict[str, float] = {"tokens_in": 1e12, "tokens_out": 1e12, "cost_usd": 1e6}
_DEFAULT_CAP = 1e12  # any other numeric key of the self-report


def usage_value(key: str, value: Any) -> tuple[float | int | None, str | None]:
    """(value, None) for a sane self-reported number, else (None, why it is not counted)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, None
    # Compared as they are: an int of 400 digits has no float (math.isfinite would raise).
    if (isinstance(value, float) and not math.isfinite(value)) or value < 0:
        return None, f"{value!r} is not a finite non-negative number"
    cap = USAGE_CAPS.get(key, _DEFAULT_CAP)
    if value > cap:
        shown = f"{value:.6g}" if isinstance(value, float) else f"an integer of {len(str(value))} digits"
        return None, f"{shown} is above the cap of {cap:.6g} per try: treated as not reported"
    return value, None


def non_negative_number(value: Any) -> bool:
    """A number an agent may report: finite, >= 0 and under the cap (a bool is not a number here)."""
    return usage_value("", value)[0] is not None


def parse_agent_result(text: str) -> dict[str, Any]:
    try:
        data = safejson.loads(text)
    except ValueError as exc:
        return {"rejected": {"result.json": f"not read: {str(exc)[:200]}"}} if text.strip() else {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {}
    rejected: dict[str, str] = {}
    for k in _AGENT_KEYS + CANARY_KEYS:
        v = data.get(k)
        if isinstance(v, str) and k == "model":
            out[k] = v[:200]
        elif isinstance(v, str) and k == "answer":
            out[k] = v[:MAX_ANSWER]
        else:
            value, why = usage_value(k, v)
            if value is not None:
                out[k] = value
            elif why:
                rejected[k] = why
    if rejected:
        out["rejected"] = rejected
    return out


def read_agent_result(path: Path) -> dict[str, Any]:
    try:
        raw = read_regular_file(path)
    except OSError:
        return {}
    if len(raw) > MAX_READ:
        return {}
    return parse_agent_result(raw.decode("utf-8", "replace"))
