"""Artifact names: what the engine and backends call the things a try leaves, and how any name is kept.

Names are keys, never paths: nothing is ever written to disk under one. A name the
agent chose (a file in its logs dir) can be any bytes; it is kept as valid UTF-8
with undecodable bytes shown as ``\\xNN``, control characters likewise, and a bounded
length (a hash of the whole keeps two long names apart).
"""

from __future__ import annotations

import hashlib
import re

from orchestrator.agentio.text import valid_text

#: Conventional names. A backend stores the agent's logs dir under LOGS_PREFIX ("logs/trajectory.json").
AGENT_STDOUT = "agent/stdout"
AGENT_STDERR = "agent/stderr"
VERIFIER_STDOUT = "verifier/stdout"
VERIFIER_STDERR = "verifier/stderr"
LOGS_PREFIX = "logs"
EXEC_LOG = "exec-log.jsonl"  # one orchestrator.artifacts.execlog.ExecRecord per line
MODEL_CALLS = "gateway/calls.jsonl"  # the gateway's transcript of the try's model calls

MAX_NAME = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def artifact_name(raw: str | bytes) -> str:
    """Any name (bytes from the file system, or a str holding surrogate escapes) as valid, bounded UTF-8."""
    if isinstance(raw, str):
        text = valid_text(raw)  # undecodable bytes as \\xNN, a lone surrogate as \\udNNN
        raw = text.encode("utf-8")
    else:
        text = raw.decode("utf-8", "backslashreplace")
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(text) > MAX_NAME:
        text = f"{text[: MAX_NAME - 20]}…{hashlib.sha256(raw).hexdigest()[:16]}"
    return text


def join(prefix: str, *parts: str | bytes) -> str:
    """``prefix/part/part`` with every part made a safe name (a '/' inside a part is a character, not a level)."""
    names = [artifact_name(p).replace("/", "\\x2f") for p in parts]
    return "/".join([prefix.strip("/"), *names] if prefix.strip("/") else names)
