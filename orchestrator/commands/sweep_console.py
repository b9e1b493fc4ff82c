"""A sweep's events (orchestrator/engine/events.py) as the terminal shows them, on stderr.

``run_and_show`` is what the sweep verbs call: the engine's one entry point, its events shown here; ``finish``
prints the report a sweep or a resume ends with. The engine reports; this renders: the backend and what it enforces, the canary's verdict, the oracle
check, the live progress (orchestrator/commands/progress.py) and how the session ended.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from orchestrator.commands.console import err
from orchestrator.commands.options import FULL_REPORT
from orchestrator.engine import events

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend
    from orchestrator.commands.progress import SweepProgress
    from orchestrator.engine.entry import Resume
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.provenance import Provenance
    from orchestrator.store.sqlite import Store


class SweepConsole:
    """An ``on_event`` for :func:`orchestrator.engine.entry.run_sweep` that prints each event on stderr."""

    def __init__(self) -> None:
        self.progress: SweepProgress | None = None

    def __call__(self, event: events.Event) -> None:
        match event:
            case events.ShortSecret(name=name, shorter_than=least):
                err.print(
                    f"note: --agent-env {name}: its value is shorter than {least} characters; it is "
                    "redacted as a secret all the same, so that text is wiped wherever it appears in outputs and "
                    "trajectories (pass only secrets with --agent-env)",
                    soft_wrap=True,
                    markup=False,
                )
            case events.NothingToResume(run_id=run_id, trials=trials):
                err.print(
                    f"run {run_id}: all {trials} trials are already finished; nothing to resume "
                    "(the run and its record are unchanged)"
                )
            case events.Resuming(run_id=run_id, store_path=store_path):
                err.print(f"resuming run {run_id} from {store_path}")
            case events.EnforcementChanged(started_under=started_under, now=now):
                err.print(
                    f"[bold yellow]warning:[/] this run started under {started_under}; the rest runs under "
                    f"{now}. Each trial records its own enforcement."
                )
            case events.BackendReady(backend=backend):
                announce(backend)
            case events.OracleCheckStarting(tasks=tasks, configurations=configurations):
                err.print(
                    f"oracle check: {tasks} tasks x {configurations} configurations, the task's own "
                    "solution once each (a run of its own, kept apart from the agent's)"
                )
            case events.OracleCheckDone(record=record, lines=found):
                for line in found:
                    err.print(f"[bold yellow]oracle check:[/] {escape(line)}", soft_wrap=True)
                if not found:
                    err.print(
                        f"oracle check: every task's oracle passes under every configuration (run {record.run_id})"
                    )
            case events.RunRecorded() as rec:
                announce_checks(rec.provenance)
                err.print(
                    f"run {rec.run_id}: {rec.tasks} tasks x {rec.configurations} configurations x "
                    f"{rec.attempts} attempts -> {rec.store_path}"
                )
            case events.CanaryRerun(verdict=verdict):
                from orchestrator.engine.canary_verdict import describe

                for line in describe(verdict):
                    err.print(f"(resume) {line}", soft_wrap=True)
            case events.TriesStarting():
                from orchestrator.commands.progress import SweepProgress

                self.progress = SweepProgress(err).__enter__()
            case events.Pending(total=total, done=done):
                if self.progress is not None:
                    self.progress.on_pending(total, done)
            case events.TryDone(trial=trial, verdict=verdict, final=final):
                if self.progress is not None:
                    self.progress.on_result(trial, verdict, final)
            case events.TriesEnded():
                if self.progress is not None:
                    self.progress.__exit__(None, None, None)
                    self.progress = None
            case events.SessionEnded(run_id=run_id, store_path=store_path, summary=s):
                if s.interrupted and s.paused:
                    err.print(
                        f"[bold]paused[/]: the model provider is failing: {escape(s.paused)}. {s.ran} tries recorded "
                        f"this session; no new try was started. When the provider is back: headroom resume "
                        f"{store_path}:{run_id}"
                    )
                elif s.interrupted:
                    err.print(
                        f"[bold]interrupted[/]: {s.ran} tries recorded this session; nothing finished is lost. "
                        f"Resume with: headroom resume {store_path}:{run_id}"
                    )
                elif s.already_done:
                    err.print(f"{s.already_done} trials were already finished and were not re-run")


def announce(backend: Backend) -> None:
    caps = backend.abilities
    if caps.enforcement == "rlimit":
        local = backend.facts().local
        err.print(
            "[bold yellow]enforcement: rlimit[/] — no cgroup could be created"
            f" ({local.enforcement_fallback_reason if local else None}). Memory is capped with RLIMIT_DATA; OOM kills cannot be"
            " observed and CPU limits are NOT enforced. Results are recorded with enforcement=rlimit.",
            soft_wrap=True,
        )
    else:
        err.print(
            f"backend: {backend.name}, enforcement: {caps.enforcement} ({', '.join(caps.enforced())}; "
            f"OOM from {caps.oom_signal}); isolation: {caps.isolation}",
            soft_wrap=True,
        )
    if caps.isolation == "none":
        err.print(
            "[bold red]isolation: none[/] — agents are not sandboxed; recorded in provenance and in every report",
            soft_wrap=True,
        )
    for note in caps.notes:
        err.print(f"[yellow]note:[/] {note}", soft_wrap=True)


def announce_checks(prov: Provenance) -> None:
    """The canary's verdict and overcommit warnings, before the first trial runs."""
    from orchestrator.engine.canary_verdict import describe

    for line in describe(prov.canary):
        err.print(line, soft_wrap=True)
    for w in prov.overcommit.warnings if prov.overcommit else []:
        err.print(f"[bold yellow]overcommit:[/] {w}", soft_wrap=True)


#: What a sweep or a resume may print when it ends (``none``: nothing; ``headroom report`` has more formats).
REPORT_FORMATS = ("table", "json", "markdown", "none")


def run_and_show(
    what: Experiment | Resume,
    store_path: Path,
    *,
    enforcement: str,
    canary: bool = True,
    oracle_check: bool = False,
) -> tuple[Store, str, bool]:
    """The engine's sweep (orchestrator/engine/entry.py), its events shown on stderr: (store, run_id, interrupted)."""
    from orchestrator.engine.entry import SweepOptions, run_sweep

    options = SweepOptions(enforcement=enforcement, canary=canary, oracle_check=oracle_check, argv=sys.argv)
    done = run_sweep(what, store_path, options, SweepConsole())
    return done.store, done.run_id, done.interrupted


def print_report(store: Store, run_id: str, fmt: str, compact: bool = False) -> None:
    """``headroom report``'s printing (imported when a sweep ends: the report's libraries are heavy)."""
    from orchestrator.commands.report import print_report as show

    show(store, run_id, fmt, compact=compact)


def finish(ctx: click.Context, fmt: str, store: Store, run_id: str, interrupted: bool) -> None:
    """The report a sweep or a resume prints when it ends; 130 when it was interrupted."""
    if fmt != "none":  # as a table, the summary unless --full-report asked for the whole report
        print_report(store, run_id, fmt, compact=not ctx.meta.get(FULL_REPORT, False))
    if interrupted:
        ctx.exit(130)
