"""What kind of failure an upstream call met: the provider's side (rate limit, quota, authentication, a server
error, a timeout, a broken connection) or the agent's own (a request the provider refused).

The class is read from the status and the provider's own error shape, never from the agent's request:
OpenAI's ``{"error": {"type", "code", "message"}}`` and Anthropic's ``{"type": "error", "error": {"type",
"message"}}``, in a plain body or as an error event inside a stream. A class is stored as the first word
of the call's ``error`` (``rate_limit: ...``), so the store's schema is unchanged.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final

RATE_LIMIT: Final = "rate_limit"  # 429 without a word about quota: wait and call again
QUOTA: Final = "quota"  # quota, billing, credit or spend cap exhausted: no wait helps
AUTH: Final = "auth"  # the provider refused the gateway's own key (401, 403)
SERVER: Final = "server"  # 5xx, Anthropic's 529 overloaded, an error event inside a stream
TIMEOUT: Final = "timeout"  # the provider did not answer within gateway.timeout_s
CONNECTION: Final = "connection"  # the provider could not be reached, or the stream broke off
#: The provider's side: a try starved by these is infrastructure (docs/agents.md, "Starved tries").
UPSTREAM: Final = frozenset({RATE_LIMIT, QUOTA, AUTH, SERVER, TIMEOUT, CONNECTION})
#: Classes the gateway gives its own refusals: never counted as the provider's failures.
LIMIT: Final = "limit"  # the try's token, cost or working-time limit is spent
REQUEST: Final = "request"  # any other 4xx: the provider refused what the agent sent

#: Money, not a rate: in the error's type or code (OpenAI's insufficient_quota, billing_hard_limit_reached,
#: billing_not_active; a proxy's budget_exceeded), or at the start of its message (Anthropic's credit and
#: spend-limit errors, OpenAI's quota message, a proxy's "Budget has been exceeded"). The message is matched at its start only: a provider's message can quote what the agent
#: sent (a model name, say), and an agent must not be able to word its own request error into a quota error.
_QUOTA_KIND = re.compile(r"quota|billing|credit|spend|budget", re.I)
_QUOTA_MESSAGE = re.compile(
    r"^\s*(your credit balance is too low|you have reached your specified api usage limits|"
    r"you exceeded your current quota|you have insufficient (credits|quota)|insufficient (credits|quota|balance)|"
    r"budget has been exceeded)",
    re.I,
)
_CLASS_RE = re.compile(r"^([a-z_]+): ")


def _error_doc(body: Any) -> tuple[str, str]:
    """(type and code, message) of a provider's error body, in either shape; empty strings when there is none."""
    if not isinstance(body, dict):
        return "", ""
    err = body.get("error")
    if isinstance(err, str):
        return err, ""
    if not isinstance(err, dict):
        return "", ""
    words = " ".join(str(err.get(k)) for k in ("type", "code") if isinstance(err.get(k), str))
    message = err.get("message")
    return words, message if isinstance(message, str) else ""


def parse_body(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def classify(status: int, body: Any = None) -> str | None:
    """The class of a call that ended with ``status`` and (for an error) the provider's error body; None: no failure.

    ``body`` is the parsed JSON (a plain error body, or the ``data`` of a stream's error event).
    """
    kind, message = _error_doc(body)
    if status < 400 and not kind:
        return None
    money = bool(_QUOTA_KIND.search(kind) or _QUOTA_MESSAGE.match(message))
    if status == 429 or "rate_limit" in kind:
        return QUOTA if money else RATE_LIMIT
    if status == 402 or (status in (400, 403) and money):
        return QUOTA
    if status in (401, 403) or "authentication" in kind or "permission" in kind:
        return AUTH
    if status in (408, 504) or "timeout" in kind:
        return TIMEOUT
    if status >= 500 or "overloaded" in kind or "server_error" in kind or "api_error" in kind:
        return SERVER
    if status < 400:  # an error event inside a 200 stream, of a kind not named above: the provider's failure
        return SERVER
    return REQUEST


def of_error(text: str | None) -> str | None:
    """The class a recorded call's ``error`` starts with."""
    m = _CLASS_RE.match(text or "")
    return m.group(1) if m and m.group(1) in UPSTREAM | {LIMIT, REQUEST} else None


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date); None: absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None if math.isnan(seconds) or seconds < 0 else 86_400.0
    return min(max(seconds, 0.0), 86_400.0)  # a date in the past: no wait
