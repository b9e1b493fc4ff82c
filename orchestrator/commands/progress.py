"""Sweep progress with the outcome tally so far: a live bar on a terminal, plain lines otherwise.

When stderr is not a terminal (a CI log, ``2>file``, nohup) rich cannot redraw a bar, and would print
it only when the sweep ends; there a plain line is printed at every further 10% of the plan and at
least every 30 s (a heartbeat while long trials run), so a log shows how far a sweep got.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from orchestrator.engine.classify import Verdict
from orchestrator.engine.plan import Trial

#: Plain mode: a line at every 1/STEPS of the plan (integer arithmetic: 3 of 10 is 30%), and after
#: HEARTBEAT_S seconds without one.
STEPS = 10
HEARTBEAT_S = 30.0
#: Outcomes always shown in a plain line, in this order; any other outcome seen follows them.
SHOWN = ("passed", "failed", "infra_error")


def _clock(seconds: float | None) -> str:
    return "—" if seconds is None else str(timedelta(seconds=int(seconds)))


class SweepProgress:
    def __init__(self, console: Console, *, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.console = console
        self.tally: Counter[str] = Counter()
        self.plain = not console.is_interactive
        self.progress = Progress(
            TextColumn("[bold]sweep[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[tally]}"),
            console=console,
            transient=False,
        )
        self.task_id = self.progress.add_task("sweep", total=None, tally="")
        self.total: int | None = None
        self.done_before = 0  # finished before this session (a --resume): not part of this session's pace
        self.done = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._last_line_at = self.started
        self._last_step = 0
        self._printed_done = -1
        self._heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SweepProgress:
        if self.plain:
            self._thread = threading.Thread(target=self._heartbeat, name="sweep-progress", daemon=True)
            self._thread.start()
        else:
            self.progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self.plain:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            with self._lock:
                if self.total is not None and self._printed_done != self.done:
                    self._line()
        else:
            self.progress.stop()

    def on_pending(self, total: int, done: int) -> None:
        with self._lock:
            self.total, self.done_before, self.done = total, done, done
            self._last_step = done * STEPS // total if total else 0
        self.progress.update(self.task_id, total=total, completed=done)

    def on_result(self, trial: Trial, verdict: Verdict, final: bool) -> None:
        with self._lock:
            if not final:
                self.tally["retried"] += 1
            else:
                key = (
                    f"{verdict.outcome.value}:{verdict.reason}"
                    if verdict.reason == "oom_killed"
                    else verdict.outcome.value
                )
                self.tally[key] += 1
                self.done += 1
                self.progress.advance(self.task_id)
            self.progress.update(self.task_id, tally="  ".join(f"{k} {v}" for k, v in sorted(self.tally.items())))
            if self.plain and self.total:
                step = self.done * STEPS // self.total
                if step > self._last_step:
                    self._last_step = step
                    self._line()

    def _heartbeat(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if self.total is not None and time.monotonic() - self._last_line_at >= self._heartbeat_s:
                    self._line()

    def line(self) -> str:
        """finished/planned, the outcomes so far, elapsed and an ETA from this session's pace."""
        total = self.total or 0
        elapsed = time.monotonic() - self.started
        ran = self.done - self.done_before
        eta = elapsed / ran * (total - self.done) if ran > 0 else None
        outcomes: Counter[str] = Counter()
        for k, v in self.tally.items():
            if k != "retried":
                outcomes[k.split(":")[0]] += v
        shown = [*SHOWN, *sorted(k for k in outcomes if k not in SHOWN)]
        parts = ", ".join(
            f"{k.replace('_error', '')} {outcomes[k]}" if k == "infra_error" else f"{k} {outcomes[k]}" for k in shown
        )
        if oom := self.tally.get("infra_error:oom_killed"):
            parts += f" (oom {oom})"
        if self.tally.get("retried"):
            parts += f"; {self.tally['retried']} tries retried"
        pct = f" ({self.done / total:.0%})" if total else ""
        return (
            f"sweep: {self.done}/{total} trials finished{pct}: {parts}; elapsed {_clock(elapsed)}, "
            f"eta {_clock(eta) if self.done < total else '0:00:00'}"
        )

    def _line(self) -> None:  # with self._lock held
        self.console.print(self.line(), soft_wrap=True, highlight=False)
        self._last_line_at = time.monotonic()
        self._printed_done = self.done
