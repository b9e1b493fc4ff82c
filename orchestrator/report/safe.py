"""What came from outside, made inert for each output format, at the renderer's boundary.

Every string a report or a listing shows may be hostile: an agent's or model's name from an imported
file, a task id, a ``--label`` or ``--model`` value, a failure reason, a log line. The renderers build
their output from literal markup plus such strings, so a string must never become markup itself: an
``<img onerror=...>`` in an imported ``agent_name`` ran in the browser that opened the HTML report.

WHY a copy of the whole document rather than escaping where each field is used: the renderers
interpolate dozens of fields in hundreds of places, and one forgotten field is the hole. The top-level
renderers (:func:`orchestrator.report.markdown.render`, the terminal report, the comparison renderers)
take the document, and the first thing they do is replace every string in it, dict keys included,
with its escaped form for their format (:func:`escaped`). Whatever a renderer then interpolates is
text. Literal markup (headings, ``**bold**``, rich's ``[bold]``) is the renderer's own.

The escapes keep the strings the renderers compare against (outcome names such as ``infra_error``,
labels such as ``1x-strict``, reasons such as ``oom_killed``) unchanged: only characters that can start
markup are touched, and ``_`` only where it could (CommonMark never opens emphasis inside a word).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import TypeVar

from rich.markup import escape as rich_escape

T = TypeVar("T")

# Bidirectional overrides and isolates reorder what a reader sees (a name that displays as another);
# C0, DEL and C1 controls move a terminal's cursor, recolour it or retitle its window.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _visible(ch: str) -> str:
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible_controls(text: str) -> str:
    """Control and bidi characters spelled out (``\\x1b``, ``\\n``, ``\\u202e``): shown, never obeyed."""
    if text.isprintable() and not _BIDI.intersection(text):
        return text
    return "".join(_visible(ch) if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in text)


# Characters that can open markup anywhere in CommonMark or GitHub's Markdown: \ ` * [ ] < > & ~ # |
# (a pipe ends a table cell). "!" and "(" only act after "[" or "]", which are escaped.
_MD_ANYWHERE = re.compile(r"([\\`*\[\]<>&~#|])")
# "_" opens or closes emphasis only where a word does not continue on both sides.
_MD_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# At the start of a line (a list item's text is one): a list marker ("- ", "+ ", "1. "), a thematic break or
# a setext underline ("---", "==="). "#", ">" and "*" are escaped everywhere already; "0.5x" is left as it is.
_MD_LINE_START = re.compile(r"^(\s*(?:\d+)?)([-+=.)])(?=[\s\-+=]|$)")


def markdown_text(text: str) -> str:
    """``text`` as Markdown that renders to exactly ``text``: markup characters backslash-escaped, raw HTML
    impossible (``<`` and ``&`` are escaped), line breaks and controls spelled out (a line break would end a
    table row or start a heading)."""
    text = visible_controls(text)
    text = _MD_ANYWHERE.sub(r"\\\1", text)
    text = _MD_UNDERSCORE.sub(r"\\_", text)
    return _MD_LINE_START.sub(r"\1\\\2", text, count=1)


def terminal_text(text: str) -> str:
    """``text`` as rich markup that prints exactly ``text``: controls spelled out (no escape sequence reaches
    the terminal), anything rich reads as a tag escaped."""
    return rich_escape(visible_controls(text))


def escaped(value: T, fn: Callable[[str], str]) -> T:
    """A copy of ``value`` (a pydantic model, dict, list or tuple, nested) with ``fn`` applied to every string
    in it, dict keys and the extra fields of open models included. The original is not changed."""
    return _walk(value, fn)  # type: ignore[return-value]


def _walk(value: object, fn: Callable[[str], str]) -> object:
    from pydantic import BaseModel  # here, not at the top: the CLI imports this module for its error line

    if isinstance(value, str):
        return fn(value)
    if isinstance(value, BaseModel):
        update = {name: _walk(getattr(value, name), fn) for name in type(value).model_fields}
        update.update({k: _walk(v, fn) for k, v in (value.__pydantic_extra__ or {}).items()})
        return value.model_copy(update=update)
    if isinstance(value, dict):
        return {_walk(k, fn): _walk(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, fn) for v in value)
    if isinstance(value, frozenset):
        return frozenset(_walk(v, fn) for v in value)
    return value


def for_markdown(doc: T) -> T:
    return escaped(doc, markdown_text)


def for_terminal(doc: T) -> T:
    return escaped(doc, terminal_text)
