"""Count every request sent to the API server, in the API server's own vocabulary.

One counter per client (``KubeClient.requests``); when the client has the controller's
metrics, each request is also counted there, by verb, resource and status code.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from urllib.parse import parse_qs, urlsplit

_NAMED = re.compile(
    r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/(?P<resource>[^/]+)(?P<name>/[^/]+)?(?P<sub>/[^/]+)?"
)
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def describe(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of a request URL: ``("watch", "pods")``, ``("patch", "pods")``, ``("get", "pods/log")``."""
    parts = urlsplit(url)
    m = _NAMED.match(parts.path)
    if m is None:
        return method.lower(), parts.path.strip("/").split("/")[0] or "other"  # /version, /healthz
    resource = m.group("resource")
    if resource == "namespaces" and m.group("name") and m.group("sub"):
        # /api/v1/namespaces/ns/pods: the path names a namespace then the resource
        rest = parts.path.split("/namespaces/", 1)[1].split("/")
        resource = rest[1] if len(rest) > 1 else "namespaces"
        has_name = len(rest) > 2
        sub = f"/{rest[3]}" if len(rest) > 3 else ""
    else:
        has_name = m.group("name") is not None
        sub = m.group("sub") or ""
    verb = _VERBS.get(method.upper(), method.lower())
    if verb == "get" and not has_name:
        verb = "watch" if parse_qs(parts.query).get("watch", [""])[0].lower() in ("true", "1") else "list"
    elif verb == "delete" and not has_name:
        verb = "deletecollection"
    return verb, resource + sub


class RequestCounter:
    """Requests sent, by ``"<verb> <resource>"`` (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_kind: Counter[str] = Counter()

    def add(self, verb: str, resource: str) -> None:
        with self._lock:
            self.by_kind[f"{verb} {resource}"] += 1

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_kind.values())

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.by_kind)
