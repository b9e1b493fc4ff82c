"""A live progress bar for sweeps, with the outcome tally so far."""

from __future__ import annotations

from collections import Counter
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from orchestrator.classify import Verdict
from orchestrator.plan import Trial


class SweepProgress:
    def __init__(self, console: Console) -> None:
        self.tally: Counter[str] = Counter()
        self.progress = Progress(
            TextColumn("[bold]sweep[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[tally]}"),
            console=console, transient=False,
        )
        self.task_id = self.progress.add_task("sweep", total=None, tally="")

    def __enter__(self) -> "SweepProgress":
        self.progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.stop()

    def on_pending(self, total: int, done: int) -> None:
        self.progress.update(self.task_id, total=total, completed=done)

    def on_result(self, trial: Trial, verdict: Verdict, final: bool) -> None:
        if not final:
            self.tally["retried"] += 1
        else:
            key = f"{verdict.outcome.value}:{verdict.reason}" if verdict.reason == "oom_killed" else verdict.outcome.value
            self.tally[key] += 1
            self.progress.advance(self.task_id)
        self.progress.update(self.task_id, tally="  ".join(f"{k} {v}" for k, v in sorted(self.tally.items())))
