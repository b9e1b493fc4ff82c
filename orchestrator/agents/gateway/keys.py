"""Per-try keys: random, handed to one try, valid from its launch until its result is recorded."""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from orchestrator.artifacts.sink import TryKey

PREFIX = "hr-try-"
#: Ended tries remembered, so a late call is recorded against its try (as rejected) rather than lost.
REMEMBER_ENDED = 100_000


@dataclass(frozen=True)
class Holder:
    key: TryKey
    active: bool


class TryKeys:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_try: dict[TryKey, str] = {}
        self._active: dict[str, TryKey] = {}
        self._ended: OrderedDict[str, TryKey] = OrderedDict()

    def open(self, key: TryKey) -> str:
        """The try's key, minted on first use (the engine builds a try's launch more than once)."""
        with self._lock:
            token = self._by_try.get(key)
            if token is None:
                token = PREFIX + secrets.token_urlsafe(32)
                self._by_try[key] = token
                self._active[token] = key
            return token

    def close(self, key: TryKey) -> str | None:
        """End the try's key: from now on it is refused. Returns the key (for redaction), if there was one."""
        with self._lock:
            token = self._by_try.pop(key, None)
            if token is not None:
                self._active.pop(token, None)
                self._ended[token] = key
                while len(self._ended) > REMEMBER_ENDED:
                    self._ended.popitem(last=False)
            return token

    def lookup(self, token: str) -> Holder | None:
        with self._lock:
            if token in self._active:
                return Holder(self._active[token], True)
            if token in self._ended:
                return Holder(self._ended[token], False)
            return None

    def open_tries(self) -> list[TryKey]:
        with self._lock:
            return list(self._by_try)
