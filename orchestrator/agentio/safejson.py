"""One JSON loader for text an agent, a verifier or a pod produced: bounded in size and depth.

``json.loads`` recurses once per nesting level: ``"[" * 30000`` raises
``RecursionError``, which escapes every ``except ValueError`` and used to crash a
sweep (or drop a try's evidence). Here the nesting is counted *before* parsing (a
regex walk over strings and brackets, no recursion), and anything that still goes
wrong while parsing is a ``ValueError``, the one error callers handle.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: A self-report, a reward file or a golden answer is small; a runner message is 4 KiB.
MAX_BYTES = 1024 * 1024
#: Deeper than any honest result; far below the interpreter's recursion limit (json, jsonschema).
MAX_DEPTH = 64

# A JSON string (brackets inside it do not nest) or a single bracket.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of ``text``, counted without recursion."""
    depth = deepest = 0
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif tok in "]}":
            depth -= 1
    return deepest


def loads(text: str | bytes, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for untrusted text; every refusal is a ``ValueError`` saying why."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_bytes:
            raise ValueError(f"JSON of {len(text)} bytes (more than {max_bytes})")
        text = bytes(text).decode("utf-8", "replace")
    if len(text) > max_bytes:
        raise ValueError(f"JSON of {len(text)} characters (more than {max_bytes})")
    depth = nesting_depth(text)
    if depth > max_depth:
        raise ValueError(f"JSON nested {depth} deep (more than {max_depth})")
    try:
        return json.loads(text)
    except RecursionError as exc:  # not reachable after the depth check; kept so it can never escape
        raise ValueError("JSON nested too deep") from exc
