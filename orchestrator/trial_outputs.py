"""What a try leaves behind for grading, parsed the same way by every backend.

* the reward, Harbor-style: ``reward.txt`` holds one number; ``reward.json`` a
  number or ``{"reward": x}``. NaN and infinities are malformed, never a pass.
* the agent's optional self-report (``$HEADROOM_AGENT_RESULT``):
  ``{"tokens_in", "tokens_out", "cost_usd", "model", "answer"}`` (``answer`` is what a
  golden-set grader grades); anything else is ignored.

Container backends bring the file contents back (in a termination message or
a copied file) and call the ``parse_*`` functions; the local backend reads files.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

REWARD_FILES = ("reward.txt", "reward.json")
_AGENT_KEYS = ("tokens_in", "tokens_out", "cost_usd", "model", "answer")
MAX_ANSWER = 4096  # a golden-set answer; a longer one is cut (and then graded as cut)
MAX_READ = 64 * 1024  # a reward file is a number; a huge one is malformed, not a reason to run out of memory


def parse_reward(filename: str, text: str) -> tuple[float | None, str | None]:
    """(reward, None) or (None, 'malformed: ...')."""
    try:
        if filename == "reward.txt":
            value: Any = float(text.strip())
        else:
            data = json.loads(text)
            value = data.get("reward") if isinstance(data, dict) else data
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None, "malformed: reward.json has no numeric 'reward'"
            value = float(value)
    except (ValueError, json.JSONDecodeError) as exc:
        return None, f"malformed: {exc}"
    if not math.isfinite(value):
        return None, f"malformed: reward is {value}"
    return value, None


def read_reward(logs_dir: Path) -> tuple[float | None, str | None]:
    for name in REWARD_FILES:
        path = logs_dir / name
        if path.is_file():
            try:
                with path.open("rb") as f:
                    raw = f.read(MAX_READ + 1)
            except OSError as exc:
                return None, f"malformed: cannot read {name} ({exc.strerror})"
            if len(raw) > MAX_READ:
                return None, f"malformed: {name} is larger than {MAX_READ} bytes"
            return parse_reward(name, raw.decode("utf-8", "replace"))
    return None, "missing: no reward.txt or reward.json"


def parse_agent_result(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {}
    for k in _AGENT_KEYS:
        v = data.get(k)
        if isinstance(v, str) and k == "model":
            out[k] = v[:200]
        elif isinstance(v, str) and k == "answer":
            out[k] = v[:MAX_ANSWER]
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            out[k] = v
    return out


def read_agent_result(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_READ + 1)
    except OSError:
        return {}
    if len(raw) > MAX_READ:
        return {}
    return parse_agent_result(raw.decode("utf-8", "replace"))
