"""Every string that came from an agent, made valid UTF-8 at one choke point before anything stores it.

An agent chooses bytes, not text: a file name that is not UTF-8 arrives from the file
system as a str holding surrogate escapes (``"\\udcff"``), and its self-report can hold a
JSON ``"\\ud800"`` (a lone surrogate). Either makes every UTF-8 encoder raise: SQLite's
binding, pydantic's JSON, the Kubernetes client. Once that aborted a sweep and every
``--resume`` after it. Here such characters become visible escapes (``\\xff`` for an
undecodable byte, ``\\ud800`` for a lone surrogate), so the evidence still says what the
agent left and two different names stay apart. :func:`orchestrator.engine.settle.settle` runs
:func:`valid_tree` over a try's whole facts; artifact names use :func:`valid_text`.
"""

from __future__ import annotations

from typing import Any


def _escape(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as os.fsdecode (surrogateescape) carries it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def valid_text(text: str) -> str:
    """``text`` if it encodes as UTF-8, else the same with every surrogate written as an escape."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join(_escape(c) if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def valid_tree(obj: Any) -> Any:
    """A JSON-like object with every string in it (keys included) made valid UTF-8."""
    if isinstance(obj, str):
        return valid_text(obj)
    if isinstance(obj, dict):
        return {valid_text(k) if isinstance(k, str) else k: valid_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [valid_tree(v) for v in obj]
    return obj
