"""What the gateway keeps in memory while a try runs: enough of each call to enforce the try's limits, tell a
starved try, and trip the run's circuit breaker, without waiting on the store.

Working time runs from the try's first call (so a pod's scheduling or an image pull before the agent
started is never the agent's time), and leaves out the time spent waiting on the provider (as Inspect's working limit leaves out
rate-limit retries): each call that failed on the provider's side, and the pause after it until the try's
next call, up to the provider's ``Retry-After`` (60 s when it gave none).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.agents.gateway import failures
from orchestrator.agents.gateway.keys import REMEMBER_ENDED
from orchestrator.artifacts.sink import TryKey
from orchestrator.spec.facts import Starved
from orchestrator.spec.gateway import Breaker, TrialLimits

#: The "last minute" of the starved rule, and the longest pause after a failed call left out of working time
#: when the provider named none.
WINDOW_S = 60.0
PAUSE_S = 60.0


@dataclass
class Note:
    started: float  # monotonic
    ended: float
    status: int
    failure: str | None
    retry_after: float | None = None
    tokens: int = 0
    cost: float = 0.0
    usage_missing: bool = False


@dataclass
class TryLedger:
    started: float = field(default_factory=time.monotonic)
    notes: list[Note] = field(default_factory=list)
    limit_hit: str | None = None

    def tokens(self) -> int:
        return sum(n.tokens for n in self.notes)

    def cost(self) -> float:
        return sum(n.cost for n in self.notes)

    def backoff(self, now: float) -> float:
        """Seconds spent waiting on the provider: its failed calls and the pause after each."""
        starts = sorted(n.started for n in self.notes)
        spans: list[tuple[float, float]] = []
        for n in self.notes:
            if n.failure not in failures.UPSTREAM:
                continue
            i = bisect.bisect_left(starts, n.ended)  # the try's next call after this one ended
            cap = n.retry_after if n.retry_after is not None else PAUSE_S
            spans.append((n.started, min(starts[i] if i < len(starts) else now, n.ended + cap)))
        total, reach = 0.0, self.started
        for a, b in sorted(spans):  # overlapping waits (concurrent calls) are counted once
            a = max(a, reach)
            if b > a:
                total += b - a
                reach = b
        return total

    def working_time(self, now: float) -> tuple[float, float]:
        """(working time, time left out) in seconds."""
        wait = self.backoff(now)
        return max(now - self.started - wait, 0.0), wait

    def spent(self, limits: TrialLimits, now: float) -> str | None:
        """The limit spent, if any (checked before each call is forwarded)."""
        if self.limit_hit is None:
            if limits.tokens is not None and self.tokens() >= limits.tokens:
                self.limit_hit = "tokens"
            elif limits.cost_usd is not None and self.cost() >= limits.cost_usd:
                self.limit_hit = "cost"
            elif limits.working_time_s is not None and self.working_time(now)[0] >= limits.working_time_s:
                self.limit_hit = "working_time"
        return self.limit_hit

    def starved(self) -> Starved | None:
        """The try's provider starved it: its last call failed on the provider's side, or most of the calls it
        started in the minute up to its last call did. The gateway's own refusals are no calls of the provider's."""
        calls = sorted((n for n in self.notes if n.failure != failures.LIMIT), key=lambda n: n.started)
        if not calls:
            return None
        last = calls[-1]
        window = [n for n in calls if n.started >= last.started - WINDOW_S]
        failed = sum(1 for n in window if n.failure in failures.UPSTREAM)
        rule: Literal["final_call", "last_minute"]
        if last.failure in failures.UPSTREAM:
            rule = "final_call"
        elif failed * 2 > len(window):
            rule = "last_minute"
        else:
            return None
        after = next((n.retry_after for n in reversed(calls) if n.retry_after is not None), None)
        return Starved(
            rule=rule,
            final_call=f"{last.status} {last.failure or 'ok'}",
            window_calls=len(window),
            window_failed=failed,
            retry_after_s=after,
        )


class Ledgers:
    """Every running try's ledger, and the run's breaker. Written from the gateway's event loop, read by the engine."""

    def __init__(self, limits: TrialLimits, breaker: Breaker | None) -> None:
        self.limits = limits
        self._breaker = breaker
        self._lock = threading.Lock()
        self._tries: dict[TryKey, TryLedger] = {}
        self._ended: OrderedDict[TryKey, None] = OrderedDict()  # a late call of an ended try opens no new ledger
        self._recent: deque[str | None] = deque(maxlen=breaker.calls if breaker else 1)
        self.tripped: str | None = None

    def check(self, key: TryKey) -> str | None:
        """Before a call is forwarded: the limit the try has spent, if any (its first call starts its clock)."""
        with self._lock:
            ledger = self._tries.setdefault(key, TryLedger())
            return ledger.spent(self.limits, time.monotonic())

    def add(self, key: TryKey, note: Note) -> None:
        with self._lock:
            if key not in self._ended:
                self._tries.setdefault(key, TryLedger()).notes.append(note)
            if note.failure in (failures.LIMIT, failures.REQUEST) or self._breaker is None:
                return  # the agent's own doing, or the gateway's refusal: nothing about the provider
            self._recent.append(note.failure)
            failed = Counter(f for f in self._recent if f is not None)
            n = sum(failed.values())
            if self.tripped is None and len(self._recent) == self._breaker.calls:
                if n >= self._breaker.failed_fraction * self._breaker.calls:
                    kinds = ", ".join(f"{k} {v}" for k, v in failed.most_common())
                    self.tripped = (
                        f"{n} of the run's last {self._breaker.calls} model calls failed at the provider ({kinds})"
                    )

    def end(self, key: TryKey) -> TryLedger:
        with self._lock:
            self._ended[key] = None
            while len(self._ended) > REMEMBER_ENDED:
                self._ended.popitem(last=False)
            return self._tries.pop(key, None) or TryLedger()
