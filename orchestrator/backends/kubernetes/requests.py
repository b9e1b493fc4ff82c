"""Count every request the backend makes to the API server (LIST, WATCH, POST, PATCH, DELETE, GET).

Every call of the official client goes through ``ApiClient.call_api``; wrapping that
one method counts them all, watches included, without touching the callers.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, urlsplit

_COLLECTIONS = {"pods", "configmaps", "secrets", "events", "nodes", "namespaces", "resourcequotas",
                "limitranges", "runtimeclasses", "version", "leases", "networkpolicies"}


class RequestCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_kind: Counter[str] = Counter()

    def install(self, api_client: Any) -> None:
        inner = api_client.call_api

        def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            self.add(method, url)
            return inner(method, url, *args, **kwargs)

        api_client.call_api = counted

    def add(self, method: str, url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        watch = any(v.lower() in ("true", "1") for v in query.get("watch", []))
        parts = url.split("?", 1)[0].split("://", 1)[-1].split("/")[1:]
        what = "/".join(parts[-2:])
        for i in range(len(parts) - 1, -1, -1):
            if parts[i] in _COLLECTIONS:
                what = parts[i] + ("/{name}" if i + 1 < len(parts) else "") + "".join(f"/{p}" for p in parts[i + 2:])
                break
        with self._lock:
            self.by_kind[f"{'WATCH' if watch else method.upper()} {what}"] += 1

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_kind.values())

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.by_kind)
