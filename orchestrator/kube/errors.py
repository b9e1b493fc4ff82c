"""What a failed API request means to its caller: one mapping for the backend and the controller."""

from __future__ import annotations

import enum
import json

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

#: What an unreachable or failing API server raises through the client.
API_ERRORS = (ApiException, HTTPError, OSError)


class Failure(enum.Enum):
    UNREACHABLE = "unreachable"  # no answer (refused or reset, timeout, 5xx), or a quota not counted yet: retry later
    THROTTLED = "throttled"  # 429, or a full ResourceQuota: wait as long as it takes
    CONFLICT = "conflict"  # 409 or a failed JSON-patch test (422 on a stale precondition): re-read and retry
    NOT_FOUND = "not_found"  # 404 (the object is gone)
    GONE = "gone"  # 410: a resourceVersion too old to watch from: relist
    REFUSED = "refused"  # any other 4xx: the request as written can never succeed


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and status > 0 else None


def api_message(exc: BaseException) -> str:
    """The API server's own message from a Status body, else the exception's text (one line)."""
    body = getattr(exc, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (TypeError, ValueError, AttributeError):
        message = None
    text = message or (f"{getattr(exc, 'status', '')} {getattr(exc, 'reason', '')}".strip() or str(exc))
    return " ".join(str(text).split())[:450]


def classify(exc: BaseException) -> Failure:
    status = status_of(exc)
    if status is None or status >= 500 or status == 408:
        return Failure.UNREACHABLE
    body = str(getattr(exc, "body", "") or "")
    if status == 429 or (status == 403 and "exceeded quota" in body):
        return Failure.THROTTLED
    if status == 403 and "status unknown for quota" in body:
        # The quota controller has not counted a quota's usage yet (one made a moment ago): it will, so retry; a
        # quota it can never count stays refused once api_retry_s is over, instead of a wait with no end.
        return Failure.UNREACHABLE
    if status == 409:
        return Failure.CONFLICT
    if status == 404:
        return Failure.NOT_FOUND
    if status == 410:
        return Failure.GONE
    return Failure.REFUSED
