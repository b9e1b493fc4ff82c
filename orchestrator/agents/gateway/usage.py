"""Token counts from an upstream's own usage fields, in a plain response or a stream of server-sent events.

``tokens_in`` counts every input token, cached ones included (as ATIF does): OpenAI's
``prompt_tokens`` / ``input_tokens`` already do; Anthropic's ``input_tokens`` leaves out
cache reads and writes, which are added back. ``cached`` is the cache reads among them,
``cache_write`` Anthropic's cache creation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC_MESSAGES = "anthropic-messages"
#: A count above this is not a count (an upstream bug must not make a run's totals absurd).
MAX_TOKENS = 10**10


@dataclass
class Usage:
    tokens_in: int | None = None
    tokens_out: int | None = None
    cached: int = 0
    cache_write: int = 0
    model: str | None = None
    #: the upstream's final usage was read (a stream cut short has at most a first count: not complete)
    complete: bool = False

    @property
    def known(self) -> bool:
        return self.tokens_in is not None or self.tokens_out is not None


def _n(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TOKENS:
        return None
    return int(value)


def _get(obj: Any, *path: str) -> Any:
    for p in path:
        obj = obj.get(p) if isinstance(obj, dict) else None
    return obj


def from_body(api: str, doc: Any, into: Usage | None = None) -> Usage:
    """The usage of a whole (non-streamed) response body."""
    u = into or Usage()
    if not isinstance(doc, dict):
        return u
    if isinstance(doc.get("model"), str):
        u.model = doc["model"]
    usage = doc.get("usage")
    if not isinstance(usage, dict):
        return u
    u.complete = True
    if api == OPENAI_CHAT:
        u.tokens_in = _n(usage.get("prompt_tokens"))
        u.tokens_out = _n(usage.get("completion_tokens"))
        u.cached = _n(_get(usage, "prompt_tokens_details", "cached_tokens")) or 0
    elif api == OPENAI_RESPONSES:
        u.tokens_in = _n(usage.get("input_tokens"))
        u.tokens_out = _n(usage.get("output_tokens"))
        u.cached = _n(_get(usage, "input_tokens_details", "cached_tokens")) or 0
    elif api == ANTHROPIC_MESSAGES:
        _anthropic(u, usage)
    return u


def _anthropic(u: Usage, usage: dict[str, Any]) -> None:
    # A stream's message_delta repeats only what changed: keep what message_start said otherwise.
    read = _n(usage.get("cache_read_input_tokens"))
    write = _n(usage.get("cache_creation_input_tokens"))
    if read is not None:
        u.cached = read
    if write is not None:
        u.cache_write = write
    plain = _n(usage.get("input_tokens"))
    if plain is not None:
        u.tokens_in = plain + u.cached + u.cache_write
    out = _n(usage.get("output_tokens"))
    if out is not None:
        u.tokens_out = out


class StreamUsage:
    """Feed it each server-sent event of a streamed response; it keeps the usage the upstream reported.

    OpenAI chat: the last chunk carries ``usage`` (the gateway asks for it with
    ``stream_options.include_usage``). OpenAI responses: the ``response.completed`` event.
    Anthropic: ``message_start`` (input, cache, model), then ``message_delta`` (output so far).
    """

    def __init__(self, api: str) -> None:
        self.api = api
        self.usage = Usage()
        self.error: dict[str, Any] | None = None  # an error event the upstream sent inside the stream

    def feed(self, event: bytes) -> None:
        data = b"\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:"))
        if not data or data.strip() == b"[DONE]":
            return
        try:
            doc = json.loads(data)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        if isinstance(doc.get("error"), dict) and self.error is None:  # both providers' error events
            self.error = doc
        if self.api == OPENAI_CHAT:
            if isinstance(doc.get("model"), str):
                self.usage.model = doc["model"]
            if isinstance(doc.get("usage"), dict):
                from_body(OPENAI_CHAT, doc, self.usage)
        elif self.api == OPENAI_RESPONSES:
            if doc.get("type") in ("response.completed", "response.incomplete", "response.failed"):
                from_body(OPENAI_RESPONSES, doc.get("response"), self.usage)
            elif isinstance(_get(doc, "response", "model"), str):
                self.usage.model = doc["response"]["model"]
        elif self.api == ANTHROPIC_MESSAGES:
            if doc.get("type") == "message_start" and isinstance(doc.get("message"), dict):
                from_body(ANTHROPIC_MESSAGES, doc["message"], self.usage)
                self.usage.complete = False  # the output count comes with message_delta
            elif doc.get("type") == "message_delta" and isinstance(doc.get("usage"), dict):
                _anthropic(self.usage, doc["usage"])
                self.usage.complete = True
